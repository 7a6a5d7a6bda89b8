# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Read the patch series and apply it strictly, in either direction.

The series is the single source of the change: ``apply`` installs it,
``check`` and the tests build a patched emitter from it, and ``export`` turns
it into mbox patches for ``git am``. Hunks must match exactly (no fuzz, no
whitespace tolerance); a hunk may only move, as ``git apply`` allows, and
only where its lines occur once: lines that occur twice (a copy of the code
kept in a dead branch) leave where the hunk goes untold, and the text is
refused (PatchError), never patched at the nearer copy.

Where an older release's stock file differs from main's around a hunk,
``patches/backports`` holds a backport form of that file's change, derived
from the series by scripts/backport.py; ``forms`` gives both.

A target's state is read from its text alone (``judge``): *stock* when a
form of its change applies exactly and reverses back to the same text,
*patched* when it reverses exactly and applies back, otherwise *unknown*,
with where it departs; a backport for other releases leaves it alone. This
module needs only the standard library, so that the import hook can use it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, TYPE_CHECKING

if TYPE_CHECKING:
    import email.message

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(Exception):
    """A patch does not apply to the given text."""


@dataclasses.dataclass(frozen=True)
class Hunk:
    old_start: int
    old_lines: Tuple[str, ...]
    new_lines: Tuple[str, ...]
    new_start: int = 0


@dataclasses.dataclass(frozen=True)
class FilePatch:
    path: str
    hunks: Tuple[Hunk, ...]
    # A backport-only change's releases, (first, last) as "1.0.0"; None for
    # every release that ships the file (see read_series).
    releases: Optional[Tuple[str, str]] = None
    # From patches/backports/series: a change not for upstream.
    backport: bool = False

    def for_release(self, version: Optional[str]) -> bool:
        """Whether this change is for ExecuTorch ``version`` (True when the
        version is unknown or not a release's: the file's text decides)."""
        key = _release_key(version) if version is not None else None
        if self.releases is None or key is None:
            return True
        first, last = (_release_key(v) for v in self.releases)
        return first <= key <= last

    def undecided(self, version: Optional[str]) -> bool:
        """Whether ``version`` is a later release of the line of the last
        release this change is for (1.4.2 after 1.4.1, for 1.0.0-1.4.1): the
        range ends where upstream's fix came, and whether such a patch
        release of an older line carries that fix cannot be told."""
        key = _release_key(version) if version is not None else None
        if self.releases is None or key is None:
            return False
        last = _release_key(self.releases[1])
        return last is not None and key[:2] == last[:2] and key > last

    def apply(self, text: str, reverse: bool = False, at_line: bool = False) -> str:
        """Returns ``text`` with every hunk applied, or raises PatchError.

        A hunk whose lines occur more than once places nothing, unless
        ``at_line`` and they occur where its line number says, which is
        where ``git apply`` puts it: for the series' own test files, which
        ``git am`` applies upstream and ``apply`` never installs (a test
        repeats its code more than a module does)."""
        lines = text.splitlines(keepends=True)
        offset = 0
        for number, hunk in enumerate(self.hunks, 1):
            old, new = hunk.old_lines, hunk.new_lines
            if reverse:
                old, new = new, old
            expected = max(hunk.old_start - 1 + offset, 0)
            places = _places(lines, old)
            direction = "reversed " if reverse else ""
            if not places:
                raise PatchError(
                    f"{self.path}: {direction}hunk {number} does not match "
                    f"(expected near line {expected + 1})"
                )
            if len(places) > 1 and at_line and expected in places:
                places = [expected]
            if len(places) > 1:
                raise PatchError(
                    f"{self.path}: {direction}hunk {number} matches "
                    f"{len(places)} places (lines "
                    f"{', '.join(str(at + 1) for at in places[:3])}), so where it "
                    "goes cannot be told"
                )
            at = places[0]
            lines[at : at + len(old)] = new
            offset += len(new) - len(old) + (at - expected)
        return "".join(lines)


def release_key(version: str) -> Optional[Tuple[int, ...]]:
    """(major, minor, patch) of a version ("1.4.1+cpu": (1, 4, 1)), or None."""
    return _release_key(version)


