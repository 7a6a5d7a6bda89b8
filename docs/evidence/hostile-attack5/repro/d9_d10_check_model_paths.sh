#!/bin/bash
# D9: a model file in a folder whose name has ':' cannot be named.
# D10: a huge (sparse) .py is read whole before any refusal: minutes and GBs of memory.
T=/work/attack5/tool/.venv/bin/executorch-device-guard
export TMPDIR=/tmp/mytmp; mkdir -p $TMPDIR; cd /tmp
mkdir -p "/tmp/d9:models"; printf 'import torch\ndef make():\n    return torch.nn.Linear(4, 3), (torch.ones(2, 4),)\n' > "/tmp/d9:models/m.py"
$T check --model "/tmp/d9:models/m.py:make" 2>&1 | tail -1; echo "rc=${PIPESTATUS[0]}"
truncate -s 3G /tmp/d10_big.py
/usr/bin/time -f "%e s, max RSS %M KB" timeout 60 $T check --model /tmp/d10_big.py:model 2>&1 | tail -2
rm -f /tmp/d10_big.py
