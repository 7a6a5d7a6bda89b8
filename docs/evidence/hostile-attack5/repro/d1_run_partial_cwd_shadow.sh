#!/bin/bash
# D1: run does not refuse a partial executorch/ folder in the current directory (or in the
# script's folder): executorch is a namespace package, so executorch/backends there merges in
# ahead of the overlay and XNNPACK's stock node_visitor is used; exir comes from the overlay,
# so no note is printed either.
source /work/attack5/repro/common.sh r1
W=/tmp/d1work; rm -rf $W; mkdir -p $W/executorch
cp -a $SPV/executorch/backends $W/executorch/          # e.g. a vendored/stale backends tree
cat > $W/export_x.py <<'PY'
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
import executorch.backends.xnnpack.operators.node_visitor as nv
print("node_visitor from", nv.__file__)
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to("meta")
to_edge_transform_and_lower(torch.export.export(m, (torch.ones(2, 4, device="meta"),)),
                            partitioner=[XnnpackPartitioner()]).to_executorch()
PY
echo "--- from /tmp (script folder holds executorch/backends):"
cd /tmp && $T run -- $P $W/export_x.py 2>&1 | grep -E "node_visitor from|Error:|executorch-device-guard" | cut -c1-200
echo "--- from $W with python -c:"
cd $W && $T run -- $P -c "import executorch.exir, executorch.backends.xnnpack.operators.node_visitor as n; print(n.__file__)" 2>&1 | grep -v "^W1204\|Failed to load" | cut -c1-200
echo "--- status from $W (python -m) does notice it:"
cd $W && $P -m executorch_device_guard status 2>&1 | tail -1 | cut -c1-200
