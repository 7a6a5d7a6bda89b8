# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A patched view of the installed ExecuTorch, without touching it.

The overlay is a folder holding an ``executorch`` package made of symbolic
links to the installed one, except for the patched files, which are real
files. Putting the overlay first on ``PYTHONPATH`` gives a child process the
patched ExecuTorch while the parent and the installation stay stock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List

from executorch_device_guard.installed import classify, FileState, GuardError, read_text
from executorch_device_guard.patchset import apply_all, FilePatch


def build_overlay(
    installed: Path,
    targets: Dict[str, List[FilePatch]],
    dest: Path,
    patched: bool,
) -> Path:
    """Creates ``dest/executorch``, stock or patched, and returns ``dest``.

    Works from a stock or an already patched installation.
    """
    files: Dict[Path, str] = {}
    for rel, patches in targets.items():
        text = read_text(installed / rel)
        state, patched_text = classify(text, patches)
        if state is FileState.STOCK:
            assert text is not None and patched_text is not None
            files[Path(rel)] = patched_text if patched else text
        elif state is FileState.PATCHED:
            assert text is not None
            files[Path(rel)] = text if patched else apply_all(patches, text, True)
        else:
            raise GuardError(
                f"{installed / rel} is {state.value}: it is neither the stock "
                "nor the patched file, so no overlay can be built from it."
            )
    along = {parent for rel in files for parent in rel.parents}
    _link_tree(installed, dest / "executorch", Path("."), along, files)
    return dest


def _link_tree(
    src: Path, dst: Path, rel: Path, along: set, patched: Dict[Path, str]
) -> None:
    dst.mkdir(parents=True)
    for entry in os.scandir(src):
        child = rel / entry.name
        if child in patched:
            with open(dst / entry.name, "w", encoding="utf-8", newline="") as f:
                f.write(patched[child])
        elif entry.is_dir() and child in along:
            _link_tree(Path(entry.path), dst / entry.name, child, along, patched)
        elif entry.name != "__pycache__":
            os.symlink(entry.path, dst / entry.name)
