#!/bin/bash
# apply with stdout closed: its output cannot be written, yet exit 0 and no line (apply > /dev/full gives 4).
. /tmp/attack3/repro/_env.sh
$G apply >&- 2>"$W/err"; rc=$?
echo "apply >&- rc=$rc stderr=[$(cat "$W/err")]"
$G revert >/dev/null; $G apply >/dev/full 2>/dev/null; echo "apply >/dev/full rc=$?"
if [ $rc = 0 ] && [ ! -s "$W/err" ]; then echo "DEFECT: silent exit 0"; exit 1; fi
exit 0
