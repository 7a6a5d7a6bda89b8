# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How many exports ``check`` runs at a time by default: one per core, as
many as the memory there is holds.

An export child forked from a warm parent shares the parent's pages until
it writes them; what it adds is its model, the exported programs and, on a
real CUDA row, a CUDA context. ``EXPORT_BYTES`` is a generous allowance for
that (a whole fresh interpreter with torch and ExecuTorch imported holds
well under it); a machine with less memory than that per core runs fewer
exports at a time, and ``--jobs`` overrides it.
"""

from __future__ import annotations

import os
from typing import Optional

EXPORT_BYTES = 2 << 30


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory() -> Optional[int]:
    """MemAvailable of /proc/meminfo in bytes, or None where there is none."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_jobs(cpus: Optional[int] = None, memory: Optional[int] = None) -> int:
    """One export per core, at most one per ``EXPORT_BYTES`` of available
    memory (unknown memory: no bound), at least one."""
    cpus = cores() if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    jobs = cpus if memory is None else min(cpus, memory // EXPORT_BYTES)
    return max(1, jobs)
