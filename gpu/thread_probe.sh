#!/usr/bin/env bash
# What starts threads in check's warm parents on the GPU machine (issue 27):
# gpu/thread_probe.py over runner.EXPORT_PRELOAD, with ExecuTorch 1.5.1
# carried in .whl/ (gpu/install.sh). About a minute. Output: $OUT/thread-probe.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
source gpu/install.sh
export PYTHONPATH="$PYTHONPATH:$PWD" OPENBLAS_NUM_THREADS=1
modules=$(python3 -c 'from executorch_device_guard.check.runner import EXPORT_PRELOAD as p; print(" ".join(m.rstrip("?") for m in p))')
nproc; python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))'
python3 gpu/thread_probe.py $modules 2>&1 | grep -v "^W[0-9]" | tee "$out/thread-probe.txt"
for i in 1 2 3; do
    /usr/bin/time -f "%e s: import torch, executorch.exir" python3 -c "import torch, executorch.exir" 2>&1 | tail -1
done | tee -a "$out/thread-probe.txt"
