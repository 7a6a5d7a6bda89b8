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
from pathlib import Path
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


KNOWN_DEVICES = ["cpu", "meta", *FAKE_DEVICES, "cuda"]


class SelectionError(ValueError):
    """--paths/--devices select no export; one line saying why."""


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


def check_devices(devices: Optional[List[str]]) -> None:
    """Refuses device names that no path knows (a typo must not pass as OK)."""
    unknown = [d for d in devices or [] if d not in KNOWN_DEVICES]
    if unknown:
        raise SelectionError(
            f"unknown device {', '.join(map(repr, unknown))}; choose from "
            + ", ".join(KNOWN_DEVICES)
        )


def select(
    paths: Optional[List[str]], devices: Optional[List[str]], cuda: bool
) -> List[Tuple[str, str]]:
    """``cases``, or SelectionError when they are none."""
    check_devices(devices)
    pairs = cases(paths, devices, cuda)
    if pairs:
        return pairs
    if devices and set(devices) <= {"cuda"} and not cuda:
        why = "this machine has no CUDA device"
    else:
        offered = sorted({d for p in paths or PATHS for d in PATHS[p][1]})
        why = f"the paths {', '.join(paths or PATHS)} run on {', '.join(offered)}"
    raise SelectionError(
        f"--devices {' '.join(devices or [])} selects no export: {why}"
    )


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
    def tool_errors(self) -> List[str]:
        """Why this row is no verdict on the patch: the tool could not run it."""
        errors = []
        for emitter, outcome in self.outcomes.items():
            result = outcome.result or {}
            if result.get("outcome") == "setup-error":
                errors.append(
                    f"{emitter}: could not set up the case: {result['message']}"
                )
            elif outcome.returncode >= 0 and outcome.result is None:
                errors.append(
                    f"{emitter}: the child exited {outcome.returncode} without a "
                    "result (see --verbose)"
                )
        if not errors and self.device.startswith("fake:") and self.failed_alike:
            errors.append(
                "the fake device did not reach ExecuTorch's host read: stock and "
                f"patched fail alike with {self.outcomes['patched'].describe()}"
            )
        return errors

    @property
    def failed_alike(self) -> bool:
        """Stock and patched raise the same error: the guarded read is not reached."""
        stock, patched = (self.outcomes[e].result or {} for e in EMITTERS)
        return (
            self.device != "cpu"
            and stock.get("outcome") == patched.get("outcome") == "error"
            and (stock["type"], stock["message"])
            == (patched["type"], patched["message"])
        )

    @property
    def problems(self) -> List[str]:
        """Why the patched emitter's result is not acceptable (empty if it is)."""
        if self.tool_errors:
            return []
        stock, patched = self.outcomes["stock"], self.outcomes["patched"]
        if self.failed_alike:
            # A real device (meta, cuda) that fails before the host read, on
            # stock and patched alike: no read to guard, nothing to judge.
            return []
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

    def as_json(self, stderr: bool = False) -> Dict:
        def outcome(o: Outcome) -> Dict:
            # The child's emitter path is in a temporary overlay, gone on exit.
            result = o.result and {k: v for k, v in o.result.items() if k != "emitter"}
            entry = {
                "returncode": o.returncode,
                "summary": o.describe(),
                "result": result,
            }
            if stderr:
                entry["stderr"] = o.stderr
            return entry

        return {
            "path": self.path,
            "device": self.device,
            **{e: outcome(o) for e, o in self.outcomes.items()},
            "problems": self.problems,
            "tool_errors": self.tool_errors,
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


def _log_name(row: Row, emitter: str) -> str:
    return f"{row.path}_{row.device.replace(':', '_')}_{emitter}.log"


def write_logs(rows: List[Row], folder: Path) -> None:
    """Each child's full stderr, one file per (path, device, emitter)."""
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        for emitter, outcome in row.outcomes.items():
            (folder / _log_name(row, emitter)).write_text(outcome.stderr)


def print_stderr(rows: List[Row], out: TextIO) -> None:
    """Each child's full stderr, under a header naming the case and its outcome."""
    for row in rows:
        for emitter, outcome in row.outcomes.items():
            header = f"{row.path} {row.device} {emitter}: {outcome.describe()}"
            print(f"\n===== {header} =====", file=out)
            print(outcome.stderr.rstrip() or "(no stderr)", file=out, flush=True)
