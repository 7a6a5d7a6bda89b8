# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The stock-versus-patched matrix over every device kind this machine reaches.

How a row is judged (``Row``), and the exit code (``judge``):

- a **tool error**: the row says nothing about the patch because of the tool
  (its own code failed, at any stage; a child without a result, a timeout, a
  child that imported another ExecuTorch than the installed one, or ran it
  otherwise than its side should (the import hook on or off), a fake device
  that did not reach the read);
- **not checked**: nothing went wrong, but nothing reached the guarded read
  either: stock and patched both succeed on a device (no constant data got
  there), the path does not apply (n/a), the model does not export with stock
  ExecuTorch either (it fails or crashes alike on CPU, or before the tool put
  anything on the device), or a real device fails alike on both before the
  read;
- a **problem** (FAIL): patched ExecuTorch crashes, fails without naming the
  device, refuses where stock succeeds, exports from device memory where
  stock fails, or gives other CPU bytes or another CPU outcome than stock;
- **reached**: a device row where stock crashes, or fails without naming the
  device, and patched raises an error naming it: the guard did its job.

``check`` exits 1 on any problem, else 3 on any tool error, else 3 when no row
reached the read (nothing was checked: never OK), else 0. When every row fails
alike before the device (the model does not export), ``Verdict.alike`` says so
in one line instead of the table.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, TextIO, Tuple

from executorch_device_guard.check import failures
from executorch_device_guard.installation import faults
from executorch_device_guard import userfiles
from executorch_device_guard.errors import GuardError
from executorch_device_guard.check.runner import (
    DEFAULT_TIMEOUT,
    Emitters,
    EMITTERS,
    Outcome,
)

FAKE_DEVICES = ["fake:cuda:0", "fake:mps:0", "fake:xpu:0"]

# Each path's devices: every device kind for the emitter; one fake device for
# the other paths (meta cannot reach XNNPACK: lowering fails on it first;
# Vulkan's serializer is left out of meta, which reaches its read too, as
# each Vulkan export costs about 5 s of lowering and the emitter and the
# bundled program show meta already).
PATHS = {
    "emitter": ("emit", ["cpu", "meta", *FAKE_DEVICES]),
    "xnnpack": ("xnnpack", ["cpu", "fake:cuda:0"]),
    "vulkan": ("vulkan", ["cpu", "fake:cuda:0"]),
    "bundled": ("bundled", ["cpu", "meta", "fake:cuda:0"]),
}
# The paths that read device data through a host copy: the bundled program
# stores test data, the caller's to hand over, not model constants. There a
# device row passes when patched gives, from the device's tensors, the bytes
# that the child got by bundling host copies of the same tensors.
COPIED_PATHS = ("bundled",)
# The paths whose exports take longest (lowering to a delegate): run first,
# so that no long one is left for the end alone.
SLOW_FLOWS = ("xnnpack", "vulkan")


KNOWN_DEVICES = ["cpu", "meta", *FAKE_DEVICES, "cuda"]


class SelectionError(ValueError):
    """--paths/--devices select no export; one line saying why."""


