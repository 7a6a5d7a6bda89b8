#!/usr/bin/env bash
# Issue 33's cost target on the H200 (16 cores): bench/bench_check.py, three
# interleaved rounds of the default `check` and `check --model` with the tiny
# Qwen2 decoder (test/models/decoder.py, built from its config; transformers
# from the machine's Python), side by side in one run, with the carried
# ExecuTorch 1.5.1 wheels installed as gpu/install.sh does. About 5 minutes.
# Run as TOOL_AT=<commit> bash gpu/..., the commit written out: the device
# copy's git metadata is not this checkout's. Carry .whl (et151, deps). $OUT gets bench-check-decoder-h200.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-gpu-out}"
ET=1.5.1 OUT="$dest" source gpu/install.sh || exit
out="$dest/bench-check-decoder-h200.txt"
{
    echo "\$ python3 bench/bench_check.py --rounds 3 --model \$PWD/test/models/decoder.py:make   # $(date -u +%F), H200 machine, tool at ${TOOL_AT:-?}"
    nvidia-smi -L
    python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
} >"$out" 2>&1
timeout 540 python3 bench/bench_check.py --rounds 3 --model "$PWD/test/models/decoder.py:make" >>"$out" 2>&1
echo "exit $?" >>"$out"
cat "$out"
