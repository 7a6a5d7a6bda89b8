#!/bin/bash
# A package folder exir/emit/_emitter/ (or _emitter.cpython-311-*.so) beside _emitter.py: Python imports it,
# not the .py; apply/status still say "Patched."
. /tmp/attack3/repro/_env.sh
E=$SP/executorch/exir/emit
mkdir "$E/_emitter" && cp "$E/_emitter.py" "$E/_emitter/__init__.py"
$G apply >/dev/null 2>&1; rc=$?
st=$($G status 2>&1 | tail -1)
origin=$($PY -c "
import importlib.machinery as m
f=m.FileFinder('$E', (m.SourceFileLoader, m.SOURCE_SUFFIXES))
print(f.find_spec('executorch.exir.emit._emitter').origin)")
echo "apply rc=$rc; status: $st; Python imports: $origin"
if [ $rc = 0 ] && [[ "$st" == Patched* ]] && [[ "$origin" == */_emitter/__init__.py ]] && ! grep -q "on device" "$origin"; then
  echo "DEFECT: 'Patched.' but Python runs the stock emitter from $origin"; exit 1; fi
exit 0
