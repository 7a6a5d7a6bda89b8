# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``run -- COMMAND``: the patched ExecuTorch for one command, nothing installed.

Builds the patched overlay of the installed ExecuTorch (overlay.py) in a
temporary folder, runs COMMAND with the overlay first on ``PYTHONPATH``, so
that the command and every Python process it starts import the patched files,
and removes the overlay when the command ends, also on SIGINT, SIGTERM and
SIGHUP, which are passed on to the command. Nothing is written to
site-packages. The exit code is the command's; 128+N if signal N ended it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

from executorch_device_guard.installed import executorch_root
from executorch_device_guard.overlay import build_overlay
from executorch_device_guard.patchset import patched_files

# Set for the command: the overlay it runs with.
OVERLAY_ENV = "EXECUTORCH_DEVICE_GUARD_OVERLAY"
_FORWARDED = [signal.SIGINT, signal.SIGTERM] + (
    [signal.SIGHUP] if hasattr(signal, "SIGHUP") else []
)


def run_command(command: List[str], root: Path) -> int:
    """Runs ``command`` with the patched overlay; returns its exit code.

    Raises GuardError (nothing started, nothing left behind) when ExecuTorch
    is missing or a file is neither stock nor patched.
    """
    installed = executorch_root()
    targets = patched_files(root)
    folder = Path(tempfile.mkdtemp(prefix="device-guard-run-"))
    previous = {}
    try:
        overlay = build_overlay(installed, targets, folder / "patched", patched=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(overlay)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env[OVERLAY_ENV] = str(overlay)
        procs: List[subprocess.Popen] = []
        early: List[int] = []

        def forward(signum: int, frame: object) -> None:
            # A terminal's Ctrl-C reaches the command as well; a signal sent
            # to this process alone reaches it only through here.
            if not procs:
                early.append(signum)
                return
            try:
                procs[0].send_signal(signum)
            except ProcessLookupError:
                pass

        for signum in _FORWARDED:
            previous[signum] = signal.signal(signum, forward)
        try:
            procs.append(subprocess.Popen(command, env=env))
        except FileNotFoundError:
            print(
                f"executorch-device-guard: error: command not found: {command[0]}",
                file=sys.stderr,
            )
            return 127
        except PermissionError:
            print(
                f"executorch-device-guard: error: cannot execute {command[0]}",
                file=sys.stderr,
            )
            return 126
        proc = procs[0]
        for signum in early:
            proc.send_signal(signum)
        code = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        shutil.rmtree(folder, ignore_errors=True)
    return code if code >= 0 else 128 - code
