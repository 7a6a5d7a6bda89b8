#!/usr/bin/env bash
# `check` itself on the GPU machine (docs/gpu.md): installs the carried wheels
# into /tmp/site as gpu/run.sh does, then runs `check` with the given options,
# its output also saved to $OUT/check.txt.
set -uo pipefail
source "$(dirname "$0")/install.sh"
python3 -m executorch_device_guard check "$@" 2>&1 | tee "$out/check.txt"
exit "${PIPESTATUS[0]}"
