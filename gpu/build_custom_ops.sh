#!/usr/bin/env bash
# The custom-ops commit on a GPU, in one call of the device tool: builds the
# LLM custom ops library stock and changed (scripts/build_custom_ops.sh) against
# the machine's torch and ExecuTorch 1.5.1's runtime, from the source subset in
# .et-src/ (scripts/pack_et_source.py; the machine has no network), then loads
# each in a throwaway copy of 1.5.1 and calls every op with CUDA tensors, runs
# the commit's test and ExecuTorch's own tests of the custom ops
# (scripts/compare_custom_ops.py --device cuda --quick).
#
#   bash gpu/build_custom_ops.sh     # carry .whl (et151, deps) and .et-src
#
# Everything lands in $OUT/custom-ops-build.tgz (logs, table, summary), the
# table beside it as custom-ops-build-table.txt. docs/custom-ops-build.md says
# how to record it.
set -uo pipefail
cd "$(dirname "$0")/.."
work=/tmp/custom-ops-build
rm -rf "$work" && mkdir -p "$work"
dest="${OUT:-gpu-out}"  # gpu/install.sh sets $out
mkdir -p "$dest"
{
    nvidia-smi -L
    python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)'
    cmake --version | head -1
    ninja --version
    c++ --version | head -1
    nproc
} >"$work/machine.txt" 2>&1
cat "$work/machine.txt"
[[ -f .et-src/PACKED.txt ]] || { echo "no .et-src/: run scripts/pack_et_source.py and carry it" >&2; exit 1; }
if compgen -G ".whl/et151/*.whl" >/dev/null; then
    ET=1.5.1 OUT="$work" source gpu/install.sh || exit
else  # a dry run elsewhere: the ExecuTorch python3 finds
    echo "no .whl/et151: using the ExecuTorch that python3 finds"
fi
start=$SECONDS
bash scripts/build_custom_ops.sh --python python3 --parallel .et-src "$work/build" \
    2>&1 | tee "$work/build.txt"
built=${PIPESTATUS[0]}
echo "build: exit $built, $((SECONDS - start)) s"
if [[ $built -eq 0 ]]; then
    # What is left of 8 minutes: nothing starts after it, and what runs stops.
    left=$((460 - SECONDS))
    PYTHONUNBUFFERED=1 timeout $((left + 30)) python3 scripts/compare_custom_ops.py \
        "$work/build" "$work/compare" --device cuda --quick --deadline "$left" \
        >"$work/compare.txt" 2>&1
    echo "compare: exit $?, $((SECONDS - start)) s"
fi
tar czf "$dest/custom-ops-build.tgz" -C "$work" --exclude='build/src-*' --exclude='build/cmake-*' \
    --exclude='*.so' .
cp "$work/compare/table.txt" "$dest/custom-ops-build-table.txt" 2>/dev/null
cat "$work/compare/table.txt" 2>/dev/null || tail -60 "$work/compare.txt" "$work/build.txt" 2>/dev/null
