#!/usr/bin/env bash
# Takes about 5 minutes on the H200; at most 9.5 (each step has a timeout, the
# longest the swin_t check, 290 s), within the device tool's 10 per command.
# `check` where its users are (issue 27), with the carried wheels installed as
# gpu/install.sh does:
# 1. which preload step leaves threads in a warm parent, in the machine's
#    environment and in the warm parent's (gpu/thread_probe.py);
# 2. the default `check`, with its CUDA rows, timed (target: at most 90 s,
#    no line about warm parents);
# 3. `check --model gpu/swin_t.py:make --verbose` (torchvision's swin_t
#    built on CPU), timed: the table, then each row's constants.
# Everything lands in $OUT/h200-check.tgz (6 files beside it: the summary,
# both tables, swin_t's log with its constants, both thread probes).
set -uo pipefail
cd "$(dirname "$0")/.."
dest="${OUT:-gpu-out}"  # gpu/install.sh sets $out
work=/tmp/h200-check
rm -rf "$work" && mkdir -p "$work"
ET=1.5.1 OUT="$work" source gpu/install.sh || exit
summary="$work/summary.txt"
{
    date -u
    nvidia-smi -L
    echo "cores: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
    python3 -c "import sys, torch, torchvision; print('python', sys.version.split()[0], 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
} >"$summary" 2>&1
preload=$(python3 -c "from executorch_device_guard.check.runner import EXPORT_PRELOAD as p; print(' '.join(n.rstrip('?') for n in p))")
# threads-plain: the machine's own environment; threads-warm: the warm
# parent's (warm.WarmParent sets these variables).
OPENBLAS_NUM_THREADS=1 PYTHONPATH="$PYTHONPATH:$PWD" \
    timeout 40 python3 gpu/thread_probe.py $preload >"$work/threads-plain.txt" 2>&1
OPENBLAS_NUM_THREADS=1 PYTORCH_NVML_BASED_CUDA_CHECK=1 \
    JE_ARROW_MALLOC_CONF=background_thread:false PYTHONPATH="$PYTHONPATH:$PWD" \
    timeout 40 python3 gpu/thread_probe.py $preload >"$work/threads-warm.txt" 2>&1
source gpu/timed_check.sh
timed default 120
# --verbose: after the table, each row's constants and each child's stderr.
timed swin-t 290 --model gpu/swin_t.py:make --timeout 240 --verbose
grep -c "warm parent" "$work/default-log.txt" "$work/swin-t-log.txt" |
    sed 's/^/lines about warm parents: /' >>"$summary"
mkdir -p "$dest"
tar czf "$dest/h200-check.tgz" -C "$work" .
cp "$summary" "$work/default.txt" "$work/swin-t.txt" "$work/swin-t-log.txt" \
    "$work/threads-plain.txt" "$work/threads-warm.txt" "$dest/"
cat "$summary" "$work/default.txt" "$work/swin-t.txt"
