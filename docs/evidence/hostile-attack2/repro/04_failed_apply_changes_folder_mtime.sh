#!/bin/bash
# apply that fails on a write (here: ulimit -f; ENOSPC and EPERM do the same) says "0 of 6 files are now
# patched", but exir/emit's modification time has changed, and neither revert nor apply+revert gives it back.
. /tmp/attack3/repro/_env.sh
D=$SP/executorch/exir/emit
before=$(stat -c %y "$D")
(ulimit -f 40; $G apply); echo "apply rc=$?"
$G revert; $G apply >/dev/null; $G revert >/dev/null
after=$(stat -c %y "$D")
echo "exir/emit mtime before=$before after=$after"
if [ "$before" != "$after" ]; then echo "DEFECT: folder mtime not restored"; exit 1; fi
exit 0
