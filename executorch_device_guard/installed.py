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
Where an older release's stock file differs from main's around a hunk, the
file has a backport form too (``patchset.read_backports``): the same added
and removed lines, with the context of that release. A file is classified
against every form it has and takes the one that fits, which ``status``
names; one that fits several forms differently is unknown. A target that the
distribution's RECORD does not list is *not shipped* by this release (the MPS
backend in 1.5.x): it is left alone, never written, even if a file is there.
One that is there while the RECORD lists other files of its folder is
unknown: that RECORD is wrong.
``apply`` replaces each stock file by its patched text, ``revert`` each
patched file by its stock text (the strict reverse of the same hunks), one
file at a time, atomically, under a lock (``lock``), inside the package only
(``confined``). Neither writes anything when a file is unknown or missing.
Just before a file's rename its cached bytecode is removed: Python would keep
running an unchecked-hash ``.pyc`` of the old text (``bytecode``). Such stale
bytecode of the other targets is removed too, and ``status`` flags it.

An interrupted run leaves every file whole, stock or patched: ``status`` says
which, and the next ``apply`` or ``revert`` completes, whichever was
interrupted. Temporary files that a SIGKILL left, and the
``.device_guard.json`` state file of earlier versions, are removed by the
next ``apply`` or ``revert`` and never read.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import enum
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Tuple

from executorch_device_guard import bytecode, faults, lock
from executorch_device_guard.confined import Package, Unsafe
from executorch_device_guard.errors import GuardError
from executorch_device_guard.patchset import (
    apply_all,
    BACKPORT,
    FilePatch,
    Form,
    forms as forms_of,
    missing_hunks,
    PatchError,
    UPSTREAM,
)

__all__ = [
    "FileState",
    "GuardError",
    "apply",
    "classify",
    "executorch_root",
    "executorch_version",
    "form",
    "read_text",
    "revert",
    "shipped",
    "status",
    "survey",
]

# Written by earlier versions; never read now, only removed.
LEGACY_STATE = ".device_guard.json"

# The top-level folders of the targets: each must be imported from the root.
_TOP_LEVEL = ("exir", "devtools", "backends", "extension", "runtime")


class FileState(enum.Enum):
    STOCK = "stock"
    PATCHED = "patched"
    UNKNOWN = "unknown"
    MISSING = "missing"
    NOT_SHIPPED = "not shipped"
    NOT_FOR_RELEASE = "not for this release"


# The states whose files apply, revert and the overlays leave alone.
LEFT_ALONE = (FileState.NOT_SHIPPED, FileState.NOT_FOR_RELEASE)


def _search_path() -> List[str]:
    """``sys.path`` without the current folder that ``python -m`` or ``-c``
    puts first: a package or dist-info there is not the interpreter's
    installation. (A console script's first entry is its bin folder.)"""
    path = list(sys.path)
    if path and not getattr(sys.flags, "safe_path", False):
        try:
            here = os.path.realpath(os.getcwd())
        except OSError:
            here = None
        if path[0] == "" or os.path.realpath(path[0]) == here:
            del path[0]
    return path


def _distribution() -> Optional[importlib.metadata.Distribution]:
    """The installed ``executorch`` distribution, found on ``_search_path``."""
    found = importlib.metadata.distributions(name="executorch", path=_search_path())
    return next(iter(found), None)


def _files(dist: importlib.metadata.Distribution) -> Optional[list]:
    """The files that the distribution's RECORD lists (None without one);
    GuardError when it cannot be read."""
    try:
        return dist.files
    except (UnicodeDecodeError, ValueError, csv.Error) as e:
        where = next(
            (str(p) for p in getattr(dist, "_path", Path()).glob("RECORD")), "RECORD"
        )
        raise GuardError(
            f"{where} cannot be read ({e.__class__.__name__}: {e}), so which files "
            f"this ExecuTorch ships is unknown. Nothing was changed. Reinstall it: "
            f"{reinstall_command()}"
        ) from e


def executorch_version() -> Optional[str]:
    dist = _distribution()
    return dist.version if dist is not None else None


def reinstall_command() -> str:
    version = executorch_version()
    pin = f"executorch=={version}" if version else "executorch"
    return f"{sys.executable} -m pip install --force-reinstall --no-deps {pin}"


