#!/usr/bin/env bash
# Steps of the GPU run (docs/gpu.md): on a CUDA machine with python3 and torch, and
# ExecuTorch $ET (default 1.5.1) carried as wheels in .whl/ (no network there). Installs them
# into /tmp/site, never into the machine's own Python, then runs gpu/run_gpu.py.
set -uo pipefail
source "$(dirname "$0")/install.sh"
nvidia-smi -L
PYTHONUNBUFFERED=1 python3 gpu/run_gpu.py "$out" "$@" 2>&1 | tee "$out/gpu-log.txt"
