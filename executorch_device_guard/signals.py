# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Interrupts between whole files, never inside one.

``apply`` and ``revert`` turn SIGTERM and SIGHUP into an ``Interrupted``
exception, as Python already does for SIGINT, and block all three while one
file is being replaced (POSIX). A signal that arrives then is delivered as
soon as that file is whole. SIGKILL cannot be blocked: it can leave a
temporary file, which the next run removes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterable, Iterator

_NAMES = ("SIGINT", "SIGTERM", "SIGHUP")
_SIGNALS = {getattr(signal, name) for name in _NAMES if hasattr(signal, name)}
# The other asynchronous signals whose default action ends a process (SIGPIPE
# aside: Python ignores it), for commands that must clean up after any of them.
OTHERS = [
    getattr(signal, name)
    for name in ("SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(signal, name)
]


class Interrupted(BaseException):
    """A terminating signal other than SIGINT arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def raise_on_terminate(more: Iterable[int] = ()) -> None:
    """SIGTERM and SIGHUP (and the signals in ``more``) raise ``Interrupted``
    so that cleanups run."""
    for sig in (_SIGNALS | set(more)) - {signal.SIGINT}:
        signal.signal(sig, _raise)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block ends (where the OS allows)."""
    if not hasattr(signal, "pthread_sigmask") or (
        threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
