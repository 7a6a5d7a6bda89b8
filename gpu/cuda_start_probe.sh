#!/usr/bin/env bash
# What starts a CUDA thread in a warm parent that runs with
# PYTORCH_NVML_BASED_CUDA_CHECK=1 (issue 27): gpu/cuda_start_probe.py on
# check's preloads up to ExecuTorch's backends, with the carried wheels
# (gpu/install.sh). Output: $OUT/cuda-start-probe.txt. About 2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
ET=1.5.1 source gpu/install.sh || exit
{
    date -u
    OPENBLAS_NUM_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1 \
        JE_ARROW_MALLOC_CONF=background_thread:false PYTHONPATH="$PYTHONPATH:$PWD" \
        timeout 400 python3 gpu/cuda_start_probe.py torch.export executorch.exir
} >"$out/cuda-start-probe.txt" 2>&1
tail -c 8000 "$out/cuda-start-probe.txt"
# The same as a warm parent now runs (no GPU visible: warm.WarmParent), on
# through check's preloads to the pattern graphs (warmup.py).
preload=$(python3 -c "from executorch_device_guard.check.runner import EXPORT_PRELOAD as p; print(' '.join(n.rstrip('?') for n in p))")
{
    date -u
    OPENBLAS_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= PYTORCH_NVML_BASED_CUDA_CHECK=1 \
        JE_ARROW_MALLOC_CONF=background_thread:false PYTHONPATH="$PYTHONPATH:$PWD" \
        timeout 300 python3 gpu/cuda_start_probe.py $preload
} >"$out/cuda-start-probe-hidden.txt" 2>&1
tail -c 8000 "$out/cuda-start-probe-hidden.txt"
