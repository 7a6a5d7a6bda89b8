# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The ExecuTorch installed in this interpreter's environment, and changes to it.

The patch series is the only record: there is no state file. Each target
file's state is read from its bytes: *stock* when the series applies to it
exactly and reverses back to the same bytes, *patched* when the series
reverses exactly and applies back to the same bytes, otherwise *unknown*.
``apply`` replaces each stock file by its patched text, ``revert`` each
patched file by its stock text (the strict reverse of the same hunks), one
file at a time, atomically, under a lock (``lock``), inside the package only
(``confined``). Neither writes anything when a file is unknown or missing.

An interrupted run leaves every file whole, stock or patched: ``status`` says
which, and the next ``apply`` or ``revert`` completes, whichever was
interrupted. Temporary files that a SIGKILL left, and the
``.device_guard.json`` state file of versions up to 0.1.0, are removed by the
next ``apply`` or ``revert`` and never read.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from executorch_device_guard import lock
from executorch_device_guard.confined import Package, Unsafe
from executorch_device_guard.errors import GuardError
from executorch_device_guard.patchset import apply_all, FilePatch, PatchError

__all__ = [
    "FileState",
    "GuardError",
    "apply",
    "classify",
    "executorch_root",
    "executorch_version",
    "read_text",
    "revert",
    "status",
    "survey",
]

# Written by versions up to 0.1.0; never read now, only removed.
LEGACY_STATE = ".device_guard.json"

# The top-level folders of the targets: each must be imported from the root.
_TOP_LEVEL = ("exir", "devtools", "backends")


class FileState(enum.Enum):
    STOCK = "stock"
    PATCHED = "patched"
    UNKNOWN = "unknown"
    MISSING = "missing"


def executorch_version() -> Optional[str]:
    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return None


def reinstall_command() -> str:
    version = executorch_version()
    pin = f"executorch=={version}" if version else "executorch"
    return f"{sys.executable} -m pip install --force-reinstall --no-deps {pin}"


def executorch_root() -> Path:
    """The package folder of the interpreter's installed ``executorch`` distribution.

    Refuses when ``import executorch`` would load another folder, e.g. an
    ``executorch/`` in the current directory, which ``python -m`` puts first.
    """
    try:
        dist = importlib.metadata.distribution("executorch")
    except importlib.metadata.PackageNotFoundError:
        raise GuardError(
            f"ExecuTorch is not installed in this environment ({sys.executable} "
            "has no 'executorch' distribution). Install it, or run the tool "
            "with the Python of the environment that has it."
        ) from None
    root = Path(dist.locate_file("executorch"))
    files = dist.files
    if files is not None and not any(
        f.parts[:1] == ("executorch",) and len(f.parts) > 1 for f in files
    ):
        raise GuardError(
            f"The installed executorch distribution lists no files in {root}: "
            "it is an editable or source install. Patch that source tree with "
            "`git am` instead (see `executorch-device-guard export`)."
        )
    if not (root / "exir").is_dir():
        raise GuardError(
            f"{root} has no exir/ folder, though the executorch distribution "
            f"is installed. Reinstall it: {reinstall_command()}"
        )
    spec = importlib.util.find_spec("executorch")
    locations = list((spec and spec.submodule_search_locations) or [])
    for top in (t for t in _TOP_LEVEL if (root / t).exists()):
        # A namespace portion earlier on sys.path wins, one subpackage at a time.
        first = next((p for p in locations if (Path(p) / top).exists()), None)
        if first is None or os.path.realpath(first) != os.path.realpath(root):
            where = f"{first}/{top}" if first else "nothing"
            raise GuardError(
                f"`import executorch.{top}` here loads {where}, not the "
                f"installed ExecuTorch at {root}: an executorch folder in the "
                "current directory or on PYTHONPATH shadows it. Run the command "
                "from another directory."
            )
    return root


def _classify(text: str, patches: List[FilePatch]) -> Tuple[FileState, str, str]:
    """The state of a file's text, the text of the other state, and a reason."""

    def attempt(source: str, reverse: bool) -> Optional[str]:
        try:
            return apply_all(patches, source, reverse=reverse)
        except PatchError:
            return None

    forward, backward = attempt(text, False), attempt(text, True)
    if forward is not None and backward is not None:
        return FileState.UNKNOWN, "", "it holds both the stock and the patched code"
    if forward is not None and attempt(forward, True) == text:
        return FileState.STOCK, forward, ""
    if backward is not None and attempt(backward, False) == text:
        return FileState.PATCHED, backward, ""
    return FileState.UNKNOWN, "", ""


def classify(
    text: Optional[str], patches: List[FilePatch]
) -> Tuple[FileState, Optional[str]]:
    """The state of one file, and its patched text when it is stock."""
    if text is None:
        return FileState.MISSING, None
    state, other, _ = _classify(text, patches)
    return state, other if state is FileState.STOCK else None


def read_text(path: Path) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None


@dataclasses.dataclass(frozen=True)
class Inspection:
    """One target file: its state, why (when unknown), its bytes, the other state's."""

    state: FileState
    reason: str = ""
    data: bytes = b""
    other: bytes = b""

    def describe(self, path: Path) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"{path} is {self.state.value}{why}"


