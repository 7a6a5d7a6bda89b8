#!/bin/bash
# run with TMPDIR inside the package: refused "where nothing is written", but a probe file is created and
# unlinked inside the package first (the folder's mtime changes).
. /tmp/attack3/repro/_env.sh
D=$SP/executorch/exir/emit
before=$(stat -c %y "$D")
cd /tmp && TMPDIR=$D strace -f -qq -e trace=openat,unlink -o "$W/st" $PY -m executorch_device_guard run -- true 2>"$W/err"; rc=$?
after=$(stat -c %y "$D")
echo "rc=$rc: $(cat "$W/err")"; echo "folder mtime before=$before after=$after"
grep -E "\"$D/[a-z0-9_]{8}\"" "$W/st" | grep -e O_CREAT -e unlink
if [ "$before" != "$after" ]; then echo "DEFECT: run wrote into the package it refused to use"; exit 1; fi
exit 0
