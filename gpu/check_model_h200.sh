#!/usr/bin/env bash
# Takes about 4 minutes on the H200; at most 9.5 (each step has a timeout).
# `check --model` with a tiny Qwen2 decoder built from its config
# (test/models/decoder.py, no download; transformers from the machine's
# Python), issue 33, with the carried ExecuTorch wheels installed as
# gpu/install.sh does:
# 1. the default `check`, timed, for scale;
# 2. `check --model test/models/decoder.py:make --verbose`, timed: the
#    table, each row's constants, each child's stderr.
# Everything lands in $OUT/h200-check-model.tgz, with summary.txt and both
# tables beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-gpu-out}"  # gpu/install.sh sets $out
work=/tmp/h200-check-model
rm -rf "$work" && mkdir -p "$work"
ET=1.5.1 OUT="$work" source gpu/install.sh || exit
summary="$work/summary.txt"
{
    date -u
    nvidia-smi -L
    echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
    python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
    echo "tool at ${TOOL_AT:-?}"  # the device copy's git metadata is not this checkout's
} >"$summary" 2>&1
source gpu/timed_check.sh
timed default 120
timed qwen2 360 --model test/models/decoder.py:make --timeout 300 --verbose
grep -c "warm parent" "$work/default-log.txt" "$work/qwen2-log.txt" |
    sed 's/^/lines about warm parents: /' >>"$summary"
mkdir -p "$dest"
tar czf "$dest/h200-check-model.tgz" -C "$work" .
cp "$summary" "$work/default.txt" "$work/qwen2.txt" "$dest/"
cat "$summary" "$work/default.txt" "$work/qwen2.txt"
