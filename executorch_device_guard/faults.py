# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A test hook at every step that writes to the installed package.

``EXECUTORCH_DEVICE_GUARD_TEST_FAULT`` is unset in normal use, and then
``step()`` does nothing. The tests set it to:

* ``step:N:SIGNAL``: at the N-th write step (1-based), send this process
  SIGINT, SIGTERM or SIGKILL (``INT``, ``TERM``, ``KILL``);
* ``step:N:error``: at the N-th write step, fail as a full disk would;
* ``delay:SECONDS``: sleep at every write step, to widen races.
"""

from __future__ import annotations

import errno
import os
import signal
import time

VARIABLE = "EXECUTORCH_DEVICE_GUARD_TEST_FAULT"

_count = 0


def step() -> None:
    """Called before and after each change to the package's files."""
    global _count
    spec = os.environ.get(VARIABLE)
    if not spec:
        return
    _count += 1
    kind, _, rest = spec.partition(":")
    if kind == "delay":
        time.sleep(float(rest))
        return
    if kind != "step":
        return
    number, _, action = rest.partition(":")
    if int(number) != _count:
        return
    if action == "error":
        raise OSError(errno.ENOSPC, "No space left on device (test fault)")
    os.kill(os.getpid(), getattr(signal, "SIG" + action))
