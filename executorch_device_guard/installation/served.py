# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the import hook serves, per target of the series, for the ExecuTorch
installed here: the verdicts that ``status`` prints and that ``apply``,
``run`` and ``check`` refuse on.

Each target is looked up as the hook looks it up (``finder.verdict``), in
the installed package's folder; no module of ExecuTorch is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from executorch_device_guard import data_root, finder, userfiles
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installation import installed
from executorch_device_guard.installation.confined import read_file, Unsafe
from executorch_device_guard.patchset import FileState, patched_files

# Target (``exir/emit/_emitter.py``) -> its state and why.
Found = Dict[str, Tuple[FileState, str]]


def targets(root: Path) -> Found:
    """Every target of the series, in the ExecuTorch package folder ``root``."""
    record = installed.record(root)
    shipped = record.files if record is not None else None
    found = {}
    for rel, patches in patched_files(data_root(), install=True).items():
        seen = finder.verdict(root, rel, patches)
        if seen is None and shipped is not None and rel not in shipped:
            found[rel] = (FileState.NOT_SHIPPED, "")
        elif seen is None:
            # Python finds no module there: none, or a folder, a FIFO, ...
            found[rel] = (FileState.MISSING, userfiles.not_a_file(root / rel) or "")
        elif seen[0] is FileState.PATCHED:
            found[rel] = _holding_the_fix(record, root, rel, *seen[1:])
        else:
            found[rel] = seen[:2]
    return found


def _holding_the_fix(
    record: Optional[installed.Record], root: Path, rel: str, why: str, stock: str
) -> Tuple[FileState, str]:
    """A target that holds the fix: patched in place by an earlier version
    of this tool, or fixed (``installed.holding_the_fix``). A copy that
    Python loads from elsewhere (no ``stock``) is never the installed file."""
    try:
        data = read_file(root / rel) if stock else None
    except Unsafe:  # a link, a FIFO: never what an earlier version wrote
        data = None
    if data is None:
        return FileState.FIXED, why
    state, said = installed.holding_the_fix(record, rel, data, stock.encode("utf-8"))
    return state, said or why


def in_place(found: Found) -> List[str]:
    """The targets whose file holds the fix: an earlier version of this
    tool patched them in place."""
    return [rel for rel, (state, _) in found.items() if state is FileState.PATCHED]


def without_fix(found: Found) -> List[str]:
    """The targets that would load without the fix."""
    lost = (FileState.UNKNOWN, FileState.MISSING)
    return [rel for rel, (state, _) in found.items() if state in lost]


def refuse_in_place(root: Path, found: Found, why: str, outcome: str) -> None:
    """GuardError naming the targets an earlier version of this tool patched
    in place, ``why`` that stops the command (", so ..."), and ``revert``,
    the way out."""
    legacy = in_place(found)
    if legacy:
        more = f" and {len(legacy) - 1} more were" if len(legacy) > 1 else " was"
        raise GuardError(
            f"{root / legacy[0]}{more} patched in place by an earlier version "
            f"of this tool{why}: run `executorch-device-guard revert` first, "
            f"which writes their stock text back. {outcome}"
        )


def refuse_fixed(root: Path, found: Found, why: str, outcome: str) -> None:
    """GuardError naming the first target that holds the fix as it is
    (``FIXED``), ``why`` that stops the command (", so ...")."""
    fixed = [rel for rel, (state, _) in found.items() if state is FileState.FIXED]
    if fixed:
        more = f" (and {len(fixed) - 1} more)" if len(fixed) > 1 else ""
        said = found[fixed[0]][1]
        raise GuardError(
            f"{root / fixed[0]}{more} holds the fix as it is ({said}){why}. "
            f"{outcome}"
        )


def refuse_without_fix(root: Path, found: Found) -> None:
    """GuardError naming the first target that would load without the fix,
    and why (``run`` and ``check``: nothing run)."""
    lost = without_fix(found)
    if lost:
        state, why = found[lost[0]]
        raise GuardError(
            f"{root / lost[0]} is {state.value}{f' ({why})' if why else ''}: it "
            "would load without the fix. Nothing was run. Have Python load the "
            "installed file; if that is damaged, reinstall ExecuTorch: "
            f"{installed.reinstall_command()}"
        )