def cases(
    paths: Optional[List[str]] = None,
    devices: Optional[List[str]] = None,
    cuda: Optional[bool] = None,
) -> List[Tuple[str, str]]:
    """The (path, device) pairs to run, each once; real CUDA joins every path
    when present."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    result = []
    for path in dict.fromkeys(paths or list(PATHS)):
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
    # PyTorch's own refusal to copy a meta tensor names it too.
    meta = r"|Cannot copy out of meta tensor" if name == "meta" else ""
    return re.compile(rf"on device {re.escape(name)}{suffix}\b{meta}")


@dataclasses.dataclass
class Row:
    path: str
    device: str
    outcomes: Dict[str, Outcome]
    # The same path's cpu row (``link``), which a device row that fails
    # alike is compared with; None for a cpu row, or when it did not run.
    baseline: Optional["Row"] = dataclasses.field(
        default=None, repr=False, compare=False
    )

    @property
    def copies(self) -> bool:
        """A device row whose data patched ExecuTorch reads from a host copy."""
        return self.path in COPIED_PATHS and self.device not in ("cpu", "meta")

    def _named(self, result: Dict) -> bool:
        return result.get("outcome") == "error" and bool(
            _device_pattern(self.device).search(result["message"])
        )

    @property
    def tool_errors(self) -> List[str]:
        """Why this row is no verdict on the patch: the tool could not run it."""
        errors = []
        for emitter, outcome in self.outcomes.items():
            result = outcome.result or {}
            if outcome.tool_error:
                errors.append(f"{emitter}: {outcome.tool_error}")
            elif result.get("outcome") == "setup-error":
                errors.append(
                    f"{emitter}: could not set up the case: {result['message']}"
                )
            elif result.get("outcome") == "tool-error":
                errors.append(f"{emitter}: the tool failed {result['message']}")
            elif outcome.returncode >= 0 and outcome.result is None:
                errors.append(
                    f"{emitter}: the child exited {outcome.returncode} without a "
                    "result (see --verbose)"
                )
        patched = self.outcomes["patched"].result or {}
        if (
            not errors
            and self.copies
            and patched.get("outcome") == "ok"
            and "host_copy" not in patched
        ):
            errors.append(
                "patched: the child gave no bundle of host copies to compare "
                "with (see --verbose)"
            )
        if (
            not errors
            and self.device.startswith("fake:")
            and self.failed_alike
            and not self._before_the_device
            and not self.fails_as_on_cpu
        ):
            step = _step(self.outcomes["patched"])
            errors.append(
                "check's fake device did not reach ExecuTorch's host read: stock "
                f"and patched fail alike{f' in {step}' if step else ''} with "
                f"{self.outcomes['patched'].describe()}, where the cpu row does "
                "not; a limit of check's fake device, not of the model or the "
                "patch: run check where there is CUDA, or leave this device out "
                "with --devices"
            )
        return errors

    @property
    def failed_alike(self) -> bool:
        """Stock and patched raise the same error (failures.signature: the
        type, step, raising function and message, as printed by any
        process): the guarded read is not reached."""
        stock, patched = (self.outcomes[e].result for e in EMITTERS)
        found = failures.signature(stock)
        return found is not None and found == failures.signature(patched)

    @property
    def ended_alike(self) -> bool:
        """Stock and patched fail alike or crash alike."""
        return self.failed_alike or self.crashed_alike

    @property
    def fails_as_on_cpu(self) -> bool:
        """A device row where stock and patched fail (or crash) alike, in the
        same step with the same exception type (or signal) as both do on
        the path's cpu row: the path does not take the model, whatever the
        device, and the read is never reached."""
        cpu = self.baseline
        if self.device == "cpu" or cpu is None or cpu.not_applicable:
            return False
        if not (self.ended_alike and cpu.ended_alike):
            return False
        mine, theirs = self.outcomes["stock"], cpu.outcomes["stock"]
        if _step(mine) != _step(theirs):
            return False
        if self.crashed_alike or cpu.crashed_alike:
            return self.crashed_alike and mine.returncode == theirs.returncode
        return (mine.result or {}).get("type") == (theirs.result or {}).get("type")

    @property
    def crashed_alike(self) -> bool:
        """Stock and patched die of the same signal, without a result."""
        stock, patched = (self.outcomes[e] for e in EMITTERS)
        return (
            stock.returncode < 0
            and stock.returncode == patched.returncode
            and stock.result is None
            and patched.result is None
        )

    @property
    def _before_the_device(self) -> bool:
        """The error, or both crashes, came before the tool put anything on
        the device (or the row is CPU): the model does not export, whatever
        the device."""
        if self.device == "cpu":
            return True
        if self.crashed_alike:
            return all(self.outcomes[e].stage == "export" for e in EMITTERS)
        patched = self.outcomes["patched"].result or {}
        return patched.get("stage") == "export"

    @property
    def not_applicable(self) -> bool:
        return any(
            (self.outcomes[e].result or {}).get("outcome") == "n/a" for e in EMITTERS
        )

    @property
    def fails_before_the_device(self) -> bool:
        """Stock and patched fail or crash alike before anything was on a
        device: the model does not export, whatever the patch."""
        return (
            not self.tool_errors
            and not self.not_applicable
            and (self.crashed_alike or self.failed_alike)
            and self._before_the_device
        )

    @property
    def refused_by_torch_export(self) -> bool:
        """Stock and patched fail or crash alike in torch.export, on a model
        the child exported from CPU: every path but a real CUDA one starts
        with that same torch.export, so every such row would say the same."""
        return (
            self.device != "cuda"
            and self.fails_before_the_device
            and all(_step(self.outcomes[e]) == "torch.export" for e in EMITTERS)
        )

    @property
    def step(self) -> Optional[str]:
        """The step of the export where stock's child failed or crashed."""
        return _step(self.outcomes["stock"])

    @property
    def unchecked(self) -> Optional[str]:
        """Why this row, though nothing went wrong, says nothing about the
        patch: nothing reached the guarded read. None if it does."""
        if self.tool_errors:
            return None
        results = {e: self.outcomes[e].result or {} for e in EMITTERS}
        stock, patched = results["stock"], results["patched"]
        for result in (patched, stock):
            if result.get("outcome") == "n/a":
                return f"n/a ({result['message']})"
        if self.device == "cpu" and self.ended_alike:
            return self.path_fails
        if self.fails_as_on_cpu:
            return f"as on cpu: {self.baseline.path_fails}"  # type: ignore[union-attr]
        if self.crashed_alike and self._before_the_device:
            return (
                f"the {self.path} path does not export this model with stock "
                "ExecuTorch either: stock and patched both crash with "
                f"{self.outcomes['stock'].describe()} in torch.export or "
                "lowering, before the tool put anything on the device"
            )
        if self.failed_alike:
            if self._before_the_device:
                return (
                    f"the {self.path} path does not export this model with stock "
                    f"ExecuTorch either: {self.outcomes['stock'].describe()}, "
                    "before the tool put anything on the device"
                )
            # A real device (meta, cuda) that fails before the host read.
            return (
                "stock and patched fail alike before the host read: "
                f"{self.outcomes['stock'].describe()} (ExecuTorch does not take "
                f"the model on {self.device} before the read; a limit of "
                "ExecuTorch or of the device, not of the patch)"
            )
        if self.device == "cpu":
            return None
        if stock.get("outcome") == patched.get("outcome") == "ok":
            return (
                "no constant data reached the host read: stock and patched "
                "both succeed (the path reads no constant of this model from "
                "the host; a model with parameters or buffers it uses checks it)"
            )
        if self._named(stock) and self._named(patched):
            return "stock ExecuTorch names the device already"
        return None

    @property
    def path_fails(self) -> str:
        """What a row that fails or crashes alike says: the path does not
        export the model with stock ExecuTorch either, in which step, with
        which error and its cause."""
        stock = self.outcomes["stock"]
        step = _step(stock)
        where = f"in {step}" if step else "in the export"
        if self.crashed_alike:
            what = f"stock and patched both crash with {stock.describe()}"
        else:
            what = stock.describe()
            cause = failures.cause_text(stock.result)
            if cause:
                what += f" ({cause})"
        return (
            f"the {self.path} path does not export this model with stock "
            f"ExecuTorch either: {where}, {what}"
        )

    @property
    def problems(self) -> List[str]:
        """Why the patched emitter's result is not acceptable (empty if it is)."""
        if self.tool_errors or self.unchecked:
            return []
        stock_outcome, patched_outcome = (
            self.outcomes["stock"],
            self.outcomes["patched"],
        )
        if patched_outcome.crashed:
            return [f"patched emitter crashed: {patched_outcome.describe()}"]
        stock, patched = stock_outcome.result or {}, patched_outcome.result or {}
        if self.device == "cpu":
            if patched.get("outcome") != "ok":
                if stock.get("outcome") == "ok":
                    return [f"CPU export failed: {patched_outcome.describe()}"]
                return [
                    "CPU export fails otherwise than with stock ExecuTorch "
                    f"({stock_outcome.describe()}): {patched_outcome.describe()}"
                ]
            if stock.get("outcome") != "ok":
                return [
                    "patched ExecuTorch exports on CPU where stock fails: "
                    f"{stock_outcome.describe()}"
                ]
            if stock.get("files") != patched["files"]:
                return ["CPU bytes differ from the stock emitter's"]
            return []
        if self.copies and patched.get("outcome") == "ok":
            if patched.get("files") != patched.get("host_copy"):
                return [
                    "patched ExecuTorch's bundle of the device's test data "
                    "differs from the bundle of their host copies, made in the "
                    "same process: it did not read a host copy"
                ]
            return []
        if patched.get("outcome") == "ok":
            return [
                "patched ExecuTorch exports where stock fails "
                f"({stock_outcome.describe()}): it used the device's data "
                "instead of naming the device"
            ]
        if not self._named(patched):
            return [f"error does not name the device: {patched_outcome.describe()}"]
        if stock.get("outcome") == "ok":
            return [
                "patched ExecuTorch refuses where stock succeeds: "
                f"{patched_outcome.describe()}"
            ]
        return []

    @property
    def reached(self) -> bool:
        """A device row where the guard acted: stock crashed, or failed without
        naming the device, and patched named it."""
        if self.device == "cpu" or self.tool_errors or self.unchecked or self.problems:
            return False
        stock = self.outcomes["stock"]
        patched = self.outcomes["patched"].result or {}
        stock_read = stock.returncode < 0 or not self._named(stock.result or {})
        if self.copies:
            return patched.get("outcome") == "ok" and stock_read
        return self._named(patched) and stock_read

    @property
    def constants(self) -> Optional[List[Dict]]:
        """The constants on the row's guarded path (inventory.py), as
        patched's child listed them, else stock's; None if neither did."""
        for emitter in ("patched", "stock"):
            found = self.outcomes[emitter].constants
            if found is not None:
                return found
        return None

    @property
    def cpu_same(self) -> bool:
        """A CPU row where patched gives stock's bytes."""
        return self.device == "cpu" and not (
            self.tool_errors or self.unchecked or self.problems
        )

    def as_json(self, stderr: bool = False) -> Dict:
        def outcome(o: Outcome) -> Dict:
            # Where the child's emitter came from and what the import hook
            # served it: checked by the runner, not part of the result.
            result = o.result and {
                k: v for k, v in o.result.items() if k not in ("emitter", "served")
            }
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
            "constants": self.constants,
            **{e: outcome(o) for e, o in self.outcomes.items()},
            "problems": self.problems,
            "tool_errors": self.tool_errors,
            "not_checked": self.unchecked,
            "reached": self.reached,
        }


