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
be executed, 127 if it is not found. Once the command has ended, a signal
(a Ctrl-C just after it) only cuts the tool's note short: the exit code
stays the command's, and the overlay is removed as ever.

The temporary folder is never inside the installed package (a ``TMPDIR``
there, or ``TMPDIR=.`` inside it, is refused before anything is written
there, see ``tempdirs``), and it is locked while the command runs (the command
inherits the lock). It stays while any process that the command started
lives (``users``: a background worker, a daemon that closed its descriptors):
``run`` then returns the command's exit code and says in one line that the
folder stays; the next ``run`` removes it once no process holds its lock or
has it in its environment, also after a SIGKILL of ``run``.

``run`` inside ``run`` (a script that wraps its export in ``run``, itself run
under ``run``) finds the outer overlay first on its path; it runs the command
as it is only when that folder is, file by file, a patched overlay of the
installed ExecuTorch as it is now (``overlay.is_patched_overlay``), and
refuses any other folder that shadows it, as ``apply`` does.

A command line that would drop ``PYTHONPATH``, and with it the overlay
(``python -I`` or ``-E``, ``env -u PYTHONPATH``, ``env -i``, ``env
PYTHONPATH=...``), is refused before anything runs. What the command line
does not show (a script that runs ``python -I``) is told afterwards: the
overlay's ``executorch/exir/__init__.py`` creates a marker file in this run's
temporary folder when a process starts importing it, and another when that
import is done; when no process started it, one line on stderr says so and
names the likely causes, and when one started it but none finished, one line
says that the import failed. The exit code stays the command's.
"""

from __future__ import annotations

import errno
import json
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

from executorch_device_guard.installation import installed, lock, origins
from executorch_device_guard import signals, tempdirs, users
from executorch_device_guard.installation.confined import read_file, Unsafe
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installation.overlay import (
    build_overlay,
    inspect_targets,
    is_patched_overlay,
    NO_BYTECODE,
)
from executorch_device_guard.output import one_line
from executorch_device_guard.patchset import patched_files

PREFIX = tempdirs.RUN
# Set for the command: the marker files that the overlay's ExecuTorch creates
# when a process starts importing it, and when that import is done.
IMPORTED_ENV = "EXECUTORCH_DEVICE_GUARD_IMPORTED"
STARTED_ENV = "EXECUTORCH_DEVICE_GUARD_STARTED"
# Put in place of the first blank line of executorch/exir/__init__.py after
# its docstring and __future__ imports (one line for one, so that every line
# number stays): it creates the start marker. Like the code appended below,
# it creates a file, never a folder, never follows a link, defines no name
# in the module, and does nothing outside ``run`` (the variable is unset).
_START_LINE = (
    'exec("import os\\np = os.environ.get(\'%s\')\\nif p:\\n    try:\\n'
    "        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | getattr(os, "
    "'O_NOFOLLOW', 0), 0o600))\\n    except OSError:\\n        pass\\n\", {})"
    "  # Added by executorch-device-guard run: this import started.\n" % STARTED_ENV
)
# Appended to the overlay's copy of executorch/exir/__init__.py (after its
# last line, so that every line number stays). It creates the marker, never
# a folder, and never follows a link; outside ``run`` the variable is unset.
_MARKER_CODE = """

# Added by executorch-device-guard run (not in the installed file): tells run
# that this process imported the patched overlay's ExecuTorch.
def _executorch_device_guard_imported():
    import os

    path = os.environ.get("EXECUTORCH_DEVICE_GUARD_IMPORTED")
    if path:
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            os.close(os.open(path, flags, 0o600))
        except OSError:
            pass


