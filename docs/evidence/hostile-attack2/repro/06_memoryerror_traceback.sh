#!/bin/bash
# Under an address-space limit that lets Python start, apply dies with a MemoryError traceback (exit 1).
. /tmp/attack3/repro/_env.sh
for v in 30000 31000 32000 33000; do
  (ulimit -v $v; $G apply >/dev/null 2>"$W/err"); rc=$?
  if grep -q Traceback "$W/err"; then echo "ulimit -v $v: rc=$rc"; tail -3 "$W/err"; echo "DEFECT: traceback"; exit 1; fi
done
exit 0