@dataclasses.dataclass
class Verdict:
    """What the rows say together; ``exit_code`` is check's."""

    problems: List[str]
    tool_errors: List[str]
    unchecked: List[str]
    reached: int
    cpu_same: int
    # One line instead of the table: every row that ran fails alike before
    # the device (the model does not export), or None.
    alike: Optional[str] = None
    # Exports of the selection left out: torch.export refused the model on
    # a row before (run_matrix).
    left_out: int = 0
    # Device rows whose data patched ExecuTorch read from a host copy.
    copied: int = 0

    @property
    def exit_code(self) -> int:
        if self.problems:
            return 1
        if self.tool_errors or not self.reached:
            return 3
        return 0

    def lines(self) -> List[str]:
        """The report under the table (or, for ``alike``, all of it)."""
        if self.alike:
            return [self.alike]
        out = []
        if self.problems:
            out.append("FAIL:\n  " + "\n  ".join(self.problems))
        if self.tool_errors:
            out.append(
                "TOOL ERROR (no verdict on the patch for these cases; see "
                "--verbose):\n  " + "\n  ".join(self.tool_errors)
            )
        if self.unchecked:
            out.append(
                "NOT CHECKED (nothing reached ExecuTorch's host read of device "
                "memory here):\n  " + "\n  ".join(self.unchecked)
            )
        if not self.problems and not self.reached:
            out.append(
                "NO VERDICT: no export reached ExecuTorch's host read of device "
                "memory, so nothing tested the patch; the lines above say why "
                "for each row, and what to change."
            )
        elif self.exit_code == 0:
            rows = f"{self.reached} device row{'s' if self.reached != 1 else ''}"
            copied = ", reads bundled test data from a host copy" if self.copied else ""
            if self.cpu_same:
                out.append(
                    "OK: patched ExecuTorch crashes nowhere, names the device in "
                    f"every error{copied}, and gives stock ExecuTorch's CPU bytes "
                    f"({rows} reached the guarded read, {self.cpu_same} CPU "
                    f"row{'s' if self.cpu_same != 1 else ''} compared)."
                )
            else:
                out.append(
                    "OK: patched ExecuTorch crashes nowhere and names the device "
                    f"in every error{copied} ({rows} reached the guarded read; no "
                    "CPU row compared)."
                )
        return out