def executorch_root() -> Path:
    """The package folder of the interpreter's installed ``executorch`` distribution.

    The distribution is looked up without the current folder that ``python
    -m`` puts first on ``sys.path`` (``_search_path``), and the command refuses
    when ``import executorch`` would load another folder, e.g. an
    ``executorch/`` there, with or without a dist-info beside it.
    """
    dist = _distribution()
    if dist is None:
        raise GuardError(
            f"ExecuTorch is not installed in this environment ({sys.executable} "
            "has no 'executorch' distribution). Install it, or run the tool "
            "with the Python of the environment that has it."
        )
    root = Path(dist.locate_file("executorch"))
    files = _files(dist)
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


def _classify_one(text: str, patches: List[FilePatch]) -> Tuple[FileState, str, bool]:
    """The state of a file's text under one form, the text of the other state,
    and whether the text holds both the stock and the patched code."""

    def attempt(source: str, reverse: bool) -> Optional[str]:
        try:
            return apply_all(patches, source, reverse=reverse)
        except PatchError:
            return None

    forward, backward = attempt(text, False), attempt(text, True)
    if forward is not None and backward is not None:
        return FileState.UNKNOWN, "", True
    if forward is not None and attempt(forward, True) == text:
        return FileState.STOCK, forward, False
    if backward is not None and attempt(backward, False) == text:
        return FileState.PATCHED, backward, False
    return FileState.UNKNOWN, "", False


def _classify(text: str, forms: Tuple[Form, ...]) -> Tuple[FileState, str, str, str]:
    """The state of a file's text, the text of the other state, a reason (when
    unknown) and the name of the form that fits."""
    fits: List[Tuple[FileState, str, str]] = []
    both = False
    for form in forms:
        state, other, mixed = _classify_one(text, list(form.patches))
        both |= mixed
        if state is not FileState.UNKNOWN:
            fits.append((state, other, form.name))
    if both:
        # Under one form it is both stock and patched: never guess.
        return (
            FileState.UNKNOWN,
            "",
            "it holds both the stock and the patched code",
            "",
        )
    if len({(state, other) for state, other, _ in fits}) > 1:
        names = ", ".join(name for _, _, name in fits)
        return FileState.UNKNOWN, "", f"it fits more than one form ({names})", ""
    if fits:
        state, other, name = fits[0]
        return state, other, "", name
    return FileState.UNKNOWN, "", _why_unknown(text, forms), ""


def _why_unknown(text: str, forms: Tuple[Form, ...]) -> str:
    """Which text a file that is neither stock nor patched is closest to,
    and where it departs from it."""
    crlf = "\r\n" in text
    if crlf:
        state, _, _, _ = _classify(text.replace("\r\n", "\n"), forms)
        if state in (FileState.STOCK, FileState.PATCHED):
            return f"its line endings are CRLF; with LF it is the {state.value} text"
    candidates = []
    for form in forms:
        patches = list(form.patches)
        stock = missing_hunks(patches, text)
        patched = missing_hunks(patches, text, True)
        for missing, reverse in ((stock, False), (patched, True)):
            candidates.append((len(missing), reverse, missing, form.name))
    # Fewest hunks missing; on a tie the stock text, of the earliest form.
    _, reverse, missing, name = min(candidates, key=lambda c: (c[0], c[1]))
    closest = "patched" if reverse else "stock"
    why = f"edited: differs from the {closest} text"
    if name not in (UPSTREAM, BACKPORT):
        why += f" of the {name} form"
    if missing:
        number, hunk = missing[0]
        start = hunk.new_start if reverse else hunk.old_start
        size = len(hunk.new_lines if reverse else hunk.old_lines)
        why += f" in lines {start}-{start + size - 1} (hunk {number})"
    return why + ("; its line endings are CRLF" if crlf else "")


def classify(
    text: Optional[str], patches: List[FilePatch]
) -> Tuple[FileState, Optional[str]]:
    """The state of one file, and its patched text when it is stock."""
    if text is None:
        return FileState.MISSING, None
    state, other, _, _ = _classify(text, forms_of(patches))
    return state, other if state is FileState.STOCK else None


def form(text: str, patches: List[FilePatch]) -> str:
    """The name of the form of the change that fits a stock or patched text
    ("" for any other)."""
    return _classify(text, forms_of(patches))[3]