def inspect(package: Package, rel: str, patches: List[FilePatch]) -> Inspection:
    try:
        data = package.read(rel)
    except Unsafe as e:
        return Inspection(FileState.UNKNOWN, str(e))
    if data is None:
        return Inspection(FileState.MISSING)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Inspection(FileState.UNKNOWN, "not UTF-8 text", data)
    state, other, reason = _classify(text, patches)
    return Inspection(state, reason, data, other.encode("utf-8"))


@dataclasses.dataclass(frozen=True)
class Survey:
    """What ``status`` reports: every target, leftovers, an old state file."""

    root: Path
    files: Dict[str, Inspection]
    leftovers: List[str]
    legacy_state: bool

    def count(self, state: FileState) -> int:
        return sum(i.state is state for i in self.files.values())

    def summary(self) -> List[str]:
        total, patched = len(self.files), self.count(FileState.PATCHED)
        if patched + self.count(FileState.STOCK) < total:
            lines = [
                "Some files are neither stock nor patched, so apply and revert "
                f"refuse. To recover, reinstall ExecuTorch: {reinstall_command()}"
            ]
        elif patched == total:
            lines = ["Patched. `revert` restores the stock files."]
        elif patched == 0:
            lines = ["Stock. `apply` patches it."]
        else:
            lines = [
                f"Partly patched ({patched} of {total} files), as an interrupted "
                "run leaves it: `apply` finishes it, `revert` undoes it."
            ]
        if self.leftovers:
            lines.append(
                f"{len(self.leftovers)} temporary file(s) left by an interrupted "
                "run; the next `apply` or `revert` removes them."
            )
        if self.legacy_state:
            lines.append(
                f"{LEGACY_STATE} (from version 0.1.0) is ignored; the next "
                "`apply` or `revert` removes it."
            )
        return lines


def _survey(package: Package, targets: Dict[str, List[FilePatch]]) -> Survey:
    files = {rel: inspect(package, rel, patches) for rel, patches in targets.items()}
    legacy = package.is_file(LEGACY_STATE)
    return Survey(package.root, files, package.leftovers(list(targets)), legacy)


def survey(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    waiting: Optional[Callable[[Path], None]] = None,
) -> Survey:
    """Reads the state of the installation, writing nothing; waits for a
    running ``apply`` or ``revert`` to finish first (a shared lock)."""
    say = waiting or _say_waiting
    with Package(root) as package, lock.hold(
        package.fd, root, lambda: say(root), shared=True
    ):
        return _survey(package, targets)


def status(root: Path, targets: Dict[str, List[FilePatch]]) -> Dict[str, FileState]:
    return {rel: i.state for rel, i in survey(root, targets).files.items()}


@dataclasses.dataclass(frozen=True)
class Change:
    """What ``apply`` or ``revert`` did: files replaced, leftovers removed."""

    written: List[str]
    removed: List[str]


def _say_waiting(root: Path) -> None:
    print(
        f"waiting for another executorch-device-guard apply or revert on {root} "
        "to finish (Ctrl-C to stop)...",
        file=sys.stderr,
        flush=True,
    )


def apply(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    waiting: Optional[Callable[[Path], None]] = None,
) -> Change:
    """Patches every stock target; ``written`` is empty if all were patched."""
    return _change(root, targets, FileState.STOCK, waiting or _say_waiting)


def revert(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    waiting: Optional[Callable[[Path], None]] = None,
) -> Change:
    """Restores every patched target; ``written`` is empty if all were stock."""
    return _change(root, targets, FileState.PATCHED, waiting or _say_waiting)


def _change(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    source: FileState,
    waiting: Callable[[Path], None],
) -> Change:
    with Package(root) as package, lock.hold(
        package.fd, root, lambda: waiting(root)
    ):
        found = _survey(package, targets)
        bad = [
            i.describe(root / rel)
            for rel, i in found.files.items()
            if i.state in (FileState.UNKNOWN, FileState.MISSING)
        ]
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise GuardError(
                f"{bad[0]}{more}: neither the stock file that the patch series "
                "expects nor the patched one (locally edited, or an ExecuTorch "
                "release the series does not fit). Nothing was changed. To start "
                f"over, reinstall ExecuTorch: {reinstall_command()}"
            )
        todo = [rel for rel, i in found.files.items() if i.state is source]
        removals = found.leftovers + ([LEGACY_STATE] if found.legacy_state else [])
        for rel in todo + removals:
            why = package.unwritable(rel)
            if why:
                raise GuardError(
                    f"Cannot write to {why}. Nothing was changed. Use an "
                    "environment you can write to, e.g. a virtual environment "
                    "you own."
                )
        removed = [rel for rel in removals if package.remove(rel)]
        written: List[str] = []
        for rel in todo:
            inspection = found.files[rel]
            try:
                package.replace(rel, inspection.other, inspection.data)
            except (OSError, Unsafe) as e:
                done = len(written) + len(found.files) - len(todo)
                verb = "patched" if source is FileState.STOCK else "stock"
                raise GuardError(
                    f"Cannot write {root / rel} ({getattr(e, 'strerror', None) or e}). "
                    f"{done} of {len(found.files)} files are now {verb}, each "
                    "file whole: fix the cause, then run `apply` to finish or "
                    "`revert` to undo."
                ) from e
            written.append(rel)
        return Change(written, removed)