def _alike(rows: List[Row], left_out: int = 0) -> Optional[str]:
    """One line when every row that ran fails alike before the device, with
    the same error or signal: the model does not export at all. ``left_out``
    exports of the selection were left out after torch.export refused it."""
    ran = [row for row in rows if not row.not_applicable]
    if not ran or not all(row.fails_before_the_device for row in ran):
        return None
    # The same failure, however each process printed it (failures.py).
    # (each path's own step for the same lowering may differ).
    found = {
        _without_step(failures.signature(row.outcomes["stock"].result))
        or row.outcomes["stock"].returncode
        for row in ran
    }
    if len(found) != 1:
        return None
    errors = {ran[0].outcomes["stock"].describe()}
    crashed = ran[0].crashed_alike
    steps = list(dict.fromkeys(row.step for row in ran if row.step))
    if steps:
        where = " and ".join(steps)
        what = f"{where} {'crashes' if crashed else 'fails'} with"
    else:
        what = f"every export {'crashes' if crashed else 'fails'} with"
    if left_out:
        total = left_out + 2 * len(rows)
        rest = f", so check stopped there ({left_out} of {total} exports left out"
    else:
        rest = f" ({len(ran)} row{'s' if len(ran) != 1 else ''} alike"
    return (
        "NO VERDICT: the model does not export with stock or patched "
        f"ExecuTorch: {what} {errors.pop()}, before anything is on a device"
        f"{rest}; --verbose shows each child's stderr)."
    )


