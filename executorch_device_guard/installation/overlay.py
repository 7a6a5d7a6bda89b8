# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A patched view of the installed ExecuTorch, without touching it.

The overlay is a folder holding an ``executorch`` package made of symbolic
links to the installed one, except for the target files, which are real
files (stock or patched), and the folders that hold them. Putting the overlay
first on ``PYTHONPATH`` gives a child process the patched ExecuTorch while the
parent and the installation stay stock.

The target files are read the way ``status`` and ``apply`` read them
(``installed.survey``: never through a symbolic link, never blocking on a
FIFO, any bytes), and the overlay is refused for exactly what ``apply``
refuses: a target that is neither stock nor patched, or missing. A target
that the release does not ship (not in its RECORD) is linked as it is, like
any other file.

Python run with an overlay must not cache bytecode: a module imported through
a linked folder would have its ``__pycache__`` written into the installed
package. ``NO_BYTECODE`` is what ``check`` puts in the environment for that
(``run`` too, as it always has). ``inspect_targets`` is the survey that
``run`` and ``check`` refuse on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional

from executorch_device_guard.installation import installed as _installed, lock
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installation.installed import FileState, Inspection
from executorch_device_guard.patchset import FilePatch

# Set for every Python process that runs with an overlay.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def inspect_targets(
    installed: Path,
    targets: Dict[str, List[FilePatch]],
    wait: float = lock.DEFAULT_WAIT,
) -> Dict[str, Inspection]:
    """Each target's state and bytes; GuardError unless every one is stock,
    patched or left alone on this release."""
    survey = _installed.survey(installed, targets, wait=wait)
    if survey.shadowed():
        raise GuardError(
            f"{survey.shadowed()}: the fix would not be used. Nothing was run. "
            "Remove that file, then run the command again."
        )
    found = survey.files
    bad = [
        i.describe(installed / rel)
        for rel, i in found.items()
        if i.state not in (FileState.STOCK, FileState.PATCHED, *_installed.LEFT_ALONE)
    ]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise GuardError(
            f"{bad[0]}{more}: it is neither the stock nor the patched file, so "
            "no overlay can be built from it. Nothing was run. Reinstall "
            f"ExecuTorch: {_installed.reinstall_command()}"
        )
    return found


def build_overlay(
    installed: Path,
    targets: Dict[str, List[FilePatch]],
    dest: Path,
    patched: bool,
    found: Optional[Dict[str, Inspection]] = None,
    support: Optional[Dict[str, str]] = None,
) -> Path:
    """Creates ``dest/executorch``, stock or patched, and returns ``dest``.

    Works from a stock or an already patched installation. ``found`` is
    ``inspect_targets``'s answer, if the caller has it already. ``support``
    (ExecuTorch path -> text) is written as it is, stock or patched: the test
    helpers that the series' tests import.
    """
    if found is None:
        found = inspect_targets(installed, targets)
    files = _files(found, patched)
    files.update(
        {Path(rel): text.encode("utf-8") for rel, text in (support or {}).items()}
    )
    along = {parent for rel in files for parent in rel.parents}
    _link_tree(installed, dest / "executorch", Path("."), along, files)
    return dest


def _files(found: Dict[str, Inspection], patched: bool) -> Dict[Path, bytes]:
    """The overlay's real files: each target's stock or patched bytes."""
    files: Dict[Path, bytes] = {}
    for rel, inspection in found.items():
        if inspection.state in _installed.LEFT_ALONE:
            continue
        is_stock = inspection.state is FileState.STOCK
        patched_data = inspection.other if is_stock else inspection.data
        files[Path(rel)] = patched_data if patched else inspection.stock()
    return files


def _link_tree(
    src: Path, dst: Path, rel: Path, along: set, files: Dict[Path, bytes]
) -> None:
    dst.mkdir(parents=True)
    for entry in os.scandir(src):
        child = rel / entry.name
        if child in files:
            with open(dst / entry.name, "wb") as f:
                f.write(files[child])
        elif child in along:
            if not entry.is_dir(follow_symlinks=False):
                raise GuardError(f"{entry.path} is not a folder; reinstall ExecuTorch.")
            _link_tree(Path(entry.path), dst / entry.name, child, along, files)
        elif entry.name != "__pycache__":
            # The bytecode of the target files' folders is left out: it may
            # be of the other state's source (an unchecked-hash .pyc).
            os.symlink(entry.path, dst / entry.name)
