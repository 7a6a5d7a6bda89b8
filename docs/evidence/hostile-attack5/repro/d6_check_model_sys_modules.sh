#!/bin/bash
# D6: check --model path/file.py:attr runs the file without registering it in sys.modules, so a
# valid model file whose import needs sys.modules[__name__] (a dataclass with a ClassVar under
# `from __future__ import annotations`) is refused as a user mistake; the module form works.
T=/work/attack5/tool/.venv/bin/executorch-device-guard
cd /work/attack5/repro/models
/work/attack5/tool/.venv/bin/python -c "import dc_model; print('plain import ok:', dc_model.make()[0].fc)"
$T check --model dc_model.py:make --paths emitter --devices meta 2>&1 | tail -1; echo "rc=${PIPESTATUS[0]}"
$T check --model dc_model:make --paths emitter --devices meta 2>&1 | tail -1; echo "rc=${PIPESTATUS[0]}"
