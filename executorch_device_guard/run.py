# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``run -- COMMAND``: the patched ExecuTorch for one command, nothing installed.

Reads the installed ExecuTorch's target files as ``apply`` does and refuses
what it refuses; builds the patched overlay (overlay.py) in a temporary
folder; checks, with this interpreter and the command's environment, that
``import executorch`` would load the overlay (a sitecustomize, a .pth file
or an ``executorch`` folder in the current folder could put another
ExecuTorch first); then runs COMMAND with the overlay first
on ``PYTHONPATH`` and ``PYTHONDONTWRITEBYTECODE=1`` (so that no Python process
caches bytecode through the overlay's links into site-packages), and removes
the overlay when the command ends. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
SIGUSR2 or SIGALRM before the command starts remove the overlay and end the
tool (128+N).

While the command runs, any of those sent to this process alone (``kill
-INT PID``, ``kill -QUIT PID``) is passed on to the command, and the tool
waits for it. One that the kernel sent to the whole
foreground process group, as a terminal does for Ctrl-C or a hangup, is not:
the command, in the same group, has it already. (On Linux the signal's
``si_code`` tells them apart; elsewhere, a signal is not passed on while this
process is the terminal's foreground group.) A ``kill`` sent by another
process to the whole group reaches the command twice.

The exit code is the command's; 128+N if signal N ended it; 126 if it cannot
be executed, 127 if it is not found.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from executorch_device_guard import signals, tempdirs
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installed import executorch_root
from executorch_device_guard.overlay import build_overlay, inspect_targets, NO_BYTECODE
from executorch_device_guard.patchset import patched_files

# Set for the command: the overlay it runs with.
OVERLAY_ENV = "EXECUTORCH_DEVICE_GUARD_OVERLAY"
# Every asynchronous signal that would end this process (SIGPIPE aside: Python
# ignores it). Before the command starts, each ends the tool (128+N) with the
# overlay removed; then each is passed on to the command.
_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
_FORWARDED = [getattr(signal, name) for name in _NAMES if hasattr(signal, name)]
# Linux's si_code for a signal the kernel sent (a terminal's Ctrl-C, a hangup).
_SI_KERNEL = 0x80

# Where ``import executorch.exir`` would come from, without importing it.
_WHERE = """
import importlib.util, json, os, sys
spec = importlib.util.find_spec("executorch")
places = list((spec and spec.submodule_search_locations) or [])
first = next((p for p in places if os.path.isdir(os.path.join(p, "exir"))), None)
with open(sys.argv[1], "w") as f:
    json.dump(first, f)
"""


def run_command(command: List[str], root: Path) -> int:
    """Runs ``command`` with the patched overlay; returns its exit code.

    Raises GuardError (nothing started, nothing left behind) when ExecuTorch
    is missing, a file is neither stock nor patched, or the command's Python
    would not import the overlay.
    """
    signals.raise_on_terminate(_FORWARDED)
    installed = executorch_root()
    targets = patched_files(root)
    found = inspect_targets(installed, targets)
    folder = tempdirs.make("device-guard-run-")
    try:
        overlay = build_overlay(
            installed, targets, folder / "patched", patched=True, found=found
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(overlay)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        env[OVERLAY_ENV] = str(overlay)
        env.update(NO_BYTECODE)
        _check_import(env, overlay, folder)
        return _run(command, env)
    finally:
        tempdirs.remove(folder)


def _check_import(env: Dict[str, str], overlay: Path, folder: Path) -> None:
    """GuardError unless Python with ``env`` would import the overlay's
    ExecuTorch."""
    answer = folder / "where.json"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _WHERE, str(answer)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            timeout=120,
        )
        where = json.loads(answer.read_text()) if proc.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        raise GuardError(
            f"could not check which ExecuTorch {sys.executable} would import "
            f"with the overlay ({e}); nothing was run."
        ) from e
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        raise GuardError(
            f"could not check which ExecuTorch {sys.executable} would import "
            f"with the overlay (exit {proc.returncode}: {last}); nothing was run."
        )
    expected = overlay / "executorch"
    if not where or os.path.realpath(where) != os.path.realpath(expected):
        here = os.path.join(os.getcwd(), "executorch")
        if os.path.isdir(here) and (
            not where
            or os.path.commonpath([os.path.realpath(where), os.path.realpath(here)])
            == os.path.realpath(here)
        ):
            raise GuardError(
                f"{sys.executable} would import ExecuTorch from {here}, not from "
                f"the patched overlay: the current folder {os.getcwd()} holds an "
                "executorch folder, which Python puts ahead of PYTHONPATH "
                "(python -c, python -m): run the command from another folder. "
                "Nothing was run."
            )
        raise GuardError(
            f"{sys.executable} would import ExecuTorch from {where}, not from the "
            "patched overlay: something on its path (a sitecustomize, a .pth "
            "file, PYTHONSAFEPATH aside) puts another ExecuTorch first. Nothing "
            "was run."
        )


def _cannot_execute(command: str, error: OSError) -> int:
    if error.errno == errno.ENOENT:
        print(
            f"executorch-device-guard: error: command not found: {command}",
            file=sys.stderr,
        )
        return 127
    why = error.strerror or str(error)
    if error.errno == errno.ENOEXEC:
        why += " (a script needs a #! line)"
    print(
        f"executorch-device-guard: error: cannot execute {command}: {why}",
        file=sys.stderr,
    )
    return 126


def _run(command: List[str], env: Dict[str, str]) -> int:
    if hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
        code = _run_waiting_for_signals(command, env)
    else:
        code = _run_with_handlers(command, env)
    return code if code >= 0 else 128 - code


def _run_waiting_for_signals(command: List[str], env: Dict[str, str]) -> int:
    """POSIX: the signals are blocked and taken one at a time with their
    sender's details (``sigtimedwait``), so the tool knows which to pass on."""
    watched = {*_FORWARDED, signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        try:
            proc = subprocess.Popen(
                command,
                env=env,
                # The command gets the signal mask the tool started with.
                preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, previous),
            )
        except OSError as e:
            return _cannot_execute(command[0], e)
        while proc.poll() is None:
            info = signal.sigtimedwait(watched, 1.0)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            if _sent_to_the_group(info):
                continue  # the command has it already
            try:
                proc.send_signal(info.si_signo)
            except ProcessLookupError:
                pass
        return proc.returncode
    finally:
        # What arrived for the command after it ended is not the tool's.
        while signal.sigtimedwait(watched, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _sent_to_the_group(info: "signal.struct_siginfo") -> bool:
    if sys.platform.startswith("linux"):
        return info.si_code == _SI_KERNEL
    return _in_the_terminal_foreground()


def _in_the_terminal_foreground() -> bool:
    """Whether this process's group is its terminal's foreground group."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _run_with_handlers(command: List[str], env: Dict[str, str]) -> int:
    """Where signals cannot be waited for: Python handlers pass them on."""
    procs: List[subprocess.Popen] = []
    early: List[int] = []
    previous = {}

    def forward(signum: int, frame: object) -> None:
        if not procs:
            early.append(signum)
        elif not _in_the_terminal_foreground():
            try:
                procs[0].send_signal(signum)
            except ProcessLookupError:
                pass

    try:
        for signum in _FORWARDED:
            previous[signum] = signal.signal(signum, forward)
        try:
            procs.append(subprocess.Popen(command, env=env))
        except OSError as e:
            return _cannot_execute(command[0], e)
        if early:
            # A signal before the command started ends the tool, not the command.
            procs[0].kill()
            procs[0].wait()
            if early[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise signals.Interrupted(early[0])
        return procs[0].wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
