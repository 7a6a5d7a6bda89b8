#!/usr/bin/env bash
# The series on the H200, in one call of the device tool, two jobs side by side:
# - ExecuTorch 1.5.1 (the series' Python base): the issue's reproducer, XNNPACK and
#   Vulkan on a CUDA model, and upstream's CUDA tests with 0001's and 0002's
#   (gpu/run_gpu.py --only reproducer partitioners cuda-export), stock and patched;
# - 0006's custom ops library built stock and changed from .et-src against the
#   machine's torch, each op called with CUDA tensors, 0006's test and the custom
#   ops' own tests on both builds (gpu/build_custom_ops.sh).
# Carry .whl (et151, deps) and .et-src. Everything lands in $OUT: series.tgz,
# custom-ops-build.tgz, the logs' tails and tables beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-gpu-out}"
mkdir -p "$dest"
work=/tmp/series-h200
rm -rf "$work" && mkdir -p "$work"
nvidia-smi -L | tee "$work/nvidia-smi.txt"
(ET=1.5.1 OUT="$work" source gpu/install.sh) || exit  # once, before the two jobs
(OUT="$work/series" timeout 560 bash gpu/run.sh --only reproducer partitioners cuda-export \
    >"$work/series.log" 2>&1) &
(OUT="$work/ops" timeout 560 bash gpu/build_custom_ops.sh >"$work/ops.log" 2>&1) &
wait
tar czf "$dest/series.tgz" -C "$work" --exclude='ops' .
cp "$work/ops/custom-ops-build.tgz" "$dest/" 2>/dev/null
cp "$work/ops/custom-ops-build-table.txt" "$dest/" 2>/dev/null
tail -40 "$work/series.log" | tee "$dest/series-log-tail.txt"
tail -30 "$work/ops.log" | tee "$dest/ops-log-tail.txt"
