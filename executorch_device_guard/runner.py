# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs exports in child processes against the stock or the patched emitter."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from executorch_device_guard import data_root
from executorch_device_guard.child import RESULT_TAG
from executorch_device_guard.installed import executorch_root
from executorch_device_guard.overlay import build_overlay
from executorch_device_guard.patchset import patched_files

EMITTERS = ("stock", "patched")


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


class Emitters:
    """Stock and patched overlays of the installed ExecuTorch, for child processes."""

    def __init__(self, root: Optional[Path] = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="device-guard-")
        installed = executorch_root()
        targets = patched_files(root or data_root())
        base = Path(self._tmp.name)
        self.paths = {
            name: build_overlay(installed, targets, base / name, name == "patched")
            for name in EMITTERS
        }

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

    def run(
        self,
        emitter: str,
        args: List[str],
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *args],
            env=self.env(emitter),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def export(
        self,
        emitter: str,
        device: str,
        model: str = "issue",
        external_constants: bool = False,
        out: Optional[Path] = None,
        flow: str = "emit",
    ) -> Outcome:
        out = out or Path(self._tmp.name) / "out" / flow / emitter / device.replace(
            ":", "_"
        )
        args = ["-m", "executorch_device_guard.child", "--device", device]
        args += ["--model", model, "--out", str(out), "--flow", flow]
        if external_constants:
            args.append("--external-constants")
        proc = self.run(emitter, args)
        result = None
        for line in proc.stdout.splitlines():
            if line.startswith(RESULT_TAG):
                result = json.loads(line[len(RESULT_TAG) :])
        return Outcome(proc.returncode, result, proc.stderr)

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> "Emitters":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
