#!/bin/bash
# D2: an edit outside the hunks that holds a second copy of a hunk's context makes apply patch
# the copy; status then says "Patched." while the live method is stock (and now broken).
source /work/attack5/repro/common.sh r2
F=$SPV/executorch/exir/emit/_emitter.py
python3 /work/attack5/repro/dup_context.py $F      # dead copy of _tensor_spec_to_evalue under `if False:`
python3 -c "import ast,sys; ast.parse(open('$F').read())" && echo "edited file parses"
$T status | sed -n 2p
$T apply | head -1; echo "apply rc=${PIPESTATUS[0]}"
$T status | tail -1
grep -n 'def _tensor_spec_to_evalue\|storage.device.type != "cpu"' $F
cat > /tmp/d2_cpu.py <<'PY'
import torch
from executorch.exir import to_edge_transform_and_lower
m = torch.nn.Linear(4, 3).eval()
to_edge_transform_and_lower(torch.export.export(m, (torch.ones(2, 4),))).to_executorch()
print("CPU export ok")
PY
cd /tmp && $P /tmp/d2_cpu.py 2>&1 | grep -E "CPU export ok|^[a-zA-Z.]*Error" | tail -1
