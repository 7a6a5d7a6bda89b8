# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check``'s temporary folder, created and removed whatever signal comes.

``check`` keeps its children's case folders (their result files and the
programs they write) and its warm parents' logs in a temporary folder of its
own; nothing of ExecuTorch's is ever written there. A folder that cannot
be written (a full disk) is named in one line (``writing``, ``probe``).

A SIGINT, SIGTERM or SIGHUP that arrives while a folder is being created or
removed waits until that is done (``holding``) and is then raised as
``KeyboardInterrupt`` or ``signals.Interrupted``, so that the caller's
cleanup runs and no folder is left behind. Callers install
``signals.raise_on_terminate()`` before creating one. Every folder made here
and not removed yet is listed, so that ``remove_all`` (the CLI's last step)
removes it even if a signal came between its creation and its owner's
``try``.

A folder can also be made *locked* (``check``'s): an ``flock`` on it is
held while the tool uses it. A SIGKILL leaves such a folder behind;
``remove_abandoned`` removes, in the temporary folder, exactly those of its
names (the prefix and ``mkdtemp``'s 8 characters) that are this user's real
folders, older than a minute, holding nothing but what ``check`` puts there,
whose lock no process holds. And a folder is never made inside ``outside``
(the installed package) or the site-packages folder that holds it, also
seen through a bind mount (``protected``): a ``TMPDIR`` there is refused,
before anything is written. The temporary folder is found as ``tempfile``
finds it (``TMPDIR``, ``TEMP``, ``TMP``, the system's, the current folder)
but without its probe, which creates and removes a file in each candidate,
and the folder is then made there explicitly.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

try:
    import fcntl
except ImportError:  # Windows: no locked folders, none removed
    fcntl = None  # type: ignore[assignment]

from executorch_device_guard import protected
from executorch_device_guard.errors import GuardError
from executorch_device_guard.signals import Interrupted

_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP")
    if hasattr(signal, name)
]
# The locked folders that ``check`` makes, by name prefix (then ``mkdtemp``'s
# 8 characters), and what each may hold: the series its patched side is
# served (the project's tests), its children's case folders and its warm
# parents' folders; before the import hook, also a stock and a patched tree
# of links into the installed ExecuTorch. ``check`` removes what a SIGKILL
# left of them (``remove_abandoned``; links are removed, never followed).
CHECK = "device-guard-"
_CONTENTS = re.compile(r"series|cases|warm-[a-z0-9_]{8}|stock|patched")
# What ``probe`` writes: a temporary folder with less room than this is
# refused up front (a CPU export's program alone takes more).
_PROBE_BYTES = 64 << 10
_live: Set[Path] = set()
_locks: Dict[Path, int] = {}
# A folder younger than this may not hold its lock yet.
_SETTLED = 60.0


class Held:
    """The signals that arrived inside ``holding()``, in order."""

    def __init__(self) -> None:
        self.signals: List[int] = []

    def raise_first(self) -> None:
        if not self.signals:
            return
        signum = self.signals[0]
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signum)


@contextlib.contextmanager
def holding() -> Iterator[Held]:
    """Inside, SIGINT, SIGTERM and SIGHUP are only recorded (main thread only;
    elsewhere this does nothing): the block is never cut short by them."""
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    try:
        for signum in _SIGNALS:
            previous[signum] = signal.signal(
                signum, lambda n, _frame: held.signals.append(n)
            )
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _candidates() -> List[str]:
    """The folders that ``tempfile.gettempdir()`` tries, in its order:
    ``TMPDIR``, ``TEMP``, ``TMP``, the system's, the current folder."""
    listed = getattr(tempfile, "_candidate_tempdir_list", None)
    if listed is not None:
        return list(listed())
    names = [os.environ.get(n) for n in ("TMPDIR", "TEMP", "TMP")]
    return [n for n in names if n] + ["/tmp", "/var/tmp", "/usr/tmp", os.getcwd()]


def _inside_error(root: str, where: str) -> GuardError:
    return GuardError(
        f"the temporary folder {root} is inside {where}, where nothing is "
        "written: set TMPDIR to a folder outside it. Nothing was run."
    )


def _choose(outside: Optional[Path]) -> str:
    """The folder that ``tempfile.gettempdir()`` would pick, found without
    writing anything: it finds its folder by creating and removing a file in
    each candidate until one works, which would change the modification
    time of a folder inside ``outside`` before it could be refused. A
    candidate inside ``outside`` that it would try first is refused here;
    the first existing folder this user may write to is taken."""
    if tempfile.tempdir is not None:  # set by the program, or already probed
        return os.fsdecode(tempfile.tempdir)
    tried = []
    for candidate in _candidates():
        # tempfile keeps "." as it is; here it is the current folder's path,
        # which stays right for a command that changes its folder.
        candidate = os.path.abspath(candidate)
        tried.append(candidate)
        if not os.path.isdir(candidate):
            continue  # tempfile's try there fails without writing
        where = protected.inside(candidate, outside) if outside else None
        if where is not None:
            raise _inside_error(candidate, where)
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    raise GuardError(
        f"no usable temporary folder (tried {', '.join(tried)}): set TMPDIR "
        "to a folder you can write to. Nothing was run."
    )


def temp_root(outside: Optional[Path] = None) -> str:
    """The temporary folder (the one ``tempfile`` would use), refused if it
    is inside ``outside``; nothing is written to find it."""
    root = _choose(outside)
    where = protected.inside(root, outside) if outside is not None else None
    if where is not None:
        raise _inside_error(root, where)
    return root


@contextlib.contextmanager
def writing(folder: Path) -> Iterator[None]:
    """Turns a failed write under ``folder``, made by ``make`` (a full
    disk, a quota), into one line naming the temporary folder that holds it
    and the way out (GuardError); ``folder`` is removed by its owner."""
    try:
        yield
    except OSError as e:
        raise GuardError(
            f"Cannot write into the temporary folder {folder.parent} "
            f"({e.strerror or e}): free space there, or set TMPDIR to another "
            "folder. Nothing was run."
        ) from e


def probe(folder: Path) -> None:
    """Writes and removes a small file in ``folder``: an ``OSError`` (a full
    disk) comes now, inside ``writing``, not from the exports."""
    path = folder / ".probe"
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * _PROBE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def make(prefix: str, outside: Optional[Path] = None, locked: bool = False) -> Path:
    """A new temporary folder (not inside ``outside``; ``locked``: held with
    an ``flock`` while it is used); a signal during its creation removes it
    again."""
    root = temp_root(outside)
    with holding() as held:
        try:
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        except OSError as e:
            raise GuardError(
                f"Cannot make a folder in the temporary folder {root} "
                f"({e.strerror or e}): free space there, or set TMPDIR to "
                "another folder you can write to. Nothing was run."
            ) from e
        _live.add(path)
        if locked and fcntl is not None:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            _locks[path] = fd
            fcntl.flock(fd, fcntl.LOCK_EX)
    if held.signals:
        remove(path)
        held.raise_first()
    return path


def remove(path: Path) -> None:
    """Removes ``path`` entirely; a signal meanwhile is raised once it is gone."""
    with holding() as held:
        shutil.rmtree(path, ignore_errors=True)
        _live.discard(path)
        _unlock(path)
    held.raise_first()


def remove_all() -> None:
    """Removes every folder ``make`` made that is still there."""
    with holding():
        for path in list(_live):
            shutil.rmtree(path, ignore_errors=True)
            _live.discard(path)
            _unlock(path)


def _unlock(path: Path) -> None:
    fd = _locks.pop(path, None)
    if fd is not None:
        os.close(fd)


def remove_abandoned(outside: Optional[Path] = None) -> List[Path]:
    """Removes the locked folders of ``check`` that a SIGKILL left in the
    temporary folder (refused, as for ``make``, if it is inside
    ``outside``): this user's real folders, named as they name theirs,
    settled, holding only what they put there, whose lock no process holds.
    Returns them."""
    if fcntl is None or not hasattr(os, "geteuid"):
        return []
    root = temp_root(outside)
    name = re.compile(re.escape(CHECK) + r"[a-z0-9_]{8}")
    removed = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return []
    for entry in entries:
        if not name.fullmatch(entry):
            continue
        path = Path(root) / entry
        try:
            st = os.lstat(path)
            if (
                not stat.S_ISDIR(st.st_mode)
                or st.st_uid != os.geteuid()
                or time.time() - st.st_mtime < _SETTLED
            ):
                continue
            flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
                continue
            if not all(_CONTENTS.fullmatch(n) for n in os.listdir(fd)):
                continue  # not a folder that the tool made
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            with holding() as held:
                shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            held.raise_first()
        finally:
            os.close(fd)
    return removed
