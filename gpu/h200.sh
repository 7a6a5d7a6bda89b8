#!/usr/bin/env bash
# The H200 evidence of the current series and tool, in one call of the device
# tool (docs/gpu.md says what each part proves):
# - ExecuTorch 1.5.1, whose Python is the series' base: the issue's reproducer,
#   XNNPACK and Vulkan on a CUDA model, and upstream's CUDA tests with the
#   series' (gpu/run_gpu.py), stock and patched;
# - ExecuTorch 1.2.0, whose compiled libraries load with the machine's torch
#   2.11: every LLM custom op, a Llama step and the runtime given CUDA tensors,
#   stock, under `run` and after `apply` (gpu/run_custom_ops.py).
# Both run side by side. Everything lands in $OUT/h200.tgz (the device tool
# brings back at most 8 files), the tables and the log beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
work=/tmp/h200-out
rm -rf "$work" && mkdir -p "$work"
nvidia-smi -L | tee "$work/nvidia-smi.txt"
(ET=1.5.1 OUT="$work/series" source gpu/install.sh &&
    PYTHONUNBUFFERED=1 timeout 560 python3 gpu/run_gpu.py "$work/series" \
        --only reproducer partitioners cuda-export >"$work/series.log" 2>&1) &
(ET=1.2.0 OUT="$work/custom-ops" source gpu/install.sh &&
    PYTHONUNBUFFERED=1 timeout 560 python3 gpu/run_custom_ops.py "$work/custom-ops" \
        >"$work/custom-ops.log" 2>&1) &
wait
out="${OUT:-gpu-out}"
mkdir -p "$out"
tar czf "$out/h200.tgz" -C "$work" .
cp "$work/custom-ops/table.txt" "$out/custom-ops-table.txt" 2>/dev/null
tail -60 "$work/series.log" | tee "$out/series-log-tail.txt"
cat "$work/custom-ops/table.txt" 2>/dev/null || tail -40 "$work/custom-ops.log"
