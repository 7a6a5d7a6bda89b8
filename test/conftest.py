# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

import signal
from pathlib import Path
from typing import Iterator

import pytest

from executorch_device_guard.check.jobs import cores
from executorch_device_guard.check.runner import Emitters

REPO = Path(__file__).resolve().parent.parent

# Started in the background by a shell without job control (`nohup pytest &`
# in a script), the suite ignores SIGINT and SIGQUIT, and so would every
# process it starts: its tests of Ctrl-C need them as a terminal leaves them.
for _signum in (signal.SIGINT, signal.SIGQUIT):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, signal.SIG_DFL)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per two cores, at least two. Most tests wait on
    child processes, so two workers overlap well even on two cores; each
    ``check`` that a test runs exports on every core itself, which more
    workers would starve."""
    return max(2, cores() // 2)


@pytest.fixture(scope="session")
def emitters() -> Iterator[Emitters]:
    """The installed ExecuTorch (left untouched), stock and with the fix."""
    # The upstream series, whose tests run against it (test_failing_first).
    with Emitters(REPO, upstream=True) as e:
        yield e