def _release_key(version: str) -> Optional[Tuple[int, ...]]:
    """(major, minor, patch) of "1.4.1", "1.5.0.dev20260801+cpu" and the
    like; None for anything else."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return tuple(int(part or 0) for part in match.groups()) if match else None


def _places(lines: List[str], block: Tuple[str, ...]) -> List[int]:
    """Every start of ``block`` in ``lines`` (overlapping ones too)."""
    size = len(block)
    if not size:
        return list(range(len(lines) + 1))
    first = block[0]
    return [
        at
        for at in range(len(lines) - size + 1)
        if lines[at] == first and tuple(lines[at : at + size]) == block
    ]


def parse_diff(diff: str) -> List[FilePatch]:
    """Parses the unified diffs of existing files in a ``git diff``."""
    files: List[FilePatch] = []
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        old_name = lines[i][4:].strip()
        new_name = lines[i + 1][4:].strip()
        if old_name == "/dev/null" or new_name == "/dev/null":
            raise PatchError("the series only edits existing files: " + new_name)
        path = new_name[2:] if new_name.startswith("b/") else new_name
        i += 2
        hunks: List[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            match = _HUNK_HEADER.match(lines[i])
            if match is None:
                raise PatchError(f"{path}: bad hunk header {lines[i]!r}")
            old_count = int(match.group(2) or 1)
            new_count = int(match.group(4) or 1)
            old: List[str] = []
            new: List[str] = []
            i += 1
            while len(old) < old_count or len(new) < new_count:
                line = lines[i]
                tag, body = line[0], line[1:]
                if tag in " -":
                    old.append(body)
                if tag in " +":
                    new.append(body)
                if tag not in " -+":
                    raise PatchError(f"{path}: bad hunk line {line!r}")
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):
                    # "\ No newline at end of file" applies to the line before.
                    sides = {"-": (old,), "+": (new,), " ": (old, new)}[tag]
                    for side in sides:
                        side[-1] = side[-1].rstrip("\n")
                    i += 1
            hunks.append(
                Hunk(int(match.group(1)), tuple(old), tuple(new), int(match.group(3)))
            )
        files.append(FilePatch(path, tuple(hunks)))
    return files


@dataclasses.dataclass(frozen=True)
class SeriesEntry:
    """One commit of the upstream change: a patch plus the files it adds; or
    a backport-only change, perhaps for some releases only."""

    patch_path: Path
    new_files: Tuple[str, ...]
    releases: Optional[Tuple[str, str]] = None
    # An upstream fix beside the guard, which apply and run do not install.
    upstream_only: bool = False

    @property
    def message(self) -> email.message.EmailMessage:
        import email.policy  # not at import: the import hook needs no email

        return email.message_from_bytes(
            self.patch_path.read_bytes(), policy=email.policy.default
        )

    @property
    def diff(self) -> str:
        body = self.patch_path.read_text(encoding="utf-8")
        start = body.find("\ndiff --git ")
        if start < 0:
            raise PatchError(f"{self.patch_path.name} holds no diff")
        diff = body[start + 1 :]
        # Drop format-patch's signature ("-- \n2.39.5\n").
        return re.sub(r"\n-- \n[^\n]*\n*\Z", "\n", diff)

    @property
    def file_patches(self) -> List[FilePatch]:
        return [
            dataclasses.replace(
                file_patch,
                releases=self.releases,
                backport=self.patch_path.parent.name == BACKPORTS,
            )
            for file_patch in parse_diff(self.diff)
        ]


def read_series(root: Path, install: bool = False) -> List[SeriesEntry]:
    """The upstream series, ``patches/series``: per line a patch name, the
    new files it adds, and ``upstream-only`` for a fix beside the guard.

    With ``install``, what ``apply`` and ``run`` install instead: the series
    less its ``upstream-only`` commits, then ``patches/backports/series``,
    changes not for upstream (``export`` leaves them out), each a patch name
    and, if it is for those releases only, ``releases=FIRST-LAST``.
    """
    series = _read_list(root / "patches")
    if not install:
        return series
    kept = [entry for entry in series if not entry.upstream_only]
    return kept + _read_list(root / "patches" / BACKPORTS)


def _read_list(folder: Path) -> List[SeriesEntry]:
    entries = []
    path = folder / "series"
    if not path.is_file() and folder.name == BACKPORTS:
        return entries
    for raw in path.read_text(encoding="utf-8").splitlines():
        name, *words = raw.split("#", 1)[0].split() or [""]
        if not name:
            continue
        releases = next((w for w in words if w.startswith("releases=")), None)
        if releases is not None:
            first, _, last = releases[len("releases=") :].partition("-")
        entries.append(
            SeriesEntry(
                folder / name,
                tuple(w for w in words if w != "upstream-only" and w != releases),
                (first, last or first) if releases is not None else None,
                "upstream-only" in words,
            )
        )
    return entries


def is_test(path: str) -> bool:
    """Whether an ExecuTorch path is in a test folder."""
    return any(part in ("test", "tests") for part in path.split("/")[:-1])


def patched_files(
    root: Path, build_files: bool = False, tests: bool = False, install: bool = False
) -> Dict[str, List[FilePatch]]:
    """Each existing ExecuTorch file the series edits, with its patches in order.

    Python source files only, unless ``tests`` (test modules too) or
    ``build_files`` (every file). The build files the series edits (BUCK,
    targets.bzl, pytest.ini) are in ExecuTorch's source tree, never in an
    installed package; test modules are, but the guard does not need them. So
    ``apply``, ``status`` and the import hook take the default: the guarded code,
    as ``install`` reads the series (``read_series``).
    """
    result: Dict[str, List[FilePatch]] = {}
    for entry in read_series(root, install=install):
        for file_patch in entry.file_patches:
            path = file_patch.path
            if build_files or (path.endswith(".py") and (tests or not is_test(path))):
                result.setdefault(path, []).append(file_patch)
    return result


def missing_hunks(
    patches: List[FilePatch], text: str, reverse: bool = False
) -> List[Tuple[int, Hunk]]:
    """The hunks whose stock (``reverse``: patched) lines are nowhere in
    ``text``, each with its number in its file patch."""
    return [(n, h) for n, h, places in _hunk_places(patches, text, reverse) if not places]


def repeated_hunks(
    patches: List[FilePatch], text: str, reverse: bool = False
) -> List[Tuple[int, Hunk, List[int]]]:
    """The hunks whose stock (``reverse``: patched) lines occur more than
    once in ``text``, each with its number and the lines where they start
    (0-based)."""
    return [(n, h, p) for n, h, p in _hunk_places(patches, text, reverse) if len(p) > 1]


def _hunk_places(
    patches: List[FilePatch], text: str, reverse: bool
) -> List[Tuple[int, Hunk, List[int]]]:
    lines = text.splitlines(keepends=True)
    return [
        (number, hunk, _places(lines, hunk.new_lines if reverse else hunk.old_lines))
        for file_patch in patches
        for number, hunk in enumerate(file_patch.hunks, 1)
    ]


def apply_all(
    patches: List[FilePatch], text: str, reverse: bool = False, at_line: bool = False
) -> str:
    for file_patch in reversed(patches) if reverse else patches:
        text = file_patch.apply(text, reverse=reverse, at_line=at_line)
    return text


@dataclasses.dataclass(frozen=True)
class Form:
    """One text of the change to one file: the series' own hunks
    (``UPSTREAM``; ``BACKPORT`` for a backport-only change), or a backport's, whose hunks fit the stock file of the
    releases it is named after (see ``read_backports``)."""

    name: str
    patches: Tuple[FilePatch, ...]


UPSTREAM = "upstream"
BACKPORT = "backport"

# Backports: patches/backports/RELEASES.diff, one unified diff per file whose
# series hunks do not fit the stock file of those releases (e.g.
# v1.0.0-v1.1.0.diff). Written by scripts/backport.py; lines before the first
# "--- " are comments.
BACKPORTS = "backports"


def read_backports(root: Path) -> Dict[str, List[Form]]:
    """Each file's backport forms, named after their releases (the file's name
    without ``.diff``), in the order of their names."""
    folder = root / "patches" / BACKPORTS
    found: Dict[str, List[Form]] = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.diff")):
            for file_patch in parse_diff(path.read_text(encoding="utf-8")):
                found.setdefault(file_patch.path, []).append(
                    Form(path.stem, (file_patch,))
                )
    return found


@functools.lru_cache(maxsize=None)
def _backports(root: Path) -> Dict[str, List[Form]]:
    return read_backports(root)


def forms(patches: Sequence[FilePatch]) -> Tuple[Form, ...]:
    """Every form of one file's change: the series' own hunks first, then the
    backports for older releases that the tool ships (``data_root()``)."""
    from executorch_device_guard import data_root

    own = Form(
        BACKPORT if patches and patches[0].backport else UPSTREAM, tuple(patches)
    )
    if not patches:
        return (own,)
    return (own, *_backports(data_root()).get(patches[0].path, ()))


class FileState(enum.Enum):
    STOCK = "stock"
    PATCHED = "patched"
    UNKNOWN = "unknown"
    MISSING = "missing"
    NOT_SHIPPED = "not shipped"
    NOT_FOR_RELEASE = "not for this release"
    SHADOWED = "shadowed"  # Python imports another file in its place
    # Holds the fix as the release installed it (its RECORD's hash): the
    # release ships the fix, no earlier version of this tool wrote it.
    FIXED = "fixed"


# The states whose files apply, revert and the import hook leave alone.
LEFT_ALONE = (FileState.NOT_SHIPPED, FileState.NOT_FOR_RELEASE, FileState.FIXED)


def _classify_one(
    text: str, patches: List[FilePatch], at_line: bool = False
) -> Tuple[FileState, str, bool]:
    """The state of a file's text under one form, the text of the other state,
    and whether the text holds both the stock and the patched code."""

    def attempt(source: str, reverse: bool) -> Optional[str]:
        try:
            return apply_all(patches, source, reverse=reverse, at_line=at_line)
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


def _classify(
    text: str, forms: Tuple[Form, ...], at_line: bool = False
) -> Tuple[FileState, str, str, str]:
    """The state of a file's text, the text of the other state, a reason (when
    unknown) and the name of the form that fits (``at_line``: see
    ``FilePatch.apply``)."""
    fits: List[Tuple[FileState, str, str]] = []
    both = False
    for form in forms:
        state, other, mixed = _classify_one(text, list(form.patches), at_line)
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
    for form in forms:
        for reverse in (False, True):
            patches = list(form.patches)
            repeated = repeated_hunks(patches, text, reverse)
            if repeated and not missing_hunks(patches, text, reverse):
                number, _, places = repeated[0]
                shown = ", ".join(str(at + 1) for at in places[:3])
                of = f" of the {form.name} form" if form.name not in (UPSTREAM, BACKPORT) else ""
                return (
                    f"the {'patched' if reverse else 'stock'} lines of hunk "
                    f"{number}{of} occur {len(places)} times (from lines "
                    f"{shown}), so where the change goes cannot be told"
                )
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
    text: Optional[str], patches: List[FilePatch], at_line: bool = False
) -> Tuple[FileState, Optional[str]]:
    """The state of one file, and its patched text when it is stock
    (``at_line``, for the series' own test files: see ``FilePatch.apply``)."""
    if text is None:
        return FileState.MISSING, None
    state, other, _, _ = _classify(text, forms(patches), at_line)
    return state, other if state is FileState.STOCK else None


def form(text: str, patches: List[FilePatch]) -> str:
    """The name of the form of the change that fits a stock or patched text
    ("" for any other)."""
    return _classify(text, forms(patches))[3]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One target's text judged against its change: its state, why (when
    unknown or left alone), the text of the other state (when stock or
    patched), and the name of the form that fits."""

    state: FileState
    reason: str = ""
    other: str = ""
    form: str = ""


def judge(
    patches: List[FilePatch], version: Optional[str], text: Optional[str]
) -> Verdict:
    """The state of a target of ExecuTorch ``version`` (None when unknown:
    the text decides) whose text is ``text`` (None when it is not there or
    cannot be read): the change's release ranges first, then the text."""
    first, last = patches[0].releases or ("", "")
    if patches[0].undecided(version):
        major, minor = (release_key(last) or (0, 0))[:2]
        why = (
            f"ExecuTorch {version} comes after {last}, the last release its "
            f"backport is for, on the same line: whether it has upstream's "
            f"fix cannot be told; install {last}, or {major}.{minor + 1}.0 or later"
        )
        return Verdict(FileState.UNKNOWN, why)
    if not patches[0].for_release(version):
        fits = _classify(text, forms(patches))[0] if text is not None else None
        if fits in (FileState.STOCK, FileState.PATCHED):
            # The text is of a release the backport is for: the version
            # label and the text disagree (never leave the fix out).
            why = (
                f"its text is the {fits.value} text of ExecuTorch {first} to "
                f"{last}, which its backport is for, but this release says "
                f"{version}: which release it is cannot be told"
            )
            return Verdict(FileState.UNKNOWN, why)
        why = f"its backport is for ExecuTorch {first} to {last}: left alone"
        return Verdict(FileState.NOT_FOR_RELEASE, why)
    if text is None:
        return Verdict(FileState.MISSING)
    state, other, reason, name = _classify(text, forms(patches))
    return Verdict(state, reason, other, name)