_executorch_device_guard_imported()
del _executorch_device_guard_imported
"""
# Every asynchronous signal that would end this process (SIGPIPE aside: Python
# ignores it). Before the command starts, each ends the tool (128+N) with the
# overlay removed; then each is passed on to the command.
_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
_FORWARDED = [getattr(signal, name) for name in _NAMES if hasattr(signal, name)]
# Linux's si_code for a signal the kernel sent (a terminal's Ctrl-C, a hangup).
_SI_KERNEL = 0x80


def run_command(
    command: List[str], root: Path, wait: float = lock.DEFAULT_WAIT
) -> int:
    """Runs ``command`` with the patched overlay; returns its exit code.

    Raises GuardError (nothing started, nothing left behind) when ExecuTorch
    is missing, a file is neither stock nor patched, or the command's Python
    would not import the overlay.
    """
    signals.raise_on_terminate(_FORWARDED)
    refuse_dropped_pythonpath(command)
    executorch = installed.installed_root()
    targets = patched_files(root, install=True)
    found = inspect_targets(executorch, targets, wait=wait)
    instead = installed.loaded_instead(executorch)
    if instead is not None:
        # Only an outer run's overlay, first on PYTHONPATH, may come first,
        # and then every target must come from it.
        outer = Path(instead.portion).parent if instead.portion else None
        variants = _marked(executorch)
        if (
            outer is None
            or not is_patched_overlay(outer, executorch, found, variants)
            or installed.loaded_instead(executorch, outer / "executorch")
        ):
            raise installed.shadowed(executorch, instead)
        return _run(command, dict(os.environ))
    tempdirs.remove_abandoned(outside=executorch)
    folder = tempdirs.make(PREFIX, outside=executorch, locked=True)
    kept, code = False, None
    try:
        with tempdirs.writing(folder):
            overlay = build_overlay(
                executorch, targets, folder / "patched", patched=True, found=found
            )
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(overlay)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
            )
            env.update(NO_BYTECODE)
            _check_import(env, overlay, folder, executorch, command)
            marker, started = folder / "imported", folder / "started"
            watched = _add_import_marker(overlay)
        if watched:
            env[IMPORTED_ENV] = str(marker)
            env[STARTED_ENV] = str(started)
        left = None
        code = _run(command, env, keep=tempdirs.lock_of(folder))
        try:
            left = users.of(folder)
            if left:
                # Processes of the command that still run may import from it
                # (whether they do is not known yet: no note on the markers).
                kept = True
                tempdirs.keep(folder)
                print(one_line(_still_used(folder, left)), file=sys.stderr, flush=True)
            elif watched and code not in (126, 127) and not marker.exists():
                failed = started.exists()
                note = _failed() if failed else _not_imported()
                print(one_line(note), file=sys.stderr, flush=True)
        except (KeyboardInterrupt, signals.Interrupted):
            # The command has ended: a signal now (a Ctrl-C just after it)
            # cuts the note short, not the command's exit code. Where it
            # came before the look for processes still using the folder,
            # the folder stays, for the next run to remove once none does.
            if left is None:
                kept = True
                tempdirs.keep(folder)
        return code
    finally:
        if not kept:
            try:
                tempdirs.remove(folder)
            except (KeyboardInterrupt, signals.Interrupted):
                if code is None:
                    raise  # before the command ended: it ends the tool


def _marked(executorch: Path) -> Dict[str, bytes]:
    """What ``_add_import_marker`` makes of ``exir/__init__.py`` (if it can
    be read), for ``is_patched_overlay``."""
    try:
        text = read_file(executorch / "exir" / "__init__.py")
    except Unsafe:
        return {}
    return {"exir/__init__.py": with_markers(text)} if text else {}


def with_markers(text: bytes) -> bytes:
    """``exir/__init__.py``'s text with the import markers: the start line
    in place of its first blank line after the docstring and ``__future__``
    imports, outside any statement (none, where it has no such line or is
    not Python that this interpreter parses), and the end code appended."""
    lines = text.splitlines(keepends=True)
    blank = _blank_line(text)
    if blank is not None:
        lines[blank] = _START_LINE.encode()
    return b"".join(lines) + _MARKER_CODE.encode()


def _blank_line(text: bytes) -> Optional[int]:
    """The index of the first line of ``text`` where a statement can stand
    without moving any other line: blank, after the module's docstring and
    ``__future__`` imports, inside no statement."""
    import ast

    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return None
    header = 0
    for node in body:
        docstring = isinstance(node, ast.Expr) and isinstance(
            getattr(node, "value", None), ast.Constant
        ) and isinstance(node.value.value, str)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
        header = node.end_lineno or node.lineno
    taken = set()
    for node in body:
        decorators = getattr(node, "decorator_list", [])
        first = min([node.lineno] + [d.lineno for d in decorators])
        taken.update(range(first, (node.end_lineno or node.lineno) + 1))
    lines = text.splitlines(keepends=True)
    for number in range(header + 1, len(lines) + 1):
        line = lines[number - 1]
        previous = lines[number - 2] if number > 1 else b""
        if (
            number not in taken
            and not line.strip()
            and not previous.rstrip(b"\r\n").endswith(b"\\")
        ):
            return number - 1
    return None


def _add_import_marker(overlay: Path) -> bool:
    """Makes the overlay's ``executorch/exir/__init__.py`` a file of its own
    that creates the marker when imported. False, changing nothing, where
    that file would not be the overlay's own (its folder is a link into
    site-packages, which is never written)."""
    folder = overlay / "executorch" / "exir"
    init = folder / "__init__.py"
    if folder.is_symlink() or not folder.is_dir() or not init.is_file():
        return False
    try:
        text = read_file(init.resolve())
    except Unsafe:
        return False
    if text is None:
        return False
    # Replace the link itself (unlinking it leaves what it points to alone),
    # and create the new file only where nothing is.
    init.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(init, flags, 0o644), "wb") as f:
        f.write(with_markers(text))
    return True


def _failed() -> str:
    return (
        "executorch-device-guard: note: a process of this command started "
        "importing ExecuTorch from the patched overlay, but no process finished "
        "that import (it failed: its error is above), so the fix was not in play."
    )


def _still_used(folder: Path, pids: List[int]) -> str:
    who = lock.describe(pids[0])
    if len(pids) > 1:
        who += f" and {len(pids) - 1} more that it started still run"
    else:
        who += ", which it started, still runs"
    return (
        f"executorch-device-guard: note: the command ended, but {who} with the "
        f"patched overlay on PYTHONPATH, so {folder} stays; the next `run` "
        "removes it once no such process is left."
    )


def _not_imported() -> str:
    return (
        "executorch-device-guard: note: no process of this command imported "
        "ExecuTorch from the patched overlay, so the fix was not in play. If it "
        "uses ExecuTorch, its Python ignored PYTHONPATH (python -I or -E, env "
        "-u PYTHONPATH or env -i, a virtualenv or conda activation that resets "
        f"it) or was another Python than {sys.executable}."
    )


# Python's options that take a value (the next argument if not attached),
# and those after which the rest of the line is the program's.
_VALUE_OPTIONS = "WX"
_LAST_OPTIONS = "cm"
_PYTHON = re.compile(r"(python|pypy)[0-9.]*[a-z]?(\.exe)?", re.IGNORECASE)
# env's options that take a value.
_ENV_VALUE_OPTIONS = ("-u", "--unset", "-C", "--chdir", "-P", "-a", "--argv0")


def refuse_dropped_pythonpath(command: List[str]) -> None:
    """GuardError, naming the program and its option, if ``command`` drops
    or replaces ``PYTHONPATH`` (see ``drops_pythonpath``)."""
    found = _dropping(command)
    if found is None:
        return
    program, dropped = found
    if program != "env":
        verb = "ignores"
    elif dropped.startswith("PYTHONPATH="):
        verb = "replaces"
    else:
        verb = "removes"
    raise GuardError(
        f"run: {program} {dropped} {verb} PYTHONPATH, where run puts the "
        "patched ExecuTorch, so the command would get the stock ExecuTorch: "
        f"drop {dropped} (or use apply instead of run). Nothing was run."
    )


def drops_pythonpath(command: List[str]) -> Optional[str]:
    """The part of ``command`` that makes its Python ignore or replace
    ``PYTHONPATH`` (``-I``, ``-E``, ``env -u PYTHONPATH``, ``env -i``, ``env
    PYTHONPATH=...``), or None. Only what the command line itself shows."""
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
            if letter in "IE":
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


def _check_import(
    env: Dict[str, str],
    overlay: Path,
    folder: Path,
    executorch: Path,
    command: List[str],
) -> None:
    """GuardError unless Python with ``env``, run from the current folder
    (``python -c``, ``-m``) and, for ``python FILE``, with the script's folder
    first, would import every target module, and each package on its way,
    from the overlay (``origins``, run in a child of this interpreter)."""
    answer = folder / "where.json"
    script = script_folder(command)
    request = {
        "root": str(overlay / "executorch"),
        "rels": installed.targets_in(executorch),
        "firsts": [None] + ([script] if script else []),
    }
    try:
        code = Path(origins.__file__).read_text(encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-c", code, str(answer), json.dumps(request)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            timeout=120,
        )
        found = json.loads(answer.read_text()) if proc.returncode == 0 else None
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
    if found is None:
        return
    instead = installed.Instead.of(found)
    said = (
        f"{sys.executable} would import ExecuTorch from {instead.where or 'nowhere'} "
        f"(`import {instead.module}`), not from the patched overlay"
    )
    if instead.finder is not None:
        raise GuardError(f"{said}: {installed.served(instead)}. Nothing was run.")
    holder = os.path.dirname(instead.portion) if instead.portion else None
    if found.get("first") is None and _same_folder(holder, os.getcwd()):
        raise GuardError(
            f"{said}: the current folder {os.getcwd()} holds an executorch folder, "
            "which Python puts ahead of PYTHONPATH (python -c, python -m): run "
            "the command from another folder. Nothing was run."
        )
    if found.get("first") is not None and _same_folder(holder, found["first"]):
        raise GuardError(
            f"{said}: the script's folder {found['first']} holds an executorch "
            "folder, which Python puts ahead of PYTHONPATH (python FILE): move "
            "the script, or that folder. Nothing was run."
        )
    raise GuardError(
        f"{said}: something on its path (a sitecustomize, a .pth file, "
        "PYTHONSAFEPATH aside) puts another ExecuTorch first. Nothing was run."
    )


def _same_folder(a: Optional[str], b: Optional[str]) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def script_folder(command: List[str]) -> Optional[str]:
    """The folder that the command's Python puts first on its path in place
    of the current folder: the script's (its path with links resolved), for
    ``python [OPTIONS] FILE`` and for a script run by its ``#!`` line that
    names a Python; the script itself if it is a folder or zip file. None
    for ``python -c`` or ``-m``, stdin, or a command that is not Python."""
    words = list(command)
    if words and os.path.basename(words[0]) == "env":
        words, _ = _after_env(words[1:])
    if not words:
        return None
    if _PYTHON.fullmatch(os.path.basename(words[0])):
        _, script = _python_args(words[1:])
    else:
        script = words[0] if _runs_python(words[0]) else None
    if script is None:
        return None
    if os.path.isdir(script) or not script.endswith(".py") and _is_zip(script):
        return os.path.abspath(script)
    return os.path.dirname(os.path.realpath(script))


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


def _runs_python(program: str) -> bool:
    """Whether ``program`` is a script whose ``#!`` line names a Python."""
    path = program if os.sep in program else shutil.which(program)
    line = _first_line(path) if path else b""
    return line.startswith(b"#!") and b"python" in line


def _is_zip(path: str) -> bool:
    import zipfile

    try:
        return os.path.isfile(path) and zipfile.is_zipfile(path)
    except OSError:
        return False


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


def _run(command: List[str], env: Dict[str, str], keep: Tuple[int, ...] = ()) -> int:
    """Runs ``command``; it inherits the descriptors ``keep``."""
    if hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask"):
        code = _run_waiting_for_signals(command, env, keep)
    else:
        code = _run_with_handlers(command, env, keep)
    return code if code >= 0 else 128 - code


def _run_waiting_for_signals(
    command: List[str], env: Dict[str, str], keep: Tuple[int, ...]
) -> int:
    """POSIX: the signals are blocked and taken one at a time with their
    sender's details (``sigtimedwait``), so the tool knows which to pass on."""
    watched = {*_FORWARDED, signal.SIGCHLD}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        try:
            proc = subprocess.Popen(
                command,
                env=env,
                pass_fds=keep,
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


def _run_with_handlers(
    command: List[str], env: Dict[str, str], keep: Tuple[int, ...]
) -> int:
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
            procs.append(subprocess.Popen(command, env=env, pass_fds=keep))
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
