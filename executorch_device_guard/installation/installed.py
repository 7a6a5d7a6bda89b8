# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The ExecuTorch installed in this interpreter's environment, and ``revert``
of the files that earlier versions of this tool patched in place.

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
``apply`` writes none of ExecuTorch's files now (``startup_files``).
``revert`` replaces each patched file by its stock text (the strict reverse of
the same hunks), one file at a time, atomically, under a lock (``lock``),
inside the package only (``confined``); it writes nothing when a file is
unknown or missing. Just before a file's rename its cached bytecode is
removed: Python would keep running an unchecked-hash ``.pyc`` of the old
text (``bytecode``). Such stale bytecode of the other targets is removed too.

An interrupted ``revert`` leaves every file whole, stock or patched:
``status`` says which, and the next ``revert`` completes it. Temporary files
that a SIGKILL left, and the ``.device_guard.json`` state file of earlier
versions, are removed by the next ``revert`` and never read.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import dataclasses
import email.parser
import hashlib
import importlib.metadata
import importlib.util
import os
import posixpath
import re
import stat
import sys
from pathlib import Path
from typing import (
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
)

from executorch_device_guard.installation import (
    bytecode,
    faults,
    lock,
    origins,
    recovery,
)
from executorch_device_guard.installation.confined import (
    Changed,
    Package,
    read_file,
    Unsafe,
)
from executorch_device_guard.errors import GuardError
from executorch_device_guard.patchset import (  # noqa: F401 (re-exported)
    classify,
    FilePatch,
    FileState,
    form,
    judge,
    LEFT_ALONE,
    release_key,
)

