# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What ``check`` asks before any export: does the model load, is CUDA there.

    executorch_device_guard.check.probe:main([MODEL_SPEC, RESULT_FILE])

Runs in a child (never in a warm parent: asking CUDA whether it is there
initialises it, and a parent that forks must not have done that). Reports to
RESULT_FILE, never to stdout, which is the model's: one JSON object per line,
``{"stage": TEXT}`` before each step of loading the model (so that a crash or
a hang can be told apart: importing it, or building it), then
``{"cuda": bool, "model_error": str or null, "devices": [str, ...]}``, the
device types the model's tensors and inputs are on.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional


def _report(path: str, record: Dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def main(argv: List[str]) -> int:
    # Ask NVML, not the CUDA runtime, where it can: it initialises nothing.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch
    from executorch_device_guard.check import models

    spec, result = argv
    stages = ["loading it"]

    def stage(text: str) -> None:
        stages.append(text)
        _report(result, {"stage": text})

    error = None
    devices: List[str] = []
    start = time.monotonic()
    try:
        devices = models.load_model(spec, stage).devices()
    except models.ModelSpecError as e:
        error = str(e)
    except SystemExit as e:
        error = f"--model {spec}: {stages[-1]} called sys.exit({e.code!r})"
    sys.stdout.flush()
    if error is None and "meta" in devices:
        error = (
            f"--model {spec}: the model's tensors are on meta, which holds no "
            "data, so nothing can be exported from it: build it on CPU (check "
            "puts it on every device itself)"
        )
    _report(
        result,
        {
            "cuda": torch.cuda.is_available(),
            "model_error": error,
            "devices": devices,
            # How long importing and building the model took.
            "seconds": time.monotonic() - start,
            "forks": models.forks_while_loading(),
        },
    )
    return 0


class Probe:
    """What the probe's RESULT_FILE says: the last stage and the answer."""

    def __init__(self, path: Path) -> None:
        self.stage: Optional[str] = None
        self.answer: Optional[Dict] = None
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if isinstance(record.get("stage"), str):
                self.stage = record["stage"]
            elif _valid_answer(record):
                self.answer = record


def _valid_answer(record: Dict) -> bool:
    return (
        isinstance(record.get("cuda"), bool)
        and isinstance(record.get("model_error"), (str, type(None)))
        and isinstance(record.get("devices"), list)
        and all(isinstance(d, str) for d in record["devices"])
    )


def how_it_ended(returncode: int) -> str:
    """``crashed with SIGSEGV`` or ``ended the process with exit code 3``."""
    if returncode < 0:
        try:
            return f"crashed with {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"ended the process with exit code {returncode}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
