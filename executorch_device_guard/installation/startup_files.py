# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``apply``'s startup files: the fix on at every start of an environment's Python.

``apply`` writes two files into the site-packages folder that holds
ExecuTorch, as an editable install writes its ``.pth``:

* ``executorch_device_guard.pth``: one import line that calls
  ``startup.turn_on`` (Python 3.10 to 3.14). The line is guarded: once the
  tool is gone it does nothing, silently.
* ``executorch_device_guard.start``: the same call as a PEP 829 entry point,
  which Python 3.15 and later run instead (a ``.start`` of the same name
  turns that ``.pth``'s import lines off); 3.10 to 3.14 ignore it.

Python reads them under ``-I`` and ``-E`` too, never under ``-S``. They are
listed in the tool's RECORD before they are written, so ``pip uninstall
executorch-device-guard`` removes them, even after a kill in between; so
does ``pip install -U`` of the tool, which uninstalls the old version: after
an upgrade, ``apply`` again. Each is written whole (``userfiles.replace``),
never through a link planted in its place; the temporary file that a kill
during a write leaves is removed by the next ``apply`` or ``revert``.
``revert`` removes both, then their RECORD lines. Nothing of ExecuTorch's is written.
"""

from __future__ import annotations

import contextlib
import csv
import enum
import importlib.metadata
import io
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

from executorch_device_guard import userfiles
from executorch_device_guard.errors import GuardError

NAME = "executorch_device_guard"
PTH = f"{NAME}.pth"
START = f"{NAME}.start"
PTH_TEXT = (
    "import sys; exec('try: import executorch_device_guard.startup as s\\n"
    "except ImportError as e:\\n"
    " if not str(e.name).startswith(\\'executorch_device_guard\\'): raise\\n"
    "else: s.turn_on()')\n"
)
START_TEXT = "executorch_device_guard.startup:turn_on\n"
TEXTS = {PTH: PTH_TEXT, START: START_TEXT}

# A child of the environment's Python prints where its import hook comes from.
_PROBE = (
    "import sys\n"
    "on = [f for f in sys.meta_path if getattr(f, 'executorch_device_guard_finder', 0)]\n"
    "print(sys.modules[type(on[0]).__module__].__file__ if on else '')\n"
)


class State(enum.Enum):
    ON = "on"
    OFF = "off"
    PARTLY = "partly on"


def site_of(root: Path) -> Optional[Path]:
    """The site-packages folder of this Python that holds ``root``, the
    ExecuTorch package; None where Python reads no ``.pth`` file there
    (``PYTHONPATH``, a ``pip install --target`` folder)."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    parent = os.path.realpath(root.parent)
    for folder in folders:
        if os.path.realpath(folder) == parent:
            return root.parent
    return None


def state(folder: Path) -> State:
    """Whether both files are there with this version's text."""
    found = [_read(folder / name) == text for name, text in TEXTS.items()]
    if all(found):
        return State.ON
    present = [
        (folder / name).exists() or (folder / name).is_symlink() for name in TEXTS
    ]
    return State.PARTLY if any(present) else State.OFF


def files(folder: Path) -> List[Path]:
    return [folder / name for name in TEXTS]


def turn_on(folder: Path) -> None:
    """Writes both files (RECORD first), then asks the environment's Python
    whether it starts with the fix; GuardError where it does not, with both
    files removed again, unless they were there already (apply run twice)."""
    was = state(folder)
    try:
        _remove_leftovers(folder)
        _add_to_record(folder)
        for name in (START, PTH):
            userfiles.replace(folder / name, TEXTS[name].encode())
    except BaseException as e:
        if was is not State.ON:
            with contextlib.suppress(OSError):  # what can be removed is
                turn_off(folder)
        if isinstance(e, OSError):
            raise GuardError(
                f"cannot write {folder / PTH}: {e.strerror or e}. Nothing was changed."
            ) from e
        raise
    found = started_with(folder)
    if found != _ours():
        if was is not State.ON:
            turn_off(folder)
        why = f"it loads {found}" if found else "it did not start the fix"
        raise GuardError(
            f"{sys.executable} does not start this tool from {folder / PTH} "
            f"({why}): install executorch-device-guard in that environment, or "
            "use `executorch-device-guard run -- COMMAND`. Nothing was changed."
        )


def turn_off(folder: Path) -> List[Path]:
    """Removes both files, then their RECORD lines; the files removed."""
    _remove_leftovers(folder)
    removed = []
    for path in files(folder):
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    _remove_from_record(folder)
    return removed


def _remove_leftovers(folder: Path) -> None:
    """The temporary files of a write that a kill cut short
    (``.executorch_device_guard.pth.device-guard.HEX.tmp``)."""
    for name in TEXTS:
        for path in folder.glob(f".{name}.device-guard.*.tmp"):
            if not userfiles.not_a_file(path):
                path.unlink()


def started_with(folder: Path) -> str:
    """The file of the import hook that the environment's Python starts with
    (run as a plain ``python``: no ``PYTHONPATH``, the fix not turned off),
    or ''."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.pop("EXECUTORCH_DEVICE_GUARD", None)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = done.stdout.strip()
    return os.path.realpath(found) if found else ""


def _ours() -> str:
    from executorch_device_guard import finder

    return os.path.realpath(finder.__file__)


def _read(path: Path) -> Optional[str]:
    if userfiles.not_a_file(path):
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _record() -> Optional[Path]:
    """The RECORD of the executorch-device-guard distribution this tool runs
    from; None where it runs from a source tree."""
    try:
        dist = importlib.metadata.distribution("executorch-device-guard")
    except importlib.metadata.PackageNotFoundError:
        return None
    folder = getattr(dist, "_path", None)
    record = Path(folder) / "RECORD" if folder else None
    return record if record is not None and record.is_file() else None


def _rows(record: Path, folder: Path) -> List[str]:
    """RECORD's rows for the two files, as pip writes paths: relative to the
    folder that holds the dist-info."""
    base = record.parent.parent
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for path in files(folder):
        writer.writerow([os.path.relpath(path, base).replace(os.sep, "/"), "", ""])
    return rows.getvalue().splitlines()


def _read_record(record: Path) -> List[str]:
    """RECORD's lines, each with its own line ending (pip writes ``\r\n``)."""
    with open(record, encoding="utf-8", newline="") as f:
        return f.read().splitlines(keepends=True)


def _add_to_record(folder: Path) -> None:
    record = _record()
    if record is None:
        return
    lines = _read_record(record)
    there = {line.rstrip("\r\n") for line in lines}
    missing = [row for row in _rows(record, folder) if row not in there]
    if missing:
        end = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += end
        _rewrite(record, "".join(lines) + "".join(row + end for row in missing))


def _remove_from_record(folder: Path) -> None:
    record = _record()
    if record is None:
        return
    ours = set(_rows(record, folder))
    lines = _read_record(record)
    kept = [line for line in lines if line.rstrip("\r\n") not in ours]
    if len(kept) != len(lines):
        _rewrite(record, "".join(kept))


def _rewrite(record: Path, text: str) -> None:
    mode = os.stat(record).st_mode & 0o7777
    userfiles.replace(record, text.encode("utf-8"))
    os.chmod(record, mode)
