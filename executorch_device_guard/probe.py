# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What ``check`` asks before any export: does the model load, is CUDA there.

Runs in a child (never in a warm parent: asking CUDA whether it is there
initialises it, and a parent that forks must not have done that). Prints one
``PROBE_TAG`` line of JSON: ``{"cuda": bool, "model_error": str or null}``.
"""

from __future__ import annotations

import json
import sys
from typing import List

PROBE_TAG = "DEVICE_GUARD_PROBE "


def main(argv: List[str]) -> int:
    import os

    # Ask NVML, not the CUDA runtime, where it can: it initialises nothing.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch
    from executorch_device_guard import models

    (spec,) = argv
    error = None
    try:
        models.load_model(spec)
    except models.ModelSpecError as e:
        error = str(e)
    report = {"cuda": torch.cuda.is_available(), "model_error": error}
    print(PROBE_TAG + json.dumps(report), flush=True)
    return 0


def parse(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith(PROBE_TAG):
            return json.loads(line[len(PROBE_TAG) :])
    raise ValueError("the probe printed no result")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
