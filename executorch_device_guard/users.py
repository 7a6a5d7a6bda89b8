# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which live processes still use a temporary folder of the tool's.

``check`` gives the processes it starts an overlay's path on
``PYTHONPATH``, and every process those start inherits it: a background
worker, a daemon that closed its descriptors and left the session, a child
of ``subprocess`` (whose ``close_fds`` drops any descriptor, a lock
included). So a process whose environment names the folder may import from
it at any time, and the folder must stay while one lives. On Linux the
environment a process started with is ``/proc/PID/environ``; another user's
process, whose environment cannot be read, is not seen (nor is any process
where there is no ``/proc``: there, ``of`` finds nobody).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

# What may follow the folder's path in an environment: a path inside it, the
# next entry of PYTHONPATH, or the end of the variable.
_AFTER = (b"/", b"\0", os.pathsep.encode())


def of(folder: Path) -> List[int]:
    """The live processes, other than this one, whose environment names
    ``folder`` (or a path inside it), by process id."""
    needle = os.fsencode(str(folder))
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # ended meanwhile, or another user's
            continue
        start = environ.find(needle)
        while start != -1:
            end = start + len(needle)
            if environ[end : end + 1] in _AFTER:
                found.append(int(entry))
                break
            start = environ.find(needle, end)
    return sorted(found)
