#!/usr/bin/env bash
# Builds ExecuTorch's LLM custom ops library for PyTorch (libcustom_ops_aot_lib.so)
# twice from an ExecuTorch source tree: stock, and with the C++ edits of this
# repository's series (patches/series) applied. Both link the installed
# ExecuTorch wheel's runtime and the installed torch
# (scripts/custom_ops_build/CMakeLists.txt; docs/custom-ops-build.md).
#
#   scripts/build_custom_ops.sh [--python PY] [--jobs N] [--parallel] SOURCE BUILD
#
# SOURCE: an ExecuTorch checkout with the submodules the library needs
# (third-party/ao, pthreadpool's header), or the subset scripts/pack_et_source.py
# writes. BUILD: a new folder, outside the repository or ignored by git. PY
# (default python3) is the Python whose torch and ExecuTorch the library is
# built against; it need not be able to import ExecuTorch, only to find it.
# The changed build recompiles only the edited files after the stock one;
# --parallel builds both at once from scratch instead (faster with many cores).
# Writes BUILD/stock/ and BUILD/changed/libcustom_ops_aot_lib.so, BUILD/logs/
# and BUILD/build-info.txt; reads SOURCE and the installed packages only.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python=python3
jobs="$(nproc)"
parallel=0
while [[ $# -gt 2 ]]; do
    case "$1" in
        --python) python="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --parallel) parallel=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ $# -ne 2 ]]; then
    sed -n '2,19p' "$0" >&2
    exit 2
fi
source_dir="$(cd "$1" && pwd)"
# An absolute path that keeps a virtual environment's own interpreter.
python="$(command -v "$python")"
[[ "$python" == /* ]] || python="$PWD/$python"
mkdir -p "$2"
build="$(cd "$2" && pwd)"
logs="$build/logs"
mkdir -p "$logs"
start=$SECONDS
step() { echo "build_custom_ops: $* ($((SECONDS - start)) s)"; }

read -r torch_dir torch_abi et_dir torch_version et_version < <("$python" - <<'EOF'
import importlib.metadata, importlib.util, os
import torch
et = importlib.util.find_spec("executorch").submodule_search_locations[0]
print(os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI), et,
      torch.__version__, importlib.metadata.version("executorch"))
EOF
)
# The wheel's pybindings load only with the torch the wheel was built for.
# Against another torch the library goes without them: none of its symbols are
# theirs, the wheel's build links them only because it has them.
link_pybindings=ON
if ! "$python" -c 'import executorch.extension.pybindings.portable_lib' \
    >"$logs/pybindings-import.log" 2>&1; then
    link_pybindings=OFF
fi
step "torch $torch_version ($torch_dir), ExecuTorch $et_version ($et_dir), pybindings linked: $link_pybindings"

# SOURCE as a tree of links: the changed files become copies.
configure() {  # NAME: BUILD/src-NAME and BUILD/cmake-NAME
    rm -rf "$build/src-$1" "$build/cmake-$1"
    cp -as "$source_dir" "$build/src-$1"
    cmake -S "$repo/scripts/custom_ops_build" -B "$build/cmake-$1" -G Ninja \
        -DEXECUTORCH_ROOT="$build/src-$1" -DEXECUTORCH_PACKAGE="$et_dir" \
        -DTORCH_PACKAGE="$torch_dir" -DTORCH_CXX11_ABI="$torch_abi" \
        -DPYTHON_EXECUTABLE="$python" -DLINK_PYBINDINGS="$link_pybindings" \
        >"$logs/configure-$1.log" 2>&1 || { tail -40 "$logs/configure-$1.log" >&2; return 1; }
}

change() {  # SRC: the series' C++ edits, applied strictly by the tool's applier
    "$python" - "$repo" "$1" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from executorch_device_guard.patchset import read_series
src = Path(sys.argv[2])
for entry in read_series(Path(sys.argv[1])):
    edits = [p for p in entry.file_patches if p.path.endswith((".cpp", ".h"))]
    for edit in edits:
        path = src / edit.path
        text = path.read_text()
        path.unlink()
        path.write_text(edit.apply(text))
    if edits:
        print(entry.patch_path.name)
EOF
}

compile() {  # NAME CMAKE-DIR JOBS: the library, copied to BUILD/NAME
    local t=$SECONDS
    cmake --build "$2" --target custom_ops_aot_lib -j "$3" >"$logs/$1.log" 2>&1 ||
        { tail -40 "$logs/$1.log" >&2; return 1; }
    mkdir -p "$build/$1"
    cp "$2/extension/llm/custom_ops/libcustom_ops_aot_lib.so" "$build/$1/"
    step "built $1 in $((SECONDS - t)) s"
}

if [[ $parallel == 1 ]]; then
    configure stock
    configure changed
    patch="$(change "$build/src-changed")"
    step "configured both; applied the C++ edits of $patch to changed"
    compile stock "$build/cmake-stock" "$jobs" &
    stock_pid=$!
    compile changed "$build/cmake-changed" "$jobs" || { wait; exit 1; }
    wait "$stock_pid" || exit 1
else
    configure one
    step "configured"
    compile stock "$build/cmake-one" "$jobs"
    patch="$(change "$build/src-one")"
    step "applied the C++ edits of $patch"
    compile changed "$build/cmake-one" "$jobs"
fi
[[ -n "$patch" ]] || { echo "no commit in patches/series edits C++" >&2; exit 1; }

# Each library loads with every symbol bound, against the wheel's runtime.
for variant in stock changed; do
    LD_LIBRARY_PATH="$et_dir/lib" "$python" -c \
        'import ctypes, os, sys, torch; ctypes.CDLL(sys.argv[1], os.RTLD_NOW)' \
        "$build/$variant/libcustom_ops_aot_lib.so" >"$logs/load-$variant.log" 2>&1 ||
        { cat "$logs/load-$variant.log" >&2; exit 1; }
done
step "both load with every symbol bound"

{
    echo "source: $source_dir"
    echo "changed: the C++ edits of $patch"
    echo "torch: $torch_version"
    echo "executorch: $et_version (its headers, libexecutorch.so, libexecutorch_threadpool.so)"
    echo "pybindings linked: $link_pybindings"
    echo "cores: $(nproc), jobs: $jobs, parallel: $parallel"
    echo "seconds: $((SECONDS - start))"
    for variant in stock changed; do
        echo "$variant: sha256 $(sha256sum "$build/$variant/libcustom_ops_aot_lib.so" | cut -c1-16)"
    done
} >"$build/build-info.txt"
cat "$build/build-info.txt"
