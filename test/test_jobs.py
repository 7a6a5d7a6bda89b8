# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How many exports check runs at a time: from the cores and the memory."""

import pytest

from executorch_device_guard.check import jobs

GIB = 1 << 30


@pytest.mark.parametrize(
    "cpus,memory,expected",
    [
        (2, 23 * GIB, 2),  # the 2-core development VM
        (16, 120 * GIB, 16),  # the H200's host: one per core, not 2
        (16, 9 * GIB, 4),  # little memory bounds it
        (4, None, 4),  # memory unknown: the cores
        (8, GIB, 1),  # at least one
    ],
)
def test_one_export_per_core_as_memory_allows(cpus, memory, expected) -> None:
    assert jobs.default_jobs(cpus, memory) == expected


def test_this_machine() -> None:
    assert 1 <= jobs.default_jobs() <= jobs.cores()
    assert jobs.available_memory() is None or jobs.available_memory() > 0
