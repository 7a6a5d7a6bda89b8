#!/bin/bash
# run -- env -S "python -I ..." is not refused (python -I, env -u/-i/PYTHONPATH= are); the command runs
# (stock ExecuTorch if it imported it) and only the after-the-fact note appears.
. /tmp/attack3/repro/_env.sh
cd /tmp && $G run -- env -S "$PY -I -c print(4242)" >"$W/out" 2>"$W/err"; rc=$?
echo "rc=$rc out=$(cat "$W/out") err=$(cut -c1-120 "$W/err")"
if grep -q 4242 "$W/out"; then echo "DEFECT: python -I via env -S ran"; exit 1; fi
exit 0
