#!/usr/bin/env bash
# apply, ExecuTorch's own emitter tests, revert: on a Python environment that
# has ExecuTorch and this tool installed (never this project's .venv, whose
# ExecuTorch the tests rely on being stock). Exits non-zero unless the tests
# pass patched and every installed ExecuTorch file hashes as before afterwards.
#
#   python3 -m venv /tmp/av && /tmp/av/bin/pip install -c constraints.txt torch executorch pytest flatbuffers
#   /tmp/av/bin/pip install .
#   bash scripts/apply_roundtrip.sh /tmp/av
set -euo pipefail
usage="usage: bash scripts/apply_roundtrip.sh VENV  (a virtual environment with ExecuTorch and this tool installed; not .venv)"
if [ $# -ne 1 ]; then
    echo "$usage" >&2
    exit 2
fi
venv="$1"
py="$venv/bin/python"
if [ ! -x "$py" ] || [ ! -x "$venv/bin/executorch-device-guard" ]; then
    echo "$venv has no bin/python or bin/executorch-device-guard" >&2
    echo "$usage" >&2
    exit 2
fi
guard="$venv/bin/executorch-device-guard"
root=$("$py" -c 'from executorch_device_guard.installation.installed import executorch_root; print(executorch_root())')
hashes() { (cd "$root" && find . -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum); }
before=$(mktemp); after=$(mktemp)
hashes > "$before"
echo "ExecuTorch at $root: $(wc -l < "$before") files hashed"
"$guard" status
"$guard" apply
"$guard" apply
"$guard" status
(cd "$(mktemp -d)" && "$py" -m pytest -q -p no:cacheprovider "$root/exir/emit/test/test_emit.py" 2>&1 | tail -1)
"$guard" revert
hashes > "$after"
if cmp -s "$before" "$after"; then
    echo "after revert: all $(wc -l < "$after") files hash as before"
else
    diff "$before" "$after" | head
    exit 1
fi
