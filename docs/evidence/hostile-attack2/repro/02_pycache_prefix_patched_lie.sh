#!/bin/bash
# PYTHONPYCACHEPREFIX + unchecked-hash bytecode (compileall in a Docker image): apply/status say "Patched.",
# Python runs the stock emitter's bytecode from the prefix.
. /tmp/attack3/repro/_env.sh
export PYTHONPYCACHEPREFIX=$W/pycache
T=$SP/executorch/exir/emit/_emitter.py
$PY -m compileall -q --invalidation-mode unchecked-hash "$T"
$G apply >/dev/null 2>&1; rc=$?
st=$($G status 2>&1 | tail -1)
runs=$($PY - "$T" <<'PYEOF'
import importlib.machinery, sys
code = importlib.machinery.SourceFileLoader("x", sys.argv[1]).get_code("x")
def walk(c):
    return any((isinstance(k, str) and "on device" in k) or (hasattr(k, "co_consts") and walk(k)) for k in c.co_consts)
print("guard" if walk(code) else "stock")
PYEOF
)
echo "apply rc=$rc; status: $st; code Python runs for _emitter.py: $runs"
if [ $rc = 0 ] && [[ "$st" == Patched* ]] && [ "$runs" = stock ]; then echo "DEFECT: 'Patched.' but the stock emitter runs"; exit 1; fi
exit 0
