# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs exports in child processes against the stock or the patched emitter.

Each overlay gets a warm parent (executorch_device_guard.warm) that has
imported torch and ExecuTorch once; each export is a child forked from it.
Real CUDA cases, platforms without fork, and ``Emitters(warm=False)`` use a
fresh interpreter per export instead. Either way a crash kills one child only,
and the result is the same ``Outcome``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

from executorch_device_guard import data_root, warm
from executorch_device_guard.child import RESULT_TAG
from executorch_device_guard.installed import executorch_root
from executorch_device_guard.overlay import build_overlay
from executorch_device_guard.patchset import patched_files

EMITTERS = ("stock", "patched")

# What an export child needs, imported once by each warm parent. No tensor
# operation runs while importing these.
EXPORT_PRELOAD = (
    "torch",
    "torch.export",
    "executorch.exir",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "executorch.backends.xnnpack.xnnpack_preprocess",
    "executorch.devtools.bundled_program.core",
    "executorch.devtools.bundled_program.serialize",
    "executorch_device_guard.child",
    "executorch_device_guard.fake_device",
    "executorch_device_guard.models",
    "executorch_device_guard.probe",
    # Imported by every export on its first run; optional ('?'): private
    # modules that other torch releases may not have.
    "torch.export._trace?",
    "torch.export._unlift?",
    "torch._export.db?",
    "torch._export.passes.replace_set_grad_with_hop_pass?",
    "torch._export.passes.collect_tracepoints_pass?",
    "torch._functorch._aot_autograd.subclass_parametrization?",
    "torch._inductor.fx_passes.dedupe_symint_uses?",
    "torch._higher_order_ops.passes?",
    "torch.fx.experimental.validator?",
    "executorch.extension.flat_tensor?",
)


@dataclasses.dataclass
class Outcome:
    returncode: int
    result: Optional[Dict]
    stderr: str

    @property
    def crashed(self) -> bool:
        return self.returncode < 0 or self.result is None

    def describe(self) -> str:
        """Exit code or signal name, or the exception's first line."""
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            return f"{name} (exit {128 - self.returncode})"
        if self.result is None:
            return f"exit {self.returncode}, no result"
        if self.result["outcome"] == "ok":
            return "ok"
        if self.result["outcome"] == "n/a":
            return f"n/a ({self.result['message']})"
        return f"{self.result['type']}: {self.result['message']}"


def parse_result(stdout: str) -> Optional[Dict]:
    """The child's ``RESULT_TAG`` line, if it printed one."""
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG) :])
    return result


