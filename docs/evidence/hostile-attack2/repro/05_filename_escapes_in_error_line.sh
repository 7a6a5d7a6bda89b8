#!/bin/bash
# A stale dist-info whose name holds a newline and terminal escapes: the "one line" error is 2 lines and
# carries raw ESC sequences (clear screen) to the terminal. (Lock holders' command lines are escaped; paths are not.)
. /tmp/attack3/repro/_env.sh
cp -a "$SP/executorch-1.5.1.dist-info" "$SP/executorch-1.5.0"$'\n\e[2J\e[31m'"FAKE.dist-info"
$G apply 2>"$W/err"; rc=$?
cat -A "$W/err"
lines=$(wc -l <"$W/err")
echo "rc=$rc stderr lines=$lines"
if [ "$lines" -ne 1 ] || grep -q $'\e' "$W/err"; then echo "DEFECT: not one clean line"; exit 1; fi
exit 0
