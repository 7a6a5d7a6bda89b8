#!/usr/bin/env bash
# The GPU run (docs/gpu.md): on a CUDA machine with python3 and torch, and
# ExecuTorch 1.5.1 carried as wheels in .whl/ (no network there). Installs them
# into /tmp/site, never into the machine's own Python, then runs gpu/run_gpu.py.
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site
nvidia-smi -L
PYTHONUNBUFFERED=1 python3 gpu/run_gpu.py "$out" "$@" 2>&1 | tee "$out/gpu-log.txt"