class Emitters:
    """Stock and patched overlays of the installed ExecuTorch, for child processes.

    ``run`` starts a fresh interpreter; ``fork`` and ``call`` use the overlay's
    warm parent (started on first use, or all at once by ``start``) and fall
    back to a fresh interpreter where fork is not available.
    """

    def __init__(
        self,
        root: Optional[Path] = None,
        warm: Optional[bool] = None,
        preload: Sequence[str] = EXPORT_PRELOAD,
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="device-guard-")
        installed = executorch_root()
        targets = patched_files(root or data_root())
        base = Path(self._tmp.name)
        self.paths = {
            name: build_overlay(installed, targets, base / name, name == "patched")
            for name in EMITTERS
        }
        self.warm = _warm_default() if warm is None else warm and _warm_default()
        self._preload = tuple(preload)
        self._parents: Dict[str, Optional[warm.WarmParent]] = {}
        self._failed: Set[warm.WarmParent] = set()
        self._lock = threading.Lock()

    def env(self, emitter: str) -> Dict[str, str]:
        env = dict(os.environ)
        # The overlay first, then wherever this package itself is imported from.
        package_parent = Path(__file__).resolve().parent.parent
        parts = [str(self.paths[emitter]), str(package_parent)]
        if env.get("PYTHONPATH"):
            parts.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(parts)
        env["PYTHONFAULTHANDLER"] = "1"
        return env

    def start(self) -> None:
        """Starts every overlay's warm parent now (they import in parallel)."""
        for emitter in EMITTERS:
            self.parent(emitter)

    def parent(self, emitter: str) -> Optional[warm.WarmParent]:
        """The overlay's warm parent, started if needed; None without fork."""
        if not self.warm:
            return None
        with self._lock:
            if emitter not in self._parents:
                self._parents[emitter] = warm.WarmParent(
                    self.env(emitter), self._preload, Path(self._tmp.name)
                )
            return self._parents[emitter]

    def run(
        self,
        emitter: str,
        args: List[str],
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        """``python ARGS`` in a fresh interpreter with the overlay first."""
        return subprocess.run(
            [sys.executable, *args],
            env=self.env(emitter),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def fork(
        self,
        emitter: str,
        args: List[str],
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        """``python ARGS`` in a child of the overlay's warm parent.

        ARGS is ``-m MODULE ...``, ``-c CODE ...`` or ``SCRIPT ...``, optionally
        after ``-X faulthandler`` (always on). Falls back to ``run`` where
        there is no warm parent.
        """
        parent = self.parent(emitter)
        if parent is not None:
            try:
                return parent.run(args, cwd=cwd, timeout=timeout)
            except warm.WarmError as e:
                self._fall_back(emitter, e)
        return self.run(emitter, args, timeout, cwd)

    def call(
        self,
        emitter: str,
        target: str,
        args: Sequence[str] = (),
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        """``pkg.module:function(args)`` in a child of the warm parent.

        The function's int return value is the exit code. Without a warm
        parent, a fresh interpreter calls it the same way.
        """
        parent = self.parent(emitter)
        if parent is not None:
            try:
                return parent.call(target, args, cwd=cwd, timeout=timeout)
            except warm.WarmError as e:
                self._fall_back(emitter, e)
        module, _, function = target.partition(":")
        code = (
            f"import sys; from {module} import {function} as f; "
            "r = f(sys.argv[1:]); sys.exit(r if isinstance(r, int) else 0)"
        )
        return self.run(emitter, ["-c", code, *args], timeout, cwd)

    def _fall_back(self, emitter: str, error: Exception) -> None:
        """From now on, fresh interpreters for this overlay; says why, once."""
        with self._lock:
            parent = self._parents.get(emitter)
            if parent is None or parent in self._failed:
                return
            self._failed.add(parent)
            self._parents[emitter] = None
        reason = str(error).strip().splitlines()[-1:] or ["unknown"]
        print(
            f"executorch-device-guard: the {emitter} warm parent failed "
            f"({reason[0]}); using a fresh interpreter per run",
            file=sys.stderr,
            flush=True,
        )
        parent.close()

    def export(
        self,
        emitter: str,
        device: str,
        model: str = "issue",
        external_constants: bool = False,
        out: Optional[Path] = None,
        flow: str = "emit",
        threads: Optional[int] = None,
    ) -> Outcome:
        """One export in a child; ``threads`` sets torch's intra-op threads."""
        out = out or Path(self._tmp.name) / "out" / flow / emitter / device.replace(
            ":", "_"
        )
        args = ["--device", device, "--model", model, "--out", str(out)]
        args += ["--flow", flow]
        if external_constants:
            args.append("--external-constants")
        if threads:
            args += ["--threads", str(threads)]
        if device == "cuda" or flow == "cuda-partitioner":
            # CUDA must not be initialised in a process that forks: fresh.
            proc = self.run(emitter, ["-m", "executorch_device_guard.child", *args])
        else:
            proc = self.call(emitter, "executorch_device_guard.child:main", args)
        return Outcome(proc.returncode, parse_result(proc.stdout), proc.stderr)

    def close(self) -> None:
        for parent in [*self._parents.values(), *self._failed]:
            if parent is not None:
                parent.close()
        self._tmp.cleanup()

    def __enter__(self) -> "Emitters":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _warm_default() -> bool:
    return warm.available()
