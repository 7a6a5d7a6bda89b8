# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The folders where only ``apply`` and ``revert`` write: the installed
ExecuTorch package, and the site-packages folder that holds it (its
dist-info, the other packages).

``run`` and ``check`` make their temporary folders in ``TMPDIR``, and
``check`` writes its logs into ``--log-dir``: neither may lie anywhere in
these. A folder is inside one when its path, links resolved, is; or when a
folder on its way is one of them seen under another path, a bind mount
(``mount --bind .../executorch/exir /tmp/x``): such a folder has the same
device and inode (``st_dev``, ``st_ino``) as the one it shows. Compared so
are site-packages, each folder directly in it (the dist-info, any
package), and every folder of the ExecuTorch package. A bind mount of a
folder deeper inside another package is not recognised.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Dict, Optional, Set, Tuple

_Identity = Tuple[int, int]


def inside(folder: str, package: Path) -> Optional[str]:
    """Where ``folder`` lies, if in a protected folder of the ExecuTorch
    package ``package``, in words ("the installed ExecuTorch at P", ...);
    None when it is outside them. ``folder`` need not exist yet."""
    real = os.path.realpath(folder)
    site = package.parent
    for top, said in (
        (package, f"the installed ExecuTorch at {package}"),
        (site, f"{site}, the folder that holds the installed ExecuTorch"),
    ):
        top_real = os.path.realpath(top)
        if os.path.commonpath([real, top_real]) == top_real:
            return said
    devices = _devices(str(package))
    path = real
    while True:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and st.st_dev in devices:
            known = _identities(str(package)).get((st.st_dev, st.st_ino))
            if known is not None:
                return f"{known} (seen as {path}: a bind mount)"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _devices(package: str) -> Set[int]:
    found = set()
    for path in (package, os.path.dirname(package)):
        try:
            found.add(os.stat(path).st_dev)
        except OSError:
            pass
    return found


@functools.lru_cache(maxsize=None)
def _identities(package: str) -> Dict[_Identity, str]:
    """(st_dev, st_ino) -> the folder, in words: site-packages, each folder
    directly in it, every folder of the package (links not followed)."""
    found: Dict[_Identity, str] = {}

    def add(path: str, said: str) -> None:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return
        found.setdefault((st.st_dev, st.st_ino), said)

    for folder, _, _ in os.walk(package):
        add(folder, f"{folder}, in the installed ExecuTorch")
    site = os.path.dirname(package)
    add(site, f"{site}, the folder that holds the installed ExecuTorch")
    try:
        with os.scandir(site) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    add(entry.path, f"{entry.path}, in {site}")
    except OSError:
        pass
    return found
