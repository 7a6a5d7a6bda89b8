# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The stock-versus-patched matrix over every device kind this machine reaches."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import re
import sys
import time
from typing import Dict, List, Optional, TextIO

from executorch_device_guard.runner import Emitters, EMITTERS, Outcome

FAKE_DEVICES = ["fake:cuda:0", "fake:mps:0", "fake:xpu:0"]


def devices(cuda: Optional[bool] = None) -> List[str]:
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    return ["cpu", "meta", *FAKE_DEVICES, *(["cuda"] if cuda else [])]


def _device_pattern(device: str) -> "re.Pattern[str]":
    name = device[len("fake:") :] if device.startswith("fake:") else device
    suffix = r"(:\d+)?" if ":" not in name else ""
    return re.compile(rf"on device {re.escape(name)}{suffix}\b")


@dataclasses.dataclass
class Row:
    device: str
    outcomes: Dict[str, Outcome]

    @property
    def problems(self) -> List[str]:
        """Why the patched emitter's result is not acceptable (empty if it is)."""
        stock, patched = self.outcomes["stock"], self.outcomes["patched"]
        if patched.crashed:
            return [f"patched emitter crashed: {patched.describe()}"]
        result = patched.result or {}
        if self.device == "cpu":
            if result.get("outcome") != "ok":
                return [f"CPU export failed: {patched.describe()}"]
            if stock.result is None or stock.result.get("files") != result["files"]:
                return ["CPU bytes differ from the stock emitter's"]
            return []
        if result.get("outcome") == "error" and not _device_pattern(self.device).search(
            result["message"]
        ):
            return [f"error does not name the device: {patched.describe()}"]
        return []

    def as_json(self) -> Dict:
        return {
            "device": self.device,
            **{
                e: {
                    "returncode": o.returncode,
                    "summary": o.describe(),
                    "result": o.result,
                }
                for e, o in self.outcomes.items()
            },
            "problems": self.problems,
        }


def run_matrix(
    emitters: Emitters,
    model: str,
    device_list: List[str],
    progress: TextIO = sys.stderr,
    jobs: int = 2,
) -> List[Row]:
    """Runs every (device, emitter) child, ``jobs`` at a time."""
    cases = [(device, emitter) for device in device_list for emitter in EMITTERS]
    done: Dict[tuple, Outcome] = {}

    def one(case: tuple) -> None:
        device, emitter = case
        start = time.monotonic()
        done[case] = outcome = emitters.export(emitter, device, model)
        print(
            f"[{len(done):2}/{len(cases)}] {emitter:7} emitter, {device:12} "
            f"{_short(outcome.describe())} ({time.monotonic() - start:.1f} s)",
            file=progress,
            flush=True,
        )

    print(f"running {len(cases)} exports, {jobs} at a time...", file=progress)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, cases))
    return [
        Row(device, {emitter: done[(device, emitter)] for emitter in EMITTERS})
        for device in device_list
    ]


def _short(text: str) -> str:
    """The emitter's message without its boilerplate, keeping the device."""
    text = text.replace("Failed with error: ", "")
    return re.sub(
        r"Constant tensor data for ('[^']*' is on device [^,]+),.*", r"\1 ...", text
    )


def format_table(rows: List[Row], width: int = 58) -> str:
    def cell(text: str) -> str:
        text = _short(text)
        return text if len(text) <= width else text[: width - 3] + "..."

    header = ("device", "stock emitter", "patched emitter")
    lines = [header] + [
        (
            row.device,
            cell(row.outcomes["stock"].describe()),
            cell(row.outcomes["patched"].describe()),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    out = []
    for i, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
