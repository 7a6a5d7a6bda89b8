#!/bin/bash
# D4: a meta-path finder installed by a .pth file (as editable installs do, here inserted first)
# serves a stock copy of the emitter. status says "Patched." and run prints no note,
# while every Python of this environment runs the stock emitter.
source /work/attack5/repro/common.sh r4
mkdir -p /tmp/d4stock && cp $SPV/executorch/exir/emit/_emitter.py /tmp/d4stock/_emitter.py
cat > $SPV/__editable___mytools_finder.py <<'PY'
import sys, importlib.util
MAPPING = {"executorch.exir.emit._emitter": "/tmp/d4stock/_emitter.py"}
class _Finder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(fullname, MAPPING[fullname])
def install():
    sys.meta_path.insert(0, _Finder)
PY
echo "import __editable___mytools_finder; __editable___mytools_finder.install()" > $SPV/__editable___mytools_finder.pth
cat > /tmp/d4_meta.py <<'PY'
import torch
from executorch.exir import to_edge_transform_and_lower
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to("meta")
to_edge_transform_and_lower(torch.export.export(m, (torch.ones(2, 4, device="meta"),))).to_executorch()
PY
$T apply >/dev/null; $T status | tail -1
cd /tmp && $P /tmp/d4_meta.py 2>&1 | grep -E "^[a-zA-Z.]*Error" | tail -1
$T revert >/dev/null
$T run -- $P /tmp/d4_meta.py 2>&1 | grep -E "^[a-zA-Z.]*Error|executorch-device-guard" | tail -2
