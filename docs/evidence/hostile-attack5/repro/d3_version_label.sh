#!/bin/bash
# D3: the runtime-inputs backport is chosen by the dist-info's version label alone.
# ExecuTorch 1.4.1's files under a (consistent) label of 1.4.2 or 1.5.1: portable_lib.py keeps
# its stock 1.4.1 bytes (which the backport fits), yet status ends "Patched.".
set -e
WHL=/tmp/whl/executorch-1.4.1-cp311-cp311-manylinux_2_28_x86_64.whl
[ -f $WHL ] || pip download --no-deps -q executorch==1.4.1 -d /tmp/whl
for NEW in 1.4.2 1.5.1; do
  V=/work/attack5/victims/r3-$NEW; rm -rf $V; python3 -m venv $V
  $V/bin/python -m pip install -q --no-deps $WHL 2>/dev/null
  $V/bin/python -m pip install -q --no-deps --no-index /work/attack5/victims/wheel/executorch_device_guard-0.3.0-py3-none-any.whl
  python3 /work/attack5/repro/relabel_distinfo.py $V/lib/python3.11/site-packages 1.4.1 $NEW
  echo "=== labelled $NEW; executorch/version.py says: $(grep -o "__version__ = .*" $V/lib/python3.11/site-packages/executorch/version.py)"
  $V/bin/python -m executorch_device_guard apply >/dev/null
  $V/bin/python -m executorch_device_guard status | grep -E "portable_lib|Patched|Stock|Partly"
done
