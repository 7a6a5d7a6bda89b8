#!/usr/bin/env bash
# apply, ExecuTorch's own emitter tests, revert: on a Python environment that
# has ExecuTorch and this tool installed (never this project's .venv, whose
# Python the tests rely on starting without the fix). apply turns the fix on
# at every start of the environment's Python (its startup files in
# site-packages) and writes no ExecuTorch file. Exits non-zero unless the
# tests pass with the fix on, every installed ExecuTorch file hashes as before
# after apply and after revert, and revert leaves neither startup file nor
# the fix on.
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
site=$(dirname "$root")
startup=("$site/executorch_device_guard.pth" "$site/executorch_device_guard.start")
hashes() { (cd "$root" && find . -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum); }
# Whether a plain start of the environment's Python has the import hook on.
fix_on() { "$py" -c 'import sys; sys.exit(not any(getattr(f, "executorch_device_guard_finder", 0) for f in sys.meta_path))'; }
same_as_before() {
    hashes > "$after"
    if ! cmp -s "$before" "$after"; then
        echo "$1: installed ExecuTorch files changed" >&2
        diff "$before" "$after" | head >&2
        exit 1
    fi
}
before=$(mktemp); after=$(mktemp)
hashes > "$before"
echo "ExecuTorch at $root: $(wc -l < "$before") files hashed"
"$guard" status
"$guard" apply
"$guard" apply
"$guard" status
same_as_before "after apply"
for file in "${startup[@]}"; do
    [ -f "$file" ] || { echo "after apply: $file is missing" >&2; exit 1; }
done
fix_on || { echo "after apply: $py starts without the fix" >&2; exit 1; }
(cd "$(mktemp -d)" && "$py" -m pytest -q -p no:cacheprovider "$root/exir/emit/test/test_emit.py" 2>&1 | tail -1)
"$guard" revert
for file in "${startup[@]}"; do
    [ ! -e "$file" ] || { echo "after revert: $file is still there" >&2; exit 1; }
done
! fix_on || { echo "after revert: $py still starts with the fix" >&2; exit 1; }
same_as_before "after revert"
echo "after apply and after revert: all $(wc -l < "$after") files hash as before; revert removed ${startup[*]}"
