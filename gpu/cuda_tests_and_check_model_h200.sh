#!/usr/bin/env bash
# Two jobs side by side in one call of the device tool, ExecuTorch 1.5.1
# installed once (gpu/install.sh):
# - upstream's CUDA tests with 0001's and 0002's, stock and patched
#   (gpu/run_gpu.py --only cuda-export);
# - check --model with a tiny Qwen2 decoder (gpu/check_model_h200.sh).
# Carry .whl (et151, deps). $OUT gets cuda-export.tgz, its log's tail, and
# check_model_h200.sh's files.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-gpu-out}"
mkdir -p "$dest"
work=/tmp/cuda-tests
rm -rf "$work" && mkdir -p "$work"
(ET=1.5.1 OUT="$work" source gpu/install.sh) || exit
(OUT="$work/series" timeout 560 bash gpu/run.sh --only cuda-export >"$work/series.log" 2>&1) &
(OUT="$dest" timeout 560 bash gpu/check_model_h200.sh >"$work/check-model.log" 2>&1) &
wait
tar czf "$dest/cuda-export.tgz" -C "$work" series series.log check-model.log
tail -12 "$work/series.log" | tee "$dest/cuda-export-log-tail.txt"
tail -40 "$work/check-model.log"