def read_text(path: Path) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _distribution_of(root: Path) -> Optional[importlib.metadata.Distribution]:
    """The installed distribution, if its package folder is ``root``."""
    dist = _distribution()
    if dist is None or os.path.realpath(
        dist.locate_file("executorch")
    ) != os.path.realpath(root):
        return None
    return dist


def shipped(root: Path) -> Optional[FrozenSet[str]]:
    """The files in the package folder ``root`` (relative to it) that the
    installed distribution's RECORD lists; None where no RECORD describes
    ``root``, and then every target counts as shipped."""
    dist = _distribution_of(root)
    files = _files(dist) if dist is not None else None
    if files is None:
        return None
    return frozenset(
        "/".join(f.parts[1:]) for f in files if f.parts[:1] == ("executorch",)
    )


def release(root: Path) -> Optional[str]:
    """The version of the distribution whose package folder is ``root``."""
    dist = _distribution_of(root)
    return dist.version if dist is not None else None


@dataclasses.dataclass(frozen=True)
class Inspection:
    """One target file: its state, why (when unknown), its bytes, the other
    state's, and the form of the change that fits it."""

    state: FileState
    reason: str = ""
    data: bytes = b""
    other: bytes = b""
    form: str = ""

    def describe(self, path: Path) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"{path} is {self.state.value}{why}"


def inspect(
    package: Package,
    rel: str,
    patches: List[FilePatch],
    listed: Optional[FrozenSet[str]] = None,
    version: Optional[str] = None,
) -> Inspection:
    """One target's state; ``listed``: the files the RECORD lists (``shipped``),
    ``version``: the release's (``release``)."""
    if not patches[0].for_release(version):
        first, last = patches[0].releases or ("", "")
        why = f"its backport is for ExecuTorch {first} to {last}: left alone"
        return Inspection(FileState.NOT_FOR_RELEASE, why)
    if listed is not None and rel not in listed:
        try:
            there = package.read(rel) is not None
        except Unsafe:
            there = True
        folder = rel.rpartition("/")[0] + "/"
        if there and any(f.startswith(folder) for f in listed):
            # Every release that ships a target's folder ships the target.
            why = "this release's RECORD lists its folder but not it"
            return Inspection(FileState.UNKNOWN, why)
        why = "this release's RECORD does not list it: the file there is left alone"
        return Inspection(FileState.NOT_SHIPPED, why if there else "")
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
    state, other, reason, form = _classify(text, forms_of(patches))
    return Inspection(state, reason, data, other.encode("utf-8"), form)


@dataclasses.dataclass(frozen=True)
class Bytecode:
    """A target's cached bytecode: every file, the stale ones among them (see
    ``bytecode.is_stale``), and why an entry in their place cannot be touched."""

    files: Tuple[str, ...] = ()
    stale: Tuple[str, ...] = ()
    unsafe: Tuple[str, ...] = ()


def inspect_bytecode(package: Package, rel: str, source: bytes) -> Bytecode:
    folder, pattern, legacy = bytecode.locations(rel)
    try:
        names = [
            f"{folder}/{n}" for n in package.listing(folder) if pattern.fullmatch(n)
        ]
    except Unsafe as e:
        return Bytecode(unsafe=(str(e),))
    files: List[str] = []
    stale: List[str] = []
    unsafe: List[str] = []
    for path in names + [legacy]:
        try:
            data = package.read(path)
        except Unsafe as e:
            unsafe.append(str(e))
            continue
        if data is None:
            continue
        files.append(path)
        # The legacy file is only loaded when the source is missing.
        if path != legacy and bytecode.is_stale(data, source):
            stale.append(path)
    return Bytecode(tuple(files), tuple(stale), tuple(unsafe))


