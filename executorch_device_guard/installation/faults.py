# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A test hook at every step that writes to the installed package, and at
each log that ``check --log-dir`` writes.

``EXECUTORCH_DEVICE_GUARD_TEST_FAULT`` is unset in normal use, and then
``step()`` does nothing. ``apply`` and ``revert`` call ``check()`` first, so
any other value is refused in one line before anything is written. The
tests set it to:

* ``step:N:SIGNAL``: at the N-th write step (1-based), send this process
  SIGINT, SIGTERM or SIGKILL (``INT``, ``TERM``, ``KILL``);
* ``step:N:error``: at the N-th write step (or log), fail as a full disk would;
* ``delay:SECONDS``: sleep at every write step, to widen races.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from typing import Optional, Tuple

from executorch_device_guard.errors import GuardError

VARIABLE = "EXECUTORCH_DEVICE_GUARD_TEST_FAULT"
_ACTIONS = ("INT", "TERM", "KILL", "error")

_count = 0


def _parse(spec: str) -> Tuple[str, float, str]:
    """``(kind, number, action)``; raises GuardError for anything else."""
    kind, _, rest = spec.partition(":")
    try:
        if kind == "delay":
            seconds = float(rest)
            if seconds >= 0:
                return kind, seconds, ""
        elif kind == "step":
            number, _, action = rest.partition(":")
            if number.isdigit() and int(number) > 0 and action in _ACTIONS:
                return kind, int(number), action
    except ValueError:
        pass
    raise GuardError(
        f"{VARIABLE}={spec!r} is not a test fault (step:N:INT|TERM|KILL|error "
        "or delay:SECONDS); it is for this tool's tests only: unset it. "
        "Nothing was changed."
    )


def check() -> None:
    """Refuses a malformed value before anything is written."""
    spec = os.environ.get(VARIABLE)
    if spec:
        _parse(spec)


def step() -> None:
    """Called before and after each change to the package's files."""
    global _count
    spec: Optional[str] = os.environ.get(VARIABLE)
    if not spec:
        return
    _count += 1
    kind, number, action = _parse(spec)
    if kind == "delay":
        time.sleep(number)
        return
    if number != _count:
        return
    if action == "error":
        raise OSError(errno.ENOSPC, "No space left on device (test fault)")
    os.kill(os.getpid(), getattr(signal, "SIG" + action))