def link(rows: List[Row]) -> None:
    """Gives each device row its path's cpu row, if that ran (Row.baseline)."""
    cpu = {row.path: row for row in rows if row.device == "cpu"}
    for row in rows:
        if row.device != "cpu":
            row.baseline = cpu.get(row.path)


def _unchecked(rows: List[Row]) -> List[str]:
    """Each NOT CHECKED row's reason; the rows of a path that does not take
    the model on CPU either are told once, with what the user can do."""
    paths = list(dict.fromkeys(row.path for row in rows))
    fails = {
        row.path
        for row in rows
        if row.device == "cpu" and row.unchecked and row.ended_alike
    }
    out, told = [], set()
    for row in rows:
        if not row.unchecked:
            continue
        if row.path in fails and (row.device == "cpu" or row.fails_as_on_cpu):
            if row.path in told:
                continue
            told.add(row.path)
            cpu = row if row.device == "cpu" else row.baseline
            assert cpu is not None
            devices = [
                r.device
                for r in rows
                if r.path == row.path
                and r.unchecked
                and (r.device == "cpu" or r.fails_as_on_cpu)
            ]
            advice = failures.way_out(
                cpu.outcomes["stock"].result, row.path, paths
            )
            out.append(
                f"{row.path} {', '.join(devices)}: {cpu.path_fails}; {advice}"
            )
            continue
        out.append(f"{row.path} {row.device}: {row.unchecked}")
    return out


def _without_step(found: Optional[Tuple]) -> Optional[Tuple]:
    """A failures.signature without the step and the raising function."""
    return None if found is None else (found[0], *found[3:])


def judge(rows: List[Row], left_out: int = 0) -> Verdict:
    """What ``rows`` say together; ``left_out`` exports of the selection are
    not among them (run_matrix stopped after torch.export refused the model)."""

    def each(row: Row, items: List[str]) -> List[str]:
        return [f"{row.path} {row.device}: {item}" for item in items]

    skipped = (
        [
            f"{left_out} other export{'s' if left_out != 1 else ''}: left out, "
            "as torch.export refused the model, which every path but real CUDA "
            "exports alike"
        ]
        if left_out
        else []
    )
    link(rows)
    return Verdict(
        alike=_alike(rows, left_out),
        left_out=left_out,
        problems=[p for row in rows for p in each(row, row.problems)],
        tool_errors=[e for row in rows for e in each(row, row.tool_errors)],
        unchecked=_unchecked(rows) + skipped,
        reached=sum(row.reached for row in rows),
        cpu_same=sum(row.cpu_same for row in rows),
        copied=sum(row.reached and row.copies for row in rows),
    )