@dataclasses.dataclass(frozen=True)
class Survey:
    """What ``status`` reports: every target, leftovers, an old state file,
    cached bytecode."""

    root: Path
    files: Dict[str, Inspection]
    leftovers: List[str]
    legacy_state: bool
    bytecode: Dict[str, Bytecode]
    look_alikes: List[str] = dataclasses.field(default_factory=list)

    def count(self, state: FileState) -> int:
        return sum(i.state is state for i in self.files.values())

    def shipped(self) -> int:
        """How many targets this release ships."""
        return len(self.files) - sum(self.count(state) for state in LEFT_ALONE)

    def stale(self) -> List[str]:
        return [path for b in self.bytecode.values() for path in b.stale]

    def unsafe(self) -> List[str]:
        return [why for b in self.bytecode.values() for why in b.unsafe]

    def file_lines(self) -> List[str]:
        """One line per target: its state, and why when it is unknown or
        Python would not run it as it is."""
        lines = []
        width = max((len(i.state.value) for i in self.files.values()), default=0)
        for rel, inspection in self.files.items():
            notes = [f"form: {inspection.form}"] if inspection.form else []
            notes += [inspection.reason] if inspection.reason else []
            found = self.bytecode.get(rel, Bytecode())
            notes += list(found.unsafe)
            notes += [
                f"Python runs other code from its unchecked-hash bytecode {path}"
                for path in found.stale
            ]
            why = f" ({'; '.join(notes)})" if notes else ""
            lines.append(f"  {inspection.state.value:{width}} {rel}{why}")
        return lines

    def summary(self) -> List[str]:
        total, patched = self.shipped(), self.count(FileState.PATCHED)
        unknown = patched + self.count(FileState.STOCK) < total
        if unknown:
            lines = [
                "Some files are neither stock nor patched, so apply and revert "
                f"refuse. To recover, reinstall ExecuTorch: {reinstall_command()}"
            ]
        else:
            if patched == total:
                state, then = "Patched.", "`revert` restores the stock files."
            elif patched == 0:
                state, then = "Stock.", "`apply` patches it."
            else:
                state, then = (
                    f"Partly patched ({patched} of {total} files), as an "
                    "interrupted run leaves it:",
                    "`apply` finishes it, `revert` undoes it.",
                )
            if self.unsafe():
                # What the files' state allows, once the entry is gone.
                state = (
                    f"{state[:-1]}, but apply and revert refuse: "
                    f"{self.unsafe()[0]}, where a module's cached bytecode "
                    "belongs. Remove it, then"
                )
            lines = [f"{state} {then}"]
        if self.leftovers:
            lines.append(
                f"{len(self.leftovers)} temporary file(s) left by an interrupted "
                "run; the next `apply` or `revert` removes them."
            )
        if self.look_alikes:
            lines.append(
                f"{len(self.look_alikes)} file(s) named like temporary files of "
                "an earlier version hold something else, so apply and revert leave "
                f"them alone (e.g. {self.root / self.look_alikes[0]})."
            )
        if self.legacy_state:
            lines.append(
                f"{LEGACY_STATE} (from an earlier version) is ignored; the next "
                "`apply` or `revert` removes it."
            )
        if self.stale():
            lines.append(
                f"{len(self.stale())} file(s) of unchecked-hash bytecode do not "
                "match their source, so Python runs their old code instead; the "
                "next `apply` or `revert` removes them."
            )
        if self.unsafe() and unknown:
            lines.append(
                f"{self.unsafe()[0]}: where a module's cached bytecode belongs, "
                "so apply and revert refuse. Remove it."
            )
        return lines


def _survey(
    package: Package,
    targets: Dict[str, List[FilePatch]],
    listed: Optional[FrozenSet[str]],
    version: Optional[str] = None,
) -> Survey:
    files = {
        rel: inspect(package, rel, patches, listed, version)
        for rel, patches in targets.items()
    }
    legacy = package.is_file(LEGACY_STATE)
    cached = {
        rel: inspect_bytecode(package, rel, i.data)
        for rel, i in files.items()
        if i.state in (FileState.STOCK, FileState.PATCHED)
    }
    leftovers, look_alikes = _leftovers(package, files)
    return Survey(package.root, files, leftovers, legacy, cached, look_alikes)


def _leftovers(
    package: Package, files: Dict[str, Inspection]
) -> Tuple[List[str], List[str]]:
    """Temporary files that earlier runs left, and files of other people
    that only look like those of an earlier version.

    Earlier versions named their temporary files as ``tempfile.mkstemp``
    names any file, ``.NAME.XXXXXXXX.tmp``, so a user's
    ``._emitter.py.20261130.tmp`` has such a name too. Such a file held part
    of the text being written, the stock or the patched one, and a probe
    nothing: only a file like that is taken for one of theirs.
    """
    ours: List[str] = []
    others: List[str] = []
    for leftover in package.leftovers(list(files)):
        if leftover.kind == "temp":
            ours.append(leftover.path)
            continue
        try:
            data = package.read(leftover.path)
        except Unsafe:
            continue
        if leftover.kind == "old-probe":
            is_ours = data == b""
        else:
            found = files.get(leftover.target)
            is_ours = bool(data) and (
                found is not None
                and found.state in (FileState.STOCK, FileState.PATCHED)
                and (found.data.startswith(data) or found.other.startswith(data))
            )
        (ours if is_ours else others).append(leftover.path)
    return ours, others


