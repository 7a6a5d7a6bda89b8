# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One ``apply`` or ``revert`` at a time on one installation, writing nothing.

On POSIX the lock is ``flock`` on the package folder's own descriptor: no
lock file exists, so nothing is left behind after a crash or after ``pip
uninstall executorch``, and the kernel drops the lock when the process dies,
even by SIGKILL. Because the lock belongs to the folder opened, not to its
path, ``installed`` checks once it holds the lock that the folder is still
the one at that path. Where there is no ``fcntl`` (Windows), it is a ``msvcrt``
byte-range lock far past the end of a file directly in the package folder,
which the tool never replaces (its targets are all in subfolders); that
likewise writes nothing. The Windows path is untested.

Any process can take an ``flock`` on a folder it can open, even a reader
(another user's ``flock``, a backup tool). So the wait is bounded (``wait``
seconds, ``DEFAULT_WAIT`` unless the command says otherwise), and the process
that holds the lock is named, from ``/proc/locks`` on Linux: another
executorch-device-guard, or process N and its command line, or, where it
cannot be seen (another PID namespace), nobody by name.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from executorch_device_guard.errors import GuardError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# msvcrt locks bytes from the current position; this one is past any real file.
_WINDOWS_OFFSET = 2**31 - 2

# How long a command waits for the lock by default, in seconds.
DEFAULT_WAIT = 30.0
# How often it tries again meanwhile.
_POLL = 0.1


@contextlib.contextmanager
def hold(
    folder_fd: Optional[int],
    root: Path,
    waiting: Callable[[str], None],
    shared: bool = False,
    wait: float = DEFAULT_WAIT,
) -> Iterator[None]:
    """Holds the lock of the package folder ``root``; if another process
    holds it, calls ``waiting`` once with who that is (``holder``), then
    tries again for ``wait`` seconds, and raises GuardError after.

    ``revert`` holds it exclusively while it writes back what an earlier
    version patched in place; ``installed.survey`` holds it shared, so that
    it never reads a change in progress.
    ``folder_fd`` is an open descriptor of ``root`` (None where the OS cannot
    open folders).
    """
    if fcntl is None:  # msvcrt has no shared locks: status waits like apply
        yield from _msvcrt(_anchor(root), root, waiting, wait)
    elif folder_fd is not None:
        yield from _flock(folder_fd, root, waiting, shared, wait)
    else:
        fd = os.open(root, os.O_RDONLY)
        try:
            yield from _flock(fd, root, waiting, shared, wait)
        finally:
            os.close(fd)


def _busy(root: Path, who: str, wait: float) -> GuardError:
    return GuardError(
        f"{root} is locked by {who}, which did not release it within {wait:g} s. "
        "Nothing was changed. Run the command again once that is done (or end "
        "that process); --wait SECONDS waits longer."
    )


def holder(fd: Optional[int]) -> str:
    """Who holds an flock on the file open as ``fd``, in words: "another
    executorch-device-guard (process N)", "process N (COMMAND)", or "a
    process that cannot be named here"."""
    unknown = "a process that cannot be named here"
    if fd is None:
        return unknown
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return unknown
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        words = line.split()
        if "->" in words or len(words) < 6 or words[1] != "FLOCK":
            continue  # a waiter, or another kind of lock
        if words[5] == device or words[5].endswith(f":{st.st_ino}"):
            pids.append((words[5] != device, words[4]))
    for _, pid in sorted(pids):
        if pid.isdigit() and int(pid) > 0 and int(pid) != os.getpid():
            return describe(int(pid))
    return unknown


def describe(pid: int) -> str:
    """Process ``pid`` in words: "another executorch-device-guard (process
    N)", or "process N (COMMAND)", its command line shortened."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return f"process {pid}"
    command = " ".join(" ".join(w.decode(errors="replace").split()) for w in words)
    command = command.strip()
    if "executorch_device_guard" in command or "executorch-device-guard" in command:
        return f"another executorch-device-guard (process {pid})"
    if len(command) > 80:
        command = command[:77] + "..."
    return f"process {pid} ({command})" if command else f"process {pid}"


def _anchor(root: Path) -> Path:
    """A file directly in ``root``; the tool's targets are all in subfolders."""
    for name in sorted(os.listdir(root)):
        path = root / name
        if not name.startswith(".") and path.is_file() and not path.is_symlink():
            return path
    raise GuardError(f"{root} holds no file to lock. Reinstall ExecuTorch.")


def _poll(
    try_lock: Callable[[], None],
    taken: type,
    who: Callable[[], str],
    root: Path,
    waiting: Callable[[str], None],
    wait: float,
) -> None:
    """Tries ``try_lock`` until it does not raise ``taken``; after ``wait``
    seconds, the error that says who holds the lock."""
    deadline = None
    while True:
        try:
            try_lock()
            return
        except taken:
            if deadline is None:
                deadline = time.monotonic() + wait
                waiting(who())
            elif time.monotonic() >= deadline:
                raise _busy(root, who(), wait) from None
            time.sleep(_POLL)


def _flock(
    fd: int,
    root: Path,
    waiting: Callable[[str], None],
    shared: bool,
    wait: float,
) -> Iterator[None]:
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        _poll(
            lambda: fcntl.flock(fd, mode | fcntl.LOCK_NB),
            BlockingIOError,
            lambda: holder(fd),
            root,
            waiting,
            wait,
        )
    except OSError as e:
        raise GuardError(
            f"Cannot lock {root} ({e.strerror}), so another apply or "
            "revert could run at the same time. Use a local file system."
        ) from e
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _msvcrt(
    anchor: Path,
    root: Path,
    waiting: Callable[[str], None],
    wait: float,
) -> Iterator[None]:
    import msvcrt  # type: ignore[import-not-found]

    fd = os.open(anchor, os.O_RDONLY)
    try:
        os.lseek(fd, _WINDOWS_OFFSET, os.SEEK_SET)
        _poll(
            lambda: msvcrt.locking(fd, msvcrt.LK_NBLCK, 1),
            OSError,
            lambda: holder(None),
            root,
            waiting,
            wait,
        )
        try:
            yield
        finally:
            os.lseek(fd, _WINDOWS_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    finally:
        os.close(fd)
