# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

from pathlib import Path
from typing import Iterator

import pytest

from executorch_device_guard.check.runner import Emitters

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def emitters() -> Iterator[Emitters]:
    """Stock and patched overlays of the installed ExecuTorch (left untouched)."""
    # The upstream series, whose tests run against it (test_failing_first).
    with Emitters(REPO, upstream=True) as e:
        yield e