# How many times the package folder may be replaced while a run waits for its
# lock before the run gives up.
_ATTEMPTS = 3


@contextlib.contextmanager
def _locked(
    root: Path, waiting: Callable[[Path], None], shared: bool = False
) -> Iterator[Package]:
    """The package folder at ``root``, opened and locked.

    The lock is taken on the folder opened, so a folder that was moved away
    while the run waited (as a pip reinstall does) would be read or patched
    in its new place; the run starts over on the folder now at ``root``.
    """
    for _ in range(_ATTEMPTS):
        with (
            Package(root) as package,
            lock.hold(package.fd, root, lambda: waiting(root), shared=shared),
        ):
            if not package.moved():
                yield package
                return
    raise GuardError(
        f"{root} was replaced by another folder {_ATTEMPTS} times while this "
        "command waited for it (is ExecuTorch being reinstalled?). Nothing was "
        "changed. Run the command again when that is done."
    )


def survey(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    waiting: Optional[Callable[[Path], None]] = None,
) -> Survey:
    """Reads the state of the installation, writing nothing; waits for a
    running ``apply`` or ``revert`` to finish first (a shared lock)."""
    listed = shipped(root)
    with _locked(root, waiting or _say_waiting, shared=True) as package:
        return _survey(package, targets, listed, release(root))


def status(root: Path, targets: Dict[str, List[FilePatch]]) -> Dict[str, FileState]:
    return {rel: i.state for rel, i in survey(root, targets).files.items()}


@dataclasses.dataclass(frozen=True)
class Change:
    """What ``apply`` or ``revert`` did: files replaced, leftovers removed,
    stale bytecode removed, and the replaced files' bytecode removed."""

    written: List[str]
    removed: List[str]
    stale: List[str] = dataclasses.field(default_factory=list)
    bytecode: List[str] = dataclasses.field(default_factory=list)


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
    faults.check()
    listed = shipped(root)
    with _locked(root, waiting) as package:
        found = _survey(package, targets, listed, release(root))
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
        if found.unsafe():
            raise GuardError(
                f"{found.unsafe()[0]}, where the tool would remove a module's "
                "cached bytecode; it removes only plain files in a real "
                "__pycache__ folder, never a link or anything else. Nothing "
                "was changed. Remove it, then run the command again."
            )
        todo = [rel for rel, i in found.files.items() if i.state is source]
        for rel in todo:
            why = package.foreign(rel)
            if why:
                raise GuardError(
                    f"{why}: replacing it would make it yours. Nothing was "
                    "changed. Run the command as that user, or as root."
                )
        removals = found.leftovers + ([LEGACY_STATE] if found.legacy_state else [])
        # A file to replace loses all its bytecode just before the rename;
        # another loses only what Python would run although it is stale.
        cached = {rel: list(found.bytecode[rel].files) for rel in todo}
        stale = [p for r, b in found.bytecode.items() if r not in todo for p in b.stale]
        for rel in todo + removals + stale + sum(cached.values(), []):
            why = package.unwritable(rel)
            if why:
                raise GuardError(
                    f"Cannot write to {why}. Nothing was changed. Use an "
                    "environment you can write to, e.g. a virtual environment "
                    "you own."
                )
        removed = [rel for rel in removals if package.remove(rel)]
        gone = [rel for rel in stale if package.remove(rel)]
        written: List[str] = []
        for rel in todo:
            inspection = found.files[rel]
            try:
                package.replace(rel, inspection.other, inspection.data, cached[rel])
            except (OSError, Unsafe) as e:
                done = len(written) + found.shipped() - len(todo)
                verb = "patched" if source is FileState.STOCK else "stock"
                raise GuardError(
                    f"Cannot write {root / rel} ({getattr(e, 'strerror', None) or e}). "
                    f"{done} of {found.shipped()} files are now {verb}, each "
                    "file whole: fix the cause, then run `apply` to finish or "
                    "`revert` to undo."
                ) from e
            written.append(rel)
        return Change(written, removed, gone, sum((cached[r] for r in written), []))
