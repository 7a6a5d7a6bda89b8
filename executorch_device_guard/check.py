# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The stock-versus-patched matrix over every device kind this machine reaches."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import sys
import time
from typing import Dict, List, Optional, TextIO, Tuple

from executorch_device_guard.runner import Emitters, EMITTERS, Outcome

FAKE_DEVICES = ["fake:cuda:0", "fake:mps:0", "fake:xpu:0"]

# Each path's devices: every device kind for the emitter; one fake device for
# the other paths (meta cannot reach XNNPACK: lowering fails on it first).
PATHS = {
    "emitter": ("emit", ["cpu", "meta", *FAKE_DEVICES]),
    "xnnpack": ("xnnpack", ["cpu", "fake:cuda:0"]),
    "bundled": ("bundled", ["cpu", "meta", "fake:cuda:0"]),
}


def cases(
    paths: Optional[List[str]] = None,
    devices: Optional[List[str]] = None,
    cuda: Optional[bool] = None,
) -> List[Tuple[str, str]]:
    """The (path, device) pairs to run; real CUDA joins every path when present."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    result = []
    for path in paths or list(PATHS):
        for device in PATHS[path][1] + (["cuda"] if cuda else []):
            if devices is None or device in devices:
                result.append((path, device))
    return result


def _device_pattern(device: str) -> "re.Pattern[str]":
    name = device[len("fake:") :] if device.startswith("fake:") else device
    suffix = r"(:\d+)?" if ":" not in name else ""
    return re.compile(rf"on device {re.escape(name)}{suffix}\b")


@dataclasses.dataclass
class Row:
    path: str
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
            "path": self.path,
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
    pairs: List[Tuple[str, str]],
    progress: TextIO = sys.stderr,
    jobs: int = 2,
) -> List[Row]:
    """Runs every (path, device, emitter) child, ``jobs`` at a time."""
    runs = [(path, device, e) for path, device in pairs for e in EMITTERS]
    done: Dict[Tuple[str, str, str], Outcome] = {}

    threads = max(1, (os.cpu_count() or 1) // jobs)

    def one(run: Tuple[str, str, str]) -> None:
        path, device, emitter = run
        start = time.monotonic()
        flow = PATHS[path][0]
        done[run] = outcome = emitters.export(
            emitter, device, model, flow=flow, threads=threads
        )
        print(
            f"[{len(done):2}/{len(runs)}] {path:8} {device:12} {emitter:7} "
            f"{_short(outcome.describe())} ({time.monotonic() - start:.1f} s)",
            file=progress,
            flush=True,
        )

    print(f"running {len(runs)} exports, {jobs} at a time...", file=progress)
    # The slowest first, so that no long one is left for the end alone.
    order = sorted(runs, key=lambda run: PATHS[run[0]][0] != "xnnpack")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, order))
    return [
        Row(path, device, {e: done[(path, device, e)] for e in EMITTERS})
        for path, device in pairs
    ]


def _short(text: str) -> str:
    """The message without its boilerplate, up to the device it names."""
    text = text.replace("Failed with error: ", "")
    text = text.replace("Constant tensor data for ", "")
    return re.sub(r"(is on device [^,\s]+),.*", r"\1 ...", text)


def format_table(rows: List[Row], width: int = 60) -> str:
    def cell(text: str) -> str:
        text = _short(text)
        if len(text) <= width:
            return text
        # Elide the middle, keeping the device the message names.
        tail = re.search(r"is on device \S+ \.\.\.$", text)
        keep = len(tail.group(0)) + 1 if tail else 0
        return text[: width - keep - 3] + "..." + (" " + tail.group(0) if tail else "")

    header = ("path", "device", "stock ExecuTorch", "patched ExecuTorch")
    lines = [header] + [
        (
            row.path,
            row.device,
            cell(row.outcomes["stock"].describe()),
            cell(row.outcomes["patched"].describe()),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