def run_matrix(
    emitters: Emitters,
    model: str,
    pairs: List[Tuple[str, str]],
    progress: Optional[TextIO] = None,
    jobs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
) -> List[Row]:
    """Runs every (path, device, emitter) child, ``jobs`` at a time, and
    returns the rows whose stock and patched exports both ran.

    One row exported from CPU runs first, alone (``_first_row``). When it
    shows that torch.export refuses the model before anything is on a
    device (``Row.refused_by_torch_export``), no other export that starts
    with that torch.export runs: they would all say the same.

    An interrupt (or any error) here aborts every child at once. Progress
    goes to ``progress``, by default ``sys.stderr`` (which the CLI guards:
    a reader that went away drops it, see output.py).
    """
    progress = progress or sys.stderr
    runs = [(path, device, e) for path, device in pairs for e in EMITTERS]
    done: Dict[Tuple[str, str, str], Outcome] = {}

    threads = max(1, (os.cpu_count() or 1) // jobs)

    first_done: List[float] = []
    lock = threading.Lock()

    def one(run: Tuple[str, str, str]) -> None:
        path, device, emitter = run
        start = time.monotonic()
        flow = PATHS[path][0]
        outcome = emitters.export(
            emitter, device, model, flow=flow, threads=threads, timeout=timeout
        )
        with lock:
            done[run] = outcome
            now = time.monotonic()
            first_done[:] = first_done or [now]
            left = _left(len(done), len(runs) if rest else len(done), now - first_done[0])
            print(
                f"[{len(done):2}/{len(runs)}] {path:8} {device:12} {emitter:7} "
                f"{_progress(outcome)} ({now - start:.1f} s{left})",
                file=progress,
                flush=True,
            )

    def row(pair: Tuple[str, str]) -> Row:
        return Row(*pair, {e: done[(*pair, e)] for e in EMITTERS})

    print(f"running {len(runs)} exports, {jobs} at a time...", file=progress)
    first = _first_row(pairs)
    rest = [run for run in runs if first is None or run[:2] != first]
    # The slowest first, so that no long one is left for the end alone.
    rest.sort(key=lambda run: PATHS[run[0]][0] not in SLOW_FLOWS)
    # Real CUDA rows do not start with the first row's torch.export on CPU:
    # they run beside it (each starts CUDA, which takes seconds).
    cuda = [run for run in rest if run[1] == "cuda"]
    rest = [run for run in rest if run[1] != "cuda"]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        started = [pool.submit(one, (*first, e)) for e in EMITTERS] if first else []
        started += [pool.submit(one, run) for run in cuda]
        if first is not None:
            for future in started[: len(EMITTERS)]:
                future.result()
            if row(first).refused_by_torch_export:
                rest = []
        for future in started + [pool.submit(one, run) for run in rest]:
            future.result()
    except BaseException:
        emitters.abort()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    rows = [row(pair) for pair in pairs if all((*pair, e) in done for e in EMITTERS)]
    link(rows)
    return rows


def _left(finished: int, total: int, since_first: float) -> str:
    """``; about N s left``, from the pace since the first export ended
    (which waited for the warm parents' imports), once two more have."""
    if finished < 3 or finished >= total:
        return ""
    return f"; about {since_first / (finished - 1) * (total - finished):.0f} s left"


def _first_row(pairs: List[Tuple[str, str]]) -> Optional[Tuple[str, str]]:
    """The row that runs first, alone: a quick one whose model is exported
    from CPU (the emitter's cpu row if selected), or None if every row is
    real CUDA. Every path but real CUDA starts with the same torch.export."""
    candidates = [pair for pair in pairs if pair[1] != "cuda"]
    if not candidates:
        return None
    return min(candidates, key=lambda p: (PATHS[p[0]][0] in SLOW_FLOWS, p[1] != "cpu"))


def _step(outcome: Outcome) -> Optional[str]:
    """The step of the export where ``outcome``'s child ended (child.py)."""
    return (outcome.result or {}).get("step") or outcome.step or None


def _progress(outcome: Outcome) -> str:
    """An export's progress line: a failure in torch.export without its
    message, which the table or the verdict says once."""
    if _step(outcome) == "torch.export" and outcome.tool_error is None:
        if outcome.result is None and outcome.returncode < 0:
            return f"crashes in torch.export: {outcome.describe()}"
        if (outcome.result or {}).get("outcome") == "error":
            return "fails in torch.export"
    return _short(outcome.describe())


def _short(text: str) -> str:
    """The message without its boilerplate, up to the device it names."""
    text = text.replace("Failed with error: ", "")
    text = text.replace("Constant tensor data for ", "")
    return re.sub(r"(is on device [^,\s]+),.*", r"\1 ...", text)


def format_table(rows: List[Row], width: int = 60) -> str:
    def cell(text: str) -> str:
        text = _short(text)
        # What is on the device, named in full: the most useful part. The
        # advice after it is what _short leaves out.
        if len(text) <= width or re.search(r"is on device \S+ \.\.\.$", text):
            return text
        return text[: width - 3] + "..."

    header = ("path", "device", "constants", "stock ExecuTorch", "patched ExecuTorch")
    lines = [header] + [
        (
            row.path,
            row.device,
            "-" if row.constants is None else str(len(row.constants)),
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


def constants_note(rows: List[Row]) -> Optional[str]:
    """Why a row's ``constants`` cell says less than its path's cpu row, or
    ``-``; None when no cell needs it."""
    link(rows)
    fewer = [
        row
        for row in rows
        if row.baseline is not None
        and row.constants is not None
        and row.baseline.constants is not None
        and len(row.constants) < len(row.baseline.constants)
    ]
    none = [row for row in rows if row.constants is None]
    if not fewer and not none:
        return None
    parts = []
    if fewer:
        parts.append(
            "a device row lists the constants its export met before it "
            "stopped, and the guard stops it at the first one on the device, "
            "before passes make the rest: fewer than on cpu "
            f"({', '.join(f'{r.path} {r.device}' for r in fewer)})"
        )
    if none:
        parts.append(
            "'-': the export stopped before it reached any "
            f"({', '.join(f'{r.path} {r.device}' for r in none)})"
        )
    return "constants: " + "; ".join(parts) + "; --verbose names each."


def log_name(path: str, device: str, emitter: str) -> str:
    return f"{path}_{device.replace(':', '_')}_{emitter}.log"


def prepare_log_dir(folder: Path, pairs: List[Tuple[str, str]]) -> None:
    """Creates ``folder`` if needed and checks, before any export, that every
    log can be written there: GuardError, one line, if not. A log that
    exists must be a regular file; a symbolic link is never followed."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise GuardError(f"--log-dir {folder}: it is not a folder") from None
    except OSError as e:
        raise GuardError(f"--log-dir {folder}: cannot create it ({e.strerror})") from e
    if not folder.is_dir():
        raise GuardError(f"--log-dir {folder}: it is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".device-guard-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GuardError(
            f"--log-dir {folder}: cannot write to it ({e.strerror})"
        ) from e
    for path, device in pairs:
        for emitter in EMITTERS:
            _refuse_non_file(folder / log_name(path, device, emitter))


def _refuse_non_file(path: Path) -> None:
    why = userfiles.not_a_file(path)
    if why is not None:
        raise GuardError(
            f"--log-dir {path.parent}: {path} {why}; the tool never writes "
            "through one: remove it or choose another folder"
        )


def write_logs(rows: List[Row], folder: Path) -> Optional[str]:
    """Each child's full stderr, one file per (path, device, emitter).

    Each log is written to a new temporary file beside it and renamed over
    it, so nothing is ever written through a link planted in its place.
    Returns None, or one line naming the log that could not be written (a
    full disk, a link planted meanwhile); the logs after it are not written.
    """
    for row in rows:
        for emitter, outcome in row.outcomes.items():
            path = folder / log_name(row.path, row.device, emitter)
            try:
                _refuse_non_file(path)
                _write_log(path, outcome.stderr)
            except GuardError as e:
                return f"{e}; it and the logs after it were not written"
            except OSError as e:
                return (
                    f"--log-dir {folder}: could not write {path} "
                    f"({e.strerror or e}); it and the logs after it are missing"
                )
    return None


def _write_log(path: Path, text: str) -> None:
    faults.step()  # a test fault, e.g. a full disk
    userfiles.replace(path, text.encode("utf-8", errors="replace"))


def print_constants(rows: List[Row], out: TextIO) -> None:
    """Each row's constants on its guarded path, one per line."""
    from executorch_device_guard.check.inventory import line

    print("\nconstants on each row's guarded path:", file=out)
    for row in rows:
        found = row.constants
        count = "not listed" if found is None else f"{len(found)}"
        print(f"  {row.path} {row.device}: {count}", file=out)
        for entry in found or []:
            print(f"    {line(entry)}", file=out)
    out.flush()


def print_stderr(rows: List[Row], out: TextIO) -> None:
    """Each child's full stderr, under a header naming the case and its outcome."""
    for row in rows:
        for emitter, outcome in row.outcomes.items():
            header = f"{row.path} {row.device} {emitter}: {outcome.describe()}"
            print(f"\n===== {header} =====", file=out)
            print(outcome.stderr.rstrip() or "(no stderr)", file=out, flush=True)
