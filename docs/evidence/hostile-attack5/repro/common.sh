# Shared setup: a throwaway victim venv with ExecuTorch 1.5.1 copied from the tool's .venv,
# torch via a .pth, and the tool installed from a wheel. Usage: source common.sh NAME
set -e
V=/work/attack5/victims/$1
/work/attack5/victims/mk.sh "$1" >/dev/null
SPV=$V/lib/python3.11/site-packages
T=$V/bin/executorch-device-guard
P=$V/bin/python
export TMPDIR=${TMPDIR_REPRO:-/tmp/repro-tmp}; mkdir -p "$TMPDIR"
set +e