__all__ = [
    "FileState",
    "GuardError",
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
    """The installed ``executorch`` distribution, found on ``_search_path``;
    GuardError when its folder holds more than one (a stale dist-info that
    pip left, or one copied in): which describes the package is unknown."""
    found = list(
        importlib.metadata.distributions(name="executorch", path=_search_path())
    )
    if not found:
        return None
    for dist in found:
        archive = _archive(dist)
        if archive is not None:
            raise GuardError(
                f"ExecuTorch is installed inside {archive} (a zip or egg file "
                "on the path), to which this tool cannot serve the fix. "
                "Nothing was changed. Take that file off PYTHONPATH "
                "(or sys.path) and install ExecuTorch into site-packages: "
                f"{recovery.command(None, _version_in(dist))}"
            )
    here = os.path.realpath(_dist_info(found[0]).parent)
    same = sorted(
        {
            os.path.realpath(_dist_info(d))
            for d in found
            if os.path.realpath(_dist_info(d).parent) == here
        }
    )
    if len(same) > 1:
        names = " and ".join(os.path.basename(p) for p in same)
        raise GuardError(
            f"{here} holds {len(same)} executorch distributions ({names}), so "
            "which release its executorch folder is cannot be told. Nothing was "
            "changed. Delete the one that is not the installed release's (pip "
            "left it, or it was copied in), or reinstall ExecuTorch: "
            f"{recovery.command(Path(same[0]), None)}"
        )
    return found[0]


def _archive(dist: importlib.metadata.Distribution) -> Optional[str]:
    """The zip or egg file that holds the distribution's metadata, when it is
    not a folder on the file system (``importlib.metadata`` reads it through
    ``zipfile.Path``); None for a folder."""
    folder = getattr(dist, "_path", None)
    if isinstance(folder, Path):
        return None
    path = str(folder if folder is not None else dist.locate_file(""))
    for parent in [path, *(str(p) for p in Path(path).parents)]:
        if os.path.isfile(parent):
            return parent
    return path


def _version_in(dist: importlib.metadata.Distribution) -> Optional[str]:
    try:
        return dist.metadata.get("Version")
    except Exception:  # whatever the archive holds
        return None


def _dist_info(dist: importlib.metadata.Distribution) -> Path:
    """The distribution's metadata folder (``executorch-1.5.1.dist-info``)."""
    return Path(getattr(dist, "_path", dist.locate_file("executorch.dist-info")))


@dataclasses.dataclass(frozen=True)
class Record:
    """What the distribution's own metadata says, read from its files (never
    through a link, never waiting on a FIFO, never past ``MAX_READ``).

    ``version``: METADATA's ``Version``; ``files``: the files in the package
    folder that RECORD lists, relative to it (``exir/emit/_emitter.py``),
    each path normalized as the file system reads it (``exir/x/../emit`` is
    ``exir/emit``); None without a RECORD. ``hashes``: RECORD's hash of
    each of those files (``sha256=...``, or empty)."""

    dist_info: Path
    version: Optional[str]
    files: Optional[FrozenSet[str]]
    hashes: Dict[str, str] = dataclasses.field(default_factory=dict)

    def lists(self, rel: str, data: bytes) -> bool:
        """Whether RECORD's sha256 of the file ``rel`` is that of ``data``."""
        listed = self.hashes.get(rel, "")
        return listed.startswith("sha256=") and listed == _digest(data)


def _unreadable(
    what: str, folder: Optional[Path] = None, version: Optional[str] = None
) -> GuardError:
    return GuardError(
        f"{what}, so which files this ExecuTorch ships is unknown. Nothing was "
        f"changed. Reinstall it: {recovery.command(folder, version)}"
    )


def _named(folder: Path, version: Optional[str]) -> bool:
    """Whether the dist-info folder's name bears out ``version``."""
    named = folder.name[len("executorch-") : -len(".dist-info")]
    same = named.replace("_", "-").lower() == (version or "").replace("_", "-").lower()
    return folder.name.startswith("executorch-") and same


def _read_record(dist: importlib.metadata.Distribution) -> Record:
    """Reads and checks the distribution's METADATA and RECORD; GuardError
    when one cannot be read or they disagree with each other (a ``Version``
    edited, a dist-info of another release): the release is then unknown."""
    folder = _dist_info(dist)
    is_dist_info = folder.name.endswith(".dist-info")
    meta_path = folder / ("METADATA" if is_dist_info else "PKG-INFO")
    try:
        meta = read_file(meta_path)
    except Unsafe as e:
        raise _unreadable(str(e), folder) from e
    version = None
    if meta is not None:
        try:
            headers = email.parser.BytesHeaderParser().parsebytes(meta)
            version = headers.get("Version")
        except (ValueError, LookupError) as e:
            why = f"{e.__class__.__name__}: {e}"
            raise _unreadable(f"{meta_path} cannot be read ({why})", folder) from e
        version = str(version).strip() if version is not None else None
    # The release to reinstall, where METADATA and its folder's name agree.
    pin = version if _named(folder, version) else None
    try:
        record = read_file(folder / "RECORD") if is_dist_info else None
    except Unsafe as e:
        raise _unreadable(str(e), folder, pin) from e
    if record is None:
        files = None
        if not is_dist_info:  # an egg-info: its own list of files
            files = _in_package(str(f) for f in (dist.files or []))
        return Record(folder, version, files)
    try:
        rows = list(csv.reader(record.decode("utf-8").splitlines()))
    except (UnicodeDecodeError, csv.Error) as e:
        why = f"{e.__class__.__name__}: {e}"
        what = f"{folder / 'RECORD'} cannot be read ({why})"
        raise _unreadable(what, folder, pin) from e
    hashes = {
        posixpath.normpath(row[0]): row[1] if len(row) > 1 else ""
        for row in rows
        if row and row[0]
    }
    if not version:
        raise GuardError(
            f"{meta_path} gives no Version, so which release this ExecuTorch is "
            "cannot be told. Nothing was changed. Reinstall it: "
            f"{recovery.command(folder, None)}"
        )
    named = folder.name[len("executorch-") : -len(".dist-info")]
    ours = folder.name.startswith("executorch-")
    if ours and version and not _named(folder, version):
        raise GuardError(
            f"{meta_path} says Version {version!r}, but its folder is named "
            f"for {named!r}, so which release this ExecuTorch is cannot be "
            "told. Nothing was changed. Reinstall it: "
            f"{recovery.command(folder, None)}"
        )
    listed = hashes.get(f"{folder.name}/METADATA", "")
    if meta is not None and listed.startswith("sha256=") and listed != _digest(meta):
        raise GuardError(
            f"{meta_path} is not the file that {folder / 'RECORD'} lists (its "
            "sha256 differs: edited after installation), so which release this "
            "ExecuTorch is cannot be told. Nothing was changed. Reinstall it: "
            f"{recovery.command(folder, None)}"
        )
    _same_as_version_py(dist, folder, meta_path, version)
    in_package = {
        p[len("executorch/") :]: h
        for p, h in hashes.items()
        if p.startswith("executorch/")
    }
    return Record(folder, version, frozenset(in_package), in_package)


_VERSION_PY = re.compile(rb"""^__version__\s*=\s*["']([^"'\n]*)["']""", re.M)


def _same_as_version_py(
    dist: importlib.metadata.Distribution,
    folder: Path,
    meta_path: Path,
    version: str,
) -> None:
    """GuardError when ``executorch/version.py``, which the build writes
    from the same version, names another release than METADATA (1.4.1's
    files under a dist-info relabelled 1.4.2 or 1.5.1): the release decides
    which backports apply. Compared by (major, minor, patch), so that a
    local label (``+cpu``) is no disagreement; nothing to compare where
    the package has no version.py."""
    path = Path(dist.locate_file("executorch")) / "version.py"
    try:
        text = read_file(path)
    except Unsafe as e:
        raise _unreadable(str(e), folder) from e
    said = _VERSION_PY.search(text) if text is not None else None
    if said is None:
        return
    there = said.group(1).decode("utf-8", "replace")
    ours, theirs = release_key(version), release_key(there)
    if ours is not None and theirs is not None and ours != theirs:
        raise GuardError(
            f"{path} says __version__ {there!r}, but {meta_path} says Version "
            f"{version!r}, so which release this ExecuTorch is cannot be told. "
            f"Nothing was changed. Reinstall it: {recovery.command(folder, None)}"
        )


def _in_package(paths: Iterable[str]) -> FrozenSet[str]:
    """The paths (relative to site-packages) inside the package folder,
    relative to it, normalized."""
    found = (posixpath.normpath(p) for p in paths)
    return frozenset(p[len("executorch/") :] for p in found if p.startswith("executorch/"))


def _digest(data: bytes) -> str:
    """A file's hash as RECORD writes it."""
    raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + raw.decode()


def executorch_version() -> Optional[str]:
    dist = _distribution()
    return _read_record(dist).version if dist is not None else None


def reinstall_command() -> str:
    """The command that puts ExecuTorch's own files back where they are
    installed (``recovery``), quoted for a shell whatever its path or
    version says."""
    try:
        dist = _distribution()
    except GuardError:
        dist = None
    if dist is None:
        return recovery.command(None, None)
    try:
        version = _read_record(dist).version
    except GuardError:
        version = None
    return recovery.command(_dist_info(dist), version)


def executorch_root() -> Path:
    """The package folder of the interpreter's installed ``executorch`` distribution.

    The distribution is looked up without the current folder that ``python
    -m`` puts first on ``sys.path`` (``_search_path``), and the command refuses
    when ``import`` would take a target module, or a package on its way, from
    anywhere else (``loaded_instead``): an ``executorch/`` there, with or
    without a dist-info beside it, or an import hook.
    """
    root = installed_root()
    instead = loaded_instead(root)
    if instead is not None:
        raise shadowed(root, instead)
    return root


def installed_root() -> Path:
    """``executorch_root`` without the check of what ``import`` loads."""
    dist = _distribution()
    if dist is None:
        raise GuardError(
            f"ExecuTorch is not installed in this environment ({sys.executable} "
            "has no 'executorch' distribution). Install it, or run the tool "
            "with the Python of the environment that has it."
        )
    root = Path(dist.locate_file("executorch"))
    found = _read_record(dist)
    if _is_source(found):
        raise GuardError(
            f"The installed executorch distribution ({found.dist_info}) is an "
            f"editable or source install of {_source_of(root)}: this tool does "
            "not write into a source tree. Nothing was changed. Patch that tree "
            "with `git am` instead (see `executorch-device-guard export`)."
        )
    if not (root / "exir").is_dir():
        raise GuardError(
            f"{root} has no exir/ folder, though the executorch distribution "
            f"is installed. Reinstall it: {reinstall_command()}"
        )
    return root


def _is_source(found: Record) -> bool:
    """Whether the distribution is an editable or source install: a RECORD
    that lists no file in the package (PEP 660: a ``.pth`` file and a
    finder), or an egg-info folder without the list of files that an
    installation writes (``installed-files.txt``), as ``setup.py develop``
    and ``pip install -e`` without a pyproject.toml leave in the source tree
    (found through an ``.egg-link`` or ``easy-install.pth``)."""
    if found.files is not None and not found.files:
        return True
    folder = found.dist_info
    return (
        folder.name.endswith(".egg-info")
        and folder.is_dir()
        and not (folder / "installed-files.txt").exists()
    )


def _source_of(root: Path) -> str:
    """The folder that ``import executorch`` loads (an editable install's
    source tree, rather than a package folder that is not there)."""
    spec = importlib.util.find_spec("executorch")
    places = list((spec and spec.submodule_search_locations) or [])
    return next((p for p in places if os.path.isdir(p)), str(root))


def targets_in(root: Path) -> List[str]:
    """The install series' target files that ``root`` holds as files
    (whatever their state): the modules whose origin decides whether the fix
    is used. One that is missing, a folder or a FIFO is left to ``inspect``,
    which names it."""
    from executorch_device_guard import data_root
    from executorch_device_guard.patchset import patched_files

    return [
        rel for rel in patched_files(data_root(), install=True) if (root / rel).is_file()
    ]


@dataclasses.dataclass(frozen=True)
class Instead:
    """A package or module that ``import`` here takes from elsewhere than the
    expected ExecuTorch folder (``origins.instead``): its name, what is
    loaded instead (None: nothing), as what (``module``, ``package``,
    ``namespace``), the ``executorch`` folder holding it (found on the path),
    and the import hook that served it (None: the path finder)."""

    module: str
    where: Optional[str]
    kind: Optional[str] = None
    portion: Optional[str] = None
    finder: Optional[str] = None

    @classmethod
    def of(cls, found: Optional[dict]) -> "Optional[Instead]":
        if found is None:
            return None
        names = ("module", "where", "kind", "portion", "finder")
        return cls(**{name: found.get(name) for name in names})


def loaded_instead(root: Path, served: Optional[Path] = None) -> Optional[Instead]:
    """What ``import`` here (this interpreter's path and import hooks) takes
    from elsewhere than ``served`` (default: ``root``, the installed package)
    on the way to any target module that ``root`` holds; None when every
    one, and each package on its way, comes from there. An empty
    ``executorch/backends/`` folder ahead on the path is no shadow: a
    regular package later on the path wins over it."""
    try:
        found = origins.instead(str(served or root), targets_in(root))
    except Exception as e:  # noqa: B902 - an import hook that cannot answer
        raise GuardError(
            f"where Python imports ExecuTorch from here cannot be told "
            f"({type(e).__name__}: {e}), so whether the fix would be used "
            "cannot be either. Nothing was changed."
        ) from e
    return Instead.of(found)


def served(instead: Instead) -> str:
    """Who, other than the path, gave Python ``instead``, in words."""
    if instead.finder == "sys.modules":
        return "a .pth file or sitecustomize imported it when Python started"
    return (
        f"an import hook ({instead.finder}, put on sys.meta_path by a .pth "
        "file or sitecustomize) serves it"
    )


def shadowed(root: Path, instead: Instead) -> GuardError:
    """The refusal for ``instead``, in one line, with its way out."""
    where = instead.where or "nothing"
    said = f"`import {instead.module}` here loads {where}"
    if instead.finder is not None:
        return GuardError(
            f"{said}, not the installed ExecuTorch at {root}: {served(instead)}. "
            "Nothing was changed. Remove that hook (or its .pth file), then "
            "run the command again."
        )
    inside = instead.where is not None and os.path.commonpath(
        [os.path.realpath(instead.where), os.path.realpath(root)]
    ) == os.path.realpath(root)
    if instead.kind == "namespace" and inside:
        return GuardError(
            f"{said} as a namespace package: its __init__.py is not a file "
            "that Python imports (a FIFO, a folder, a broken link), so "
            "ExecuTorch cannot be imported as installed. Nothing was changed. "
            f"Reinstall it: {reinstall_command()}"
        )
    return GuardError(
        f"{said}, not the installed ExecuTorch at {root}: an executorch "
        "folder in the current directory or on PYTHONPATH shadows it. Run the "
        "command from another directory."
    )


def read_text(path: Path) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None


# Why a target that holds the fix is ``FIXED``.
SHIPS_THE_FIX = "this release ships the fix"
NOT_AS_INSTALLED = (
    "it holds the fix, changed since installation, but not as an earlier "
    "version of this tool patched files: left as it is"
)


def holding_the_fix(
    found: Optional[Record], rel: str, data: bytes, stock: bytes
) -> Tuple[FileState, str]:
    """The state of the target ``rel`` whose bytes ``data`` hold the fix,
    ``stock`` being them with the fix's hunks reversed: ``PATCHED`` (and
    ``revert`` writes ``stock`` back) only where an earlier version of this
    tool made it of the file the release installed, RECORD's hash being
    ``stock``'s (those versions never changed RECORD); ``FIXED`` otherwise:
    as the release installed it, or changed by someone else."""
    if found is not None and found.lists(rel, stock):
        return FileState.PATCHED, ""
    if found is not None and found.lists(rel, data):
        return FileState.FIXED, SHIPS_THE_FIX
    return FileState.FIXED, NOT_AS_INSTALLED


def record(root: Path) -> Optional[Record]:
    """What the installed distribution's metadata says, if its package folder
    is ``root``, else the one distribution beside ``root`` (a folder a script
    names); None where no distribution describes ``root``."""
    def describes(dist: Optional[importlib.metadata.Distribution]) -> bool:
        here = dist.locate_file("executorch") if dist is not None else ""
        return os.path.realpath(here) == os.path.realpath(root)

    dist = _distribution()
    if not describes(dist):
        beside = importlib.metadata.distributions(
            name="executorch", path=[str(root.parent)]
        )
        found = [d for d in beside if describes(d)]
        if len(found) != 1:
            return None
        dist = found[0]
    return _read_record(dist)


def shipped(root: Path) -> Optional[FrozenSet[str]]:
    """The files in the package folder ``root`` (relative to it) that the
    installed distribution's RECORD lists; None where no RECORD describes
    ``root``, and then every target counts as shipped."""
    found = record(root)
    return found.files if found is not None else None


def release(root: Path) -> Optional[str]:
    """The version of the distribution whose package folder is ``root``."""
    found = record(root)
    return found.version if found is not None else None


@dataclasses.dataclass(frozen=True)
class Inspection:
    """One target file: its state, why (when unknown), its bytes, the other
    state's, the form of the change that fits it, and its modification time."""

    state: FileState
    reason: str = ""
    data: bytes = b""
    other: bytes = b""
    form: str = ""
    mtime_ns: int = 0

    def describe(self, path: Path) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"{path} is {self.state.value}{why}"

    def stock(self) -> bytes:
        """The stock bytes of a stock or patched file."""
        return self.data if self.state is FileState.STOCK else self.other


def inspect(
    package: Package,
    rel: str,
    patches: List[FilePatch],
    found: Optional[Record] = None,
) -> Inspection:
    """One target's state; ``found``: what the distribution's metadata says
    of ``package`` (``record``): the files that RECORD lists and the release.

    RECORD's hash of a stock target is not compared: a file edited outside
    the patched lines is still stock. One that holds the fix is patched in
    place only where RECORD bears that out (``holding_the_fix``)."""
    version = found.version if found is not None else None
    files = found.files if found is not None else None
    if not patches[0].for_release(version):
        verdict = judge(patches, version, _text(package, rel))
        return Inspection(verdict.state, verdict.reason)
    if files is not None and rel not in files:
        try:
            if package.lstat(rel) is None:
                return Inspection(FileState.NOT_SHIPPED)
        except Unsafe as e:
            return Inspection(FileState.UNKNOWN, str(e))
        # RECORD and the disk disagree: never take the file for not shipped.
        why = "it is there, but this release's RECORD does not list it"
        return Inspection(FileState.UNKNOWN, why)
    try:
        data = package.read(rel)
        st = package.lstat(rel)
        shadow = shadows(package, rel)
    except Unsafe as e:
        return Inspection(FileState.UNKNOWN, str(e))
    if data is None or st is None:
        return Inspection(FileState.MISSING)
    if shadow:
        why = f"Python imports {shadow[0]} instead of it"
        return Inspection(FileState.SHADOWED, why)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Inspection(FileState.UNKNOWN, "not UTF-8 text", data)
    verdict = judge(patches, version, text)
    state, reason = verdict.state, verdict.reason
    other = verdict.other.encode("utf-8")
    if state is FileState.PATCHED:
        state, why = holding_the_fix(found, rel, data, other)
        reason = why or reason
    return Inspection(state, reason, data, other, verdict.form, st.st_mtime_ns)


def _text(package: Package, rel: str) -> Optional[str]:
    """The text of the file ``rel``, read as ``inspect`` reads a target;
    None where it is not there or cannot be read."""
    try:
        data = package.read(rel)
        return data.decode("utf-8") if data is not None else None
    except (Unsafe, UnicodeDecodeError):
        return None


def shadows(package: Package, rel: str) -> List[str]:
    """The files that Python imports as the module ``rel`` instead of its
    source: a package folder of the same name, or an extension module."""
    folder, _, name = rel.rpartition("/")
    stem = name[: -len(".py")]
    prefix = f"{folder}/" if folder else ""
    names = package.listing(folder)
    found = []
    st = package.lstat(prefix + stem) if stem in names else None
    if st is not None and not stat.S_ISREG(st.st_mode):  # listing refuses a link
        found += [
            f"{prefix}{stem}/{n}"
            for n in package.listing(prefix + stem)
            if bytecode.INIT.fullmatch(n)
        ]
    return found + [prefix + n for n in names if bytecode.extension(stem).fullmatch(n)]


@dataclasses.dataclass(frozen=True)
class Bytecode:
    """A target's cached bytecode: every file with its header, the stale ones
    among them (``bytecode.is_stale``: True), those another Python wrote that
    cannot be checked here (None), and why an entry in their place cannot be
    touched."""

    files: Tuple[str, ...] = ()
    stale: Tuple[str, ...] = ()
    unsafe: Tuple[str, ...] = ()
    unchecked: Tuple[str, ...] = ()
    headers: Tuple[bytes, ...] = ()
    # Its files under PYTHONPYCACHEPREFIX, outside the package, which the tool
    # never writes: each with its header, and those that Python would run
    # although they were not compiled from the source.
    prefixed: Tuple[Tuple[str, bytes], ...] = ()
    prefixed_stale: Tuple[str, ...] = ()
    # Checked-hash files of other text (``bytecode.trusts_a_flag``): kept,
    # so that ``revert`` gives them back; status says what they need.
    checked_other: Tuple[str, ...] = ()

    def runs_instead(self, source: bytes, mtime_ns: int, replaced: bytes) -> List[str]:
        """The files that Python could run instead of ``source``, written in
        place of ``replaced`` (see ``bytecode.runs_instead``)."""
        return [
            path
            for path, header in zip(self.files, self.headers)
            if header and bytecode.runs_instead(header, source, mtime_ns, replaced)
        ]

    def prefixed_runs_instead(
        self, source: bytes, mtime_ns: int, replaced: bytes
    ) -> List[str]:
        return [
            path
            for path, header in self.prefixed
            if bytecode.runs_instead(header, source, mtime_ns, replaced)
        ]


def _prefixed(root: Path, rel: str) -> Dict[str, bytes]:
    """The headers of ``rel``'s bytecode under ``sys.pycache_prefix``."""
    if not getattr(sys, "pycache_prefix", None):
        return {}
    folder = Path(importlib.util.cache_from_source(str(root / rel))).parent
    pattern = bytecode.locations(rel)[1]
    try:
        names = sorted(n for n in os.listdir(folder) if pattern.fullmatch(n))
    except OSError:
        return {}
    found = {}
    for name in names:
        try:
            header = read_file(folder / name, first=bytecode.HEADER)
        except Unsafe:
            continue  # not a file that Python can load
        if header is not None:
            found[str(folder / name)] = header
    return found


def inspect_bytecode(package: Package, rel: str, source: bytes) -> Bytecode:
    folder, pattern, legacy = bytecode.locations(rel)
    try:
        names = [
            f"{folder}/{n}" for n in package.listing(folder) if pattern.fullmatch(n)
        ]
    except Unsafe as e:
        return Bytecode(unsafe=(str(e),))
    files: List[str] = []
    headers: List[bytes] = []
    stale: List[str] = []
    unchecked: List[str] = []
    unsafe: List[str] = []
    for path in names + [legacy]:
        try:
            header = package.head(path, bytecode.HEADER)
        except Unsafe as e:
            unsafe.append(str(e))
            continue
        if header is None:
            continue
        files.append(path)
        # The legacy file is only loaded when the source is missing.
        headers.append(header if path != legacy else b"")
        verdict = bytecode.is_stale(header, source) if path != legacy else False
        if verdict:
            stale.append(path)
        elif verdict is None:
            unchecked.append(path)
    prefixed = _prefixed(package.root, rel)
    return Bytecode(
        tuple(files),
        tuple(stale),
        tuple(unsafe),
        tuple(unchecked),
        tuple(headers),
        tuple(prefixed.items()),
        tuple(p for p, h in prefixed.items() if bytecode.is_stale(h, source) is not False),
        tuple(
            p for p, h in zip(files, headers) if h and bytecode.trusts_a_flag(h, source)
        ),
    )


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
    # Why leftovers cannot be removed (a flagged folder), and the way out.
    pinned: List[Tuple[str, str]] = dataclasses.field(default_factory=list)

    def count(self, state: FileState) -> int:
        return sum(i.state is state for i in self.files.values())

    def shipped(self) -> int:
        """How many targets this release ships, less those left alone
        (``LEFT_ALONE``: not shipped, not for this release, fixed)."""
        return len(self.files) - sum(self.count(state) for state in LEFT_ALONE)

    def stale(self) -> List[str]:
        return [path for b in self.bytecode.values() for path in b.stale]

    def shadowed(self) -> str:
        """The first target that Python would not import, described; or ''."""
        return next(
            (
                i.describe(self.root / rel)
                for rel, i in self.files.items()
                if i.state is FileState.SHADOWED
            ),
            "",
        )

    def unchecked(self) -> List[str]:
        return [path for b in self.bytecode.values() for path in b.unchecked]

    def prefixed_stale(self) -> List[str]:
        return [path for b in self.bytecode.values() for path in b.prefixed_stale]

    def unsafe(self) -> List[str]:
        return [why for b in self.bytecode.values() for why in b.unsafe]


def _survey(
    package: Package,
    targets: Dict[str, List[FilePatch]],
    found: Optional[Record],
) -> Survey:
    files = {
        rel: inspect(package, rel, patches, found) for rel, patches in targets.items()
    }
    legacy = package.is_file(LEGACY_STATE)
    cached = {
        rel: inspect_bytecode(package, rel, i.data)
        for rel, i in files.items()
        if i.state in (FileState.STOCK, FileState.PATCHED)
    }
    leftovers, look_alikes = _leftovers(package, files)
    pinned = [why for why in map(_pinned_or_none(package), leftovers) if why]
    return Survey(
        package.root, files, leftovers, legacy, cached, look_alikes, pinned=pinned
    )


def _pinned_or_none(package: Package) -> Callable[[str], Optional[Tuple[str, str]]]:
    def pinned(rel: str) -> Optional[Tuple[str, str]]:
        try:
            return package.pinned(rel)
        except (OSError, Unsafe):
            return None

    return pinned


def _leftovers(
    package: Package, files: Dict[str, Inspection]
) -> Tuple[List[str], List[str]]:
    """Temporary files that this tool's runs left (``.NAME.device-guard.HEX.tmp``,
    removed by the next apply or revert), and files named like an earlier
    version's (``.NAME.XXXXXXXX.tmp``, as ``tempfile.mkstemp`` names any file,
    and its probes), which are only reported: a user's
    ``._emitter.py.20261130.tmp`` has such a name too."""
    ours: List[str] = []
    others: List[str] = []
    for leftover in package.leftovers(list(files)):
        (ours if leftover.kind == "temp" else others).append(leftover.path)
    return ours, others


# How many times the package folder may be replaced while a run waits for its
# lock before the run gives up.
_ATTEMPTS = 3


@contextlib.contextmanager
def _locked(
    root: Path,
    waiting: Callable[[Path, str], None],
    shared: bool = False,
    wait: float = lock.DEFAULT_WAIT,
) -> Iterator[Package]:
    """The package folder at ``root``, opened and locked.

    The lock is taken on the folder opened, so a folder that was moved away
    while the run waited (as a pip reinstall does) would be read or patched
    in its new place; the run starts over on the folder now at ``root``.
    Everything else (the distribution's RECORD, its version, the files) is
    read once the lock is held.
    """
    for _ in range(_ATTEMPTS):
        with (
            Package(root) as package,
            lock.hold(
                package.fd,
                root,
                lambda who: waiting(root, who),
                shared,
                wait,
            ),
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
    waiting: Optional[Callable[[Path, str], None]] = None,
    wait: float = lock.DEFAULT_WAIT,
) -> Survey:
    """Reads the state of the installation, writing nothing; waits up to
    ``wait`` seconds for a running ``revert`` to finish first (a shared
    lock), then raises GuardError."""
    with _locked(root, waiting or _say_waiting, True, wait) as package:
        return _survey(package, targets, record(root))


def status(root: Path, targets: Dict[str, List[FilePatch]]) -> Dict[str, FileState]:
    return {rel: i.state for rel, i in survey(root, targets).files.items()}


@dataclasses.dataclass(frozen=True)
class Change:
    """What ``revert`` did: files replaced, leftovers removed,
    stale bytecode removed, and the replaced files' bytecode removed."""

    written: List[str]
    removed: List[str]
    stale: List[str] = dataclasses.field(default_factory=list)
    bytecode: List[str] = dataclasses.field(default_factory=list)


def _remove(package: Package, rel: str) -> bool:
    """``package.remove``, with a failure named in one line: nothing was
    changed yet, since removals come before any file is replaced."""
    try:
        return package.remove(rel)
    except OSError as e:
        raise GuardError(
            f"Cannot remove {package.root / rel} ({e.strerror or e}). Nothing "
            "else was changed. Fix the cause (or remove it yourself), then run "
            "the command again."
        ) from e


def _say_waiting(root: Path, who: str) -> None:
    print(
        f"waiting for {who} to release its lock on {root} (Ctrl-C to stop)...",
        file=sys.stderr,
        flush=True,
    )


def revert(
    root: Path,
    targets: Dict[str, List[FilePatch]],
    waiting: Optional[Callable[[Path, str], None]] = None,
    wait: float = lock.DEFAULT_WAIT,
) -> Change:
    """Writes back the stock text of every target that an earlier version
    of this tool patched in place; ``written`` is empty if all were stock."""
    faults.check()
    with _locked(root, waiting or _say_waiting, wait=wait) as package:
        found = _survey(package, targets, record(root))
        shadowed = found.shadowed()
        if shadowed:
            raise GuardError(
                f"{shadowed}: the fix would not be used. Nothing was changed. "
                "Remove that file, then run the command again."
            )
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
        todo = [rel for rel, i in found.files.items() if i.state is FileState.PATCHED]
        for rel in todo:
            why = package.foreign(rel)
            if why:
                raise GuardError(
                    f"{why}: replacing it would make it yours. Nothing was "
                    "changed. Run the command as that user, or as root."
                )
        outside = [
            path
            for rel in todo
            for path in found.bytecode[rel].prefixed_runs_instead(
                found.files[rel].other, found.files[rel].mtime_ns, found.files[rel].data
            )
        ] + [p for r, b in found.bytecode.items() if r not in todo for p in b.prefixed_stale]
        if outside:
            raise GuardError(
                f"Python would run {outside[0]}, bytecode under "
                "PYTHONPYCACHEPREFIX that was not compiled from the new text, "
                "and this tool writes nothing outside the package. Nothing was "
                "changed. Delete it, then run the command again."
            )
        removals = found.leftovers + ([LEGACY_STATE] if found.legacy_state else [])
        # A file to replace loses, just before the rename, the bytecode that
        # Python could run instead of its new text (which keeps its time);
        # another loses only what Python would run although it is stale.
        cached = {
            rel: found.bytecode[rel].runs_instead(
                found.files[rel].other,
                found.files[rel].mtime_ns,
                found.files[rel].data,
            )
            for rel in todo
        }
        stale = [
            p
            for r, b in found.bytecode.items()
            if r not in todo
            for p in b.stale + b.unchecked
        ]
        for rel in todo + removals + stale + sum(cached.values(), []):
            why = package.unwritable(rel)
            if why:
                raise GuardError(
                    f"Cannot write to {why}. Nothing was changed. Use an "
                    "environment you can write to, e.g. a virtual environment "
                    "you own."
                )
            pinned = package.pinned(rel)
            if pinned:
                raise GuardError(
                    f"{pinned[0]}. Nothing was changed. To go on, {pinned[1]}, "
                    "then run the command again."
                )
        removed = [rel for rel in removals if _remove(package, rel)]
        gone = [rel for rel in stale if _remove(package, rel)]
        written: List[str] = []
        for rel in todo:
            inspection = found.files[rel]
            try:
                package.replace(rel, inspection.other, inspection.data, cached[rel])
            except (OSError, Unsafe) as e:
                done = len(written) + found.shipped() - len(todo)
                if isinstance(e, Changed):
                    raise GuardError(
                        f"{root / rel} changed while this command ran (another "
                        f"program wrote it); what it wrote is kept. {done} of "
                        f"{found.shipped()} files are now stock, each file "
                        "whole: run the command again when that program is done."
                    ) from e
                raise GuardError(
                    f"Cannot write {root / rel} ({getattr(e, 'strerror', None) or e}). "
                    f"{done} of {found.shipped()} files are now stock, each "
                    "file whole: fix the cause, then run `revert` again to finish."
                ) from e
            written.append(rel)
        return Change(written, removed, gone, sum((cached[r] for r in written), []))
