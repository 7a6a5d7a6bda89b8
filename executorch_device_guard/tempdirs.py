# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Temporary folders for the overlays, created and removed whatever signal comes.

``check`` and ``run`` put their overlays in a temporary folder that goes on
``PYTHONPATH``, so its path must not hold ``os.pathsep``: a ``TMPDIR`` such as
``/tmp/a:b`` would split it in two and the child would import the stock
ExecuTorch. Such a ``TMPDIR`` is refused (GuardError).

A SIGINT, SIGTERM or SIGHUP that arrives while a folder is being created or
removed waits until that is done (``holding``) and is then raised as
``KeyboardInterrupt`` or ``signals.Interrupted``, so that the caller's
cleanup runs and no folder is left behind. Callers install
``signals.raise_on_terminate()`` before creating one. Every folder made here
and not removed yet is listed, so that ``remove_all`` (the CLI's last step)
removes it even if a signal came between its creation and its owner's
``try``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterator, List, Set

from executorch_device_guard.errors import GuardError
from executorch_device_guard.signals import Interrupted

_SIGNALS = [
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP")
    if hasattr(signal, name)
]
_live: Set[Path] = set()


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


def temp_root() -> str:
    """The temporary folder, refused if PYTHONPATH cannot hold its path."""
    root = tempfile.gettempdir()
    if os.pathsep in root:
        raise GuardError(
            f"the temporary folder {root} contains {os.pathsep!r}, which splits "
            "a path on PYTHONPATH, so the overlay could not come first: set "
            f"TMPDIR to a folder whose path has no {os.pathsep!r}."
        )
    return root


def make(prefix: str) -> Path:
    """A new temporary folder; a signal during its creation removes it again."""
    root = temp_root()
    with holding() as held:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        _live.add(path)
    if held.signals:
        remove(path)
        held.raise_first()
    return path


def remove(path: Path) -> None:
    """Removes ``path`` entirely; a signal meanwhile is raised once it is gone."""
    with holding() as held:
        shutil.rmtree(path, ignore_errors=True)
        _live.discard(path)
    held.raise_first()


def remove_all() -> None:
    """Removes every folder ``make`` made that is still there."""
    with holding():
        for path in list(_live):
            shutil.rmtree(path, ignore_errors=True)
            _live.discard(path)
