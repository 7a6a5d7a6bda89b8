# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``run -- COMMAND``: the fixed ExecuTorch for one command, nothing written.

Refuses where a target of the installed ExecuTorch would load without the
fix, as ``apply`` does (``served``), then runs COMMAND with the tool's bootstrap folder
(``executorch_device_guard/bootstrap``) first on ``PYTHONPATH`` and
``PYTHONDONTWRITEBYTECODE=1``. Every Python process of the command, and every
one that those start, imports the bootstrap's ``sitecustomize`` at start,
which turns the import hook on (``finder``): ExecuTorch's target modules run
changed, compiled in memory, wherever Python finds them. ``run`` writes
nothing in ExecuTorch, site-packages or ``TMPDIR``, so it has nothing to
remove: a worker that outlives the command keeps the fix, and a SIGKILL of
``run`` leaves nothing behind. ``EXECUTORCH_DEVICE_GUARD=off`` is dropped from
the command's environment: ``run`` is asked for the fix.

SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 or SIGALRM before the
command starts end the tool (128+N). While the command runs, any of those
sent to this process alone (``kill -INT PID``, ``kill -QUIT PID``) is passed
on to the command, and the tool waits for it. One that the kernel sent to
the whole foreground process group, as a terminal does for Ctrl-C or a
hangup, is not: the command, in the same group, has it already. (On Linux
the signal's ``si_code`` tells them apart; elsewhere, a signal is not passed
on while this process is the terminal's foreground group.) A ``kill`` sent
by another process to the whole group reaches the command twice.

The exit code is the command's; 128+N if signal N ended it; 126 if it cannot
be executed, 127 if it is not found.

A command line whose Python would not start the bootstrap (``python -I``,
``-E`` or ``-S``, ``env -u PYTHONPATH``, ``env -i``, ``env PYTHONPATH=...``)
is refused before anything runs. What the command line does not show (a
script that runs ``python -I``) runs ExecuTorch as installed.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from executorch_device_guard import finder, signals
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installation import installed, served
from executorch_device_guard.output import one_line

# Every asynchronous signal that would end this process (SIGPIPE aside: Python
# ignores it). Before the command starts, each ends the tool (128+N); then
# each is passed on to the command.
_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
_FORWARDED = [getattr(signal, name) for name in _NAMES if hasattr(signal, name)]
# Linux's si_code for a signal the kernel sent (a terminal's Ctrl-C, a hangup).
_SI_KERNEL = 0x80
# The folder whose sitecustomize turns the import hook on.
BOOTSTRAP = Path(finder.__file__).resolve().parent / "bootstrap"
# Set for every Python process the tool starts: none writes bytecode into
# the installed ExecuTorch (the hook's changed modules never have any).
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def run_command(command: List[str]) -> int:
    """Runs ``command`` with the import hook on; returns its exit code.

    Raises GuardError (nothing started) when ExecuTorch is missing, a target
    would load without the fix (``served``), or the command line would skip
    the bootstrap.
    """
    signals.raise_on_terminate(_FORWARDED)
    refuse_dropped_pythonpath(command)
    executorch = installed.installed_root()
    served.refuse_without_fix(executorch, served.targets(executorch))
    return _run(command, environment(os.environ))


def environment(env: Dict[str, str]) -> Dict[str, str]:
    """``env`` with the bootstrap folder first on ``PYTHONPATH`` (once: a
    ``run`` inside ``run`` adds nothing), no bytecode written and the off
    switch dropped."""
    if os.pathsep in str(BOOTSTRAP):
        raise GuardError(
            f"the tool's folder {BOOTSTRAP} contains {os.pathsep!r}, which would "
            "split it on PYTHONPATH: install the tool in a folder without it. "
            "Nothing was run."
        )
    given = env.get("PYTHONPATH")
    rest = [
        p
        for p in (given.split(os.pathsep) if given else [])
        if not p or os.path.abspath(p) != str(BOOTSTRAP)
    ]
    env = dict(env, PYTHONPATH=os.pathsep.join([str(BOOTSTRAP), *rest]))
    env.update(NO_BYTECODE)
    if env.get(finder.OFF) == "off":
        del env[finder.OFF]
    return env


# Python's options that take a value (the next argument if not attached),
# and those after which the rest of the line is the program's.
_VALUE_OPTIONS = "WX"
_LAST_OPTIONS = "cm"
_PYTHON = re.compile(r"(python|pypy)[0-9.]*[a-z]?(\.exe)?", re.IGNORECASE)
# env's options that take a value.
_ENV_VALUE_OPTIONS = ("-u", "--unset", "-C", "--chdir", "-P", "-a", "--argv0")


def refuse_dropped_pythonpath(command: List[str]) -> None:
    """GuardError, naming the program and its option, if ``command`` would
    not start the bootstrap (see ``drops_pythonpath``)."""
    found = _dropping(command)
    if found is None:
        return
    program, dropped = found
    # apply's startup file is read under -I and -E, never under -S.
    way_out = f"drop {dropped} (or use apply instead of run)"
    if program != "env" and next(c for c in dropped if c in "IES") == "S":
        said = "skips sitecustomize, which turns the fix on"
        way_out = f"drop {dropped}, which skips apply's startup file too"
    else:
        verb = "ignores" if program != "env" else "removes"
        if dropped.startswith("PYTHONPATH="):
            verb = "replaces"
        said = f"{verb} PYTHONPATH, where run puts the fix"
    raise GuardError(
        f"run: {program} {dropped} {said}, so the command would get the stock "
        f"ExecuTorch: {way_out}. Nothing was run."
    )


def drops_pythonpath(command: List[str]) -> Optional[str]:
    """The part of ``command`` that makes its Python skip the bootstrap: ignore
    or replace ``PYTHONPATH`` (``-I``, ``-E``, ``env -u PYTHONPATH``, ``env
    -i``, ``env PYTHONPATH=...``) or skip ``sitecustomize`` (``-S``); or
    None. Only what the command line itself shows."""
    found = _dropping(command)
    return found[1] if found else None


def _dropping(command: List[str]) -> Optional[Tuple[str, str]]:
    """``(program, part)`` for ``drops_pythonpath``: ``env`` or the Python."""
    words = list(command)
    if words and os.path.basename(words[0]) == "env":
        words, dropped = _after_env(words[1:])
        if dropped is not None:
            return "env", dropped
    if not words or not _PYTHON.fullmatch(os.path.basename(words[0])):
        return None
    options, _ = _python_args(words[1:])
    for word in options:
        for letter in word[1:]:
            if letter in "IES":
                return os.path.basename(words[0]), word
            if letter in _LAST_OPTIONS or letter in _VALUE_OPTIONS:
                break  # the rest of the word is not options
    return None


def _split_string(words: List[str], i: int) -> Optional[Tuple[List[str], int]]:
    """For env's ``-S STRING`` (``-SSTRING``, ``--split-string[=]STRING``) at
    ``words[i]``: the words it stands for, and how many it takes."""
    word = words[i]
    if word in ("-S", "--split-string"):
        value, taken = (words[i + 1], 2) if i + 1 < len(words) else ("", 1)
    elif word.startswith("--split-string="):
        value, taken = word[len("--split-string=") :], 1
    elif word.startswith("-S"):
        value, taken = word[2:], 1
    else:
        return None
    try:
        return shlex.split(value), taken
    except ValueError:  # unbalanced quotes: env refuses it too
        return [], taken


def _after_env(words: List[str]) -> Tuple[List[str], Optional[str]]:
    """``env``'s arguments: the command after them, and what of them drops
    PYTHONPATH (or None)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-i", "--ignore-environment", "-"):
            return [], word
        if word in ("-u", "--unset"):
            if words[i + 1 : i + 2] == ["PYTHONPATH"]:
                return [], f"{word} PYTHONPATH"
            i += 2
            continue
        if word in ("-uPYTHONPATH", "--unset=PYTHONPATH"):
            return [], word
        if word.startswith("PYTHONPATH="):
            return [], word
        split = _split_string(words, i)
        if split is not None:  # env -S "python -I ...": its words, in place
            words = words[:i] + split[0] + words[i + split[1] :]
            continue
        if word in _ENV_VALUE_OPTIONS:
            i += 2
        elif word.startswith("-") or "=" in word:
            i += 1
        else:
            return words[i:], None
    return [], None


def _python_args(words: List[str]) -> Tuple[List[str], Optional[str]]:
    """Python's arguments ``words`` as Python reads them: the words of
    one-letter options before the script (the last may end the options, as
    ``-c`` does), and the script, or None (``-``, ``-c``, ``-m``, none)."""
    options: List[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-":
            return options, None
        if word == "--":
            return options, words[i + 1] if i + 1 < len(words) else None
        if not word.startswith("-"):
            return options, word
        if word.startswith("--"):
            i += 2 if word == "--check-hash-based-pycs" else 1
            continue
        options.append(word)
        for j, letter in enumerate(word[1:]):
            if letter in _LAST_OPTIONS:
                return options, None
            if letter in _VALUE_OPTIONS:
                if j == len(word) - 2:
                    i += 1  # the value is the next argument
                break
        i += 1
    return options, None


def _first_line(path: str) -> bytes:
    """The first line of a regular file (at most 256 bytes), never waiting
    on a FIFO; b"" for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, 256).split(b"\n", 1)[0]
    except OSError:
        return b""
    finally:
        os.close(fd)


