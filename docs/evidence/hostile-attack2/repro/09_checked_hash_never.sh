#!/bin/bash
# Checked-hash bytecode (pip under SOURCE_DATE_EPOCH) is kept by apply; a Python started with
# --check-hash-based-pycs never runs the stock emitter though status says "Patched.".
. /tmp/attack3/repro/_env.sh
T=$SP/executorch/exir/emit/_emitter.py
$PY -m compileall -q -f --invalidation-mode checked-hash "$T"
$G apply >/dev/null; st=$($G status | tail -1)
runs=$($PY --check-hash-based-pycs never - "$T" <<'PYEOF'
import importlib.machinery, sys
code = importlib.machinery.SourceFileLoader("x", sys.argv[1]).get_code("x")
def walk(c):
    return any((isinstance(k, str) and "on device" in k) or (hasattr(k, "co_consts") and walk(k)) for k in c.co_consts)
print("guard" if walk(code) else "stock")
PYEOF
)
echo "status: $st; python --check-hash-based-pycs never runs: $runs"
if [[ "$st" == Patched* ]] && [ "$runs" = stock ]; then echo "DEFECT"; exit 1; fi
exit 0
