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
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, Iterator, Optional

from executorch_device_guard.errors import GuardError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# msvcrt locks bytes from the current position; this one is past any real file.
_WINDOWS_OFFSET = 2**31 - 2


@contextlib.contextmanager
def hold(
    folder_fd: Optional[int],
    root: Path,
    waiting: Callable[[], None],
    shared: bool = False,
) -> Iterator[None]:
    """Holds the lock of the package folder ``root``; calls ``waiting`` once if
    another process holds it, then waits.

    ``apply`` and ``revert`` hold it exclusively; ``status`` holds it shared,
    so that it never reports a change in progress as an interrupted one.
    ``folder_fd`` is an open descriptor of ``root`` (None where the OS cannot
    open folders).
    """
    if fcntl is None:  # msvcrt has no shared locks: status waits like apply
        yield from _msvcrt(_anchor(root), waiting)
    elif folder_fd is not None:
        yield from _flock(folder_fd, root, waiting, shared)
    else:
        fd = os.open(root, os.O_RDONLY)
        try:
            yield from _flock(fd, root, waiting, shared)
        finally:
            os.close(fd)


def _anchor(root: Path) -> Path:
    """A file directly in ``root``; the tool's targets are all in subfolders."""
    for name in sorted(os.listdir(root)):
        path = root / name
        if not name.startswith(".") and path.is_file() and not path.is_symlink():
            return path
    raise GuardError(f"{root} holds no file to lock. Reinstall ExecuTorch.")


def _flock(
    fd: int, root: Path, waiting: Callable[[], None], shared: bool
) -> Iterator[None]:
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(fd, mode)
    except OSError as e:
        raise GuardError(
            f"Cannot lock {root} ({e.strerror}), so another apply or "
            "revert could run at the same time. Use a local file system."
        ) from e
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _msvcrt(anchor: Path, waiting: Callable[[], None]) -> Iterator[None]:
    import msvcrt  # type: ignore[import-not-found]

    fd = os.open(anchor, os.O_RDONLY)
    try:
        os.lseek(fd, _WINDOWS_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            waiting()
            while True:  # LK_LOCK gives up after 10 tries; keep waiting.
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    pass
        try:
            yield
        finally:
            os.lseek(fd, _WINDOWS_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    finally:
        os.close(fd)