def _cannot_execute(command: str, error: OSError) -> int:
    """One line for a command that could not be started: 127 if it is not
    found, 126 if it cannot be executed (bash's codes and words, a file
    whose ``#!`` interpreter is missing included)."""
    code, said = 126, f"cannot execute {command}: {error.strerror or error}"
    if error.errno == errno.ENOENT:
        found = command if os.sep in command else shutil.which(command)
        line = _first_line(found) if found else b""
        if line.startswith(b"#!"):
            interpreter = os.fsdecode(line[2:].strip(b" \t").split(b" ")[0])
            crlf = (
                " (its #! line ends in a carriage return: the script has "
                "CRLF line endings)"
                if interpreter.endswith("\r")
                else ""
            )
            said = (
                f"cannot execute {command}: {interpreter}: bad interpreter: No "
                f"such file or directory{crlf}"
            )
        elif found and os.path.isfile(found):
            said += " (it is there, so what runs it is missing: a binary's loader)"
        else:
            code, said = 127, f"command not found: {command}"
    elif error.errno == errno.ENOEXEC:
        said += " (a script needs a #! line)"
    print(f"executorch-device-guard: error: {one_line(said)}", file=sys.stderr)
    return code


def _run(command: List[str], env: Dict[str, str]) -> int:
    """Runs ``command`` with ``env``; its exit code."""
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
