#!/usr/bin/env bash
# What import-hook steps 1-3 promise, checked as a user would, in a throwaway
# venv holding torch, ExecuTorch and this tool (never .venv). Run it from a
# folder holding the README's export_meta.py; it ends with `pip uninstall` of
# the tool from that venv. It prints what it finds; it does not judge.
#
#   python3 -m venv /tmp/uv && /tmp/uv/bin/pip install -c constraints.txt torch executorch && /tmp/uv/bin/pip install .
#   cd folder-with-export_meta.py && bash /path/to/scripts/user_checks.sh /tmp/uv
set -u
[ $# -eq 1 ] && [ -x "$1/bin/executorch-device-guard" ] || { echo "usage: bash scripts/user_checks.sh VENV  (with ExecuTorch and this tool installed)" >&2; exit 2; }
out=$(mktemp -d)
V=$1; G=$V/bin/executorch-device-guard; export PATH=$V/bin:$PATH
site=$($V/bin/python -c 'import executorch, os; print(os.path.dirname(list(executorch.__path__)[0]))')
snap() { (cd "$site" && find executorch executorch-*.dist-info -exec stat -c '%n %s %Y' {} + | sort; find executorch executorch-*.dist-info -type f -exec sha256sum {} + | sort) | sha256sum | cut -c1-16; }
echo "== step 1: run with an empty TMPDIR"
export TMPDIR=$(mktemp -d)
$G run -- sh -c 'echo "TMPDIR holds: [$(ls -A "$TMPDIR")]"; python export_meta.py' > $out/run.txt 2>&1; echo "exit $?"; grep -E '^TMPDIR holds|Error' $out/run.txt | cut -c1-160
echo "TMPDIR after: [$(ls -A "$TMPDIR")]"
export TMPDIR=$(mktemp -d); python export_meta.py >/dev/null 2>&1; echo "(a plain python export_meta.py leaves, in an empty TMPDIR: [$(ls -A "$TMPDIR")])"
echo "== step 2/3: check with an empty TMPDIR makes no ExecuTorch tree; under run the stock column is unchanged"
export TMPDIR=$(mktemp -d)
( while :; do find "$TMPDIR" -name '*.py' -path '*executorch*' 2>/dev/null; sleep 0.05; done ) > $out/seen & w=$!
$G check > $out/plain.txt 2>/dev/null; echo "check exit $?"
kill $w; echo "ExecuTorch .py files seen in TMPDIR while check ran: $(sort -u $out/seen | wc -l)"
echo "TMPDIR after: [$(ls -A "$TMPDIR" | grep -v '^torchinductor_')] (torch's torchinductor_* aside)"
$G run -- $G check > $out/under_run.txt 2>/dev/null; echo "run -- check exit $?"
cut -c1-80 $out/plain.txt | head -15
if diff $out/plain.txt $out/under_run.txt >/dev/null; then echo "run -- check: the same table as plain check"; else echo "run -- check DIFFERS"; diff $out/plain.txt $out/under_run.txt | head; fi
echo "== step 2 on: the package snapshot (paths, sizes, mtimes, sha256) through apply, export, revert, uninstall"
echo "before:      $(snap)"
$G apply 2>&1 | tail -1
echo "after apply: $(snap)"
python export_meta.py 2>&1 | grep Error | cut -c1-160
echo "after export: $(snap)"
$G revert 2>&1 | tail -1
echo "after revert: $(snap)"
$G apply >/dev/null 2>&1; pip uninstall -y -q executorch-device-guard 2>&1 | tail -1
echo "after apply + pip uninstall: $(snap)"
echo "startup files left in site-packages: [$(ls "$site" | grep -i device_guard)]"
python export_meta.py 2>&1 | grep Error | cut -c1-160
