# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""revert, of files that an earlier version patched in place, with cached
bytecode in the package.

``apply`` writes no file of ExecuTorch; ``revert`` still writes the stock text
back into files that an earlier version of this tool patched in place (set up
here with ``sites.patch_in_place``). An unchecked-hash ``.pyc``
(``compileall --invalidation-mode unchecked-hash``, as Docker images and
Bazel's rules_python build them) is loaded without looking at the source:
unless ``revert`` removes it, Python keeps running the patched code of a file
that holds the stock text again. Each test asks Python's own source loader
which code it would run for each target, and checks by hashing that nothing
else changed.
"""

import _imp
import compileall
import importlib.machinery
import importlib.util
import os
import py_compile
import re
import signal
import sys
from pathlib import Path
from typing import Dict

import pytest

from sites import (
    assert_only_targets_changed,
    cli,
    FAULT,
    make_site,
    one_line_error,
    PATCHED,
    patch_in_place,
    sha,
    snapshot,
    STOCK,
    TARGETS,
)

EMITTER = "exir/emit/_emitter.py"
MODES = {
    "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
    "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
    "timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
}


def compile_site(site: Path, mode: str = "unchecked-hash", optimize=(0,)) -> None:
    """What ``python -m compileall -f --invalidation-mode MODE`` does."""
    assert compileall.compile_dir(
        str(site / "executorch"),
        quiet=2,
        force=True,
        invalidation_mode=MODES[mode],
        optimize=list(optimize),
    )


def loaded(site: Path, monkeypatch: pytest.MonkeyPatch) -> Dict[str, str]:
    """For each target, whose code Python's source loader runs: 'stock',
    'patched' or 'other', with bytecode caches honoured as at import."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    result = {}
    for rel in TARGETS:
        path = str(site / "executorch" / rel)
        name = "executorch." + rel[: -len(".py")].replace("/", ".")
        code = importlib.machinery.SourceFileLoader(name, path).get_code(name)
        for state, data in (("stock", STOCK), ("patched", PATCHED)):
            if code == compile(data[rel], path, "exec", dont_inherit=True):
                result[rel] = state
                break
        else:
            result[rel] = "other"
    monkeypatch.undo()
    return result


def stale(site: Path) -> list:
    """Unchecked-hash files that do not match their source (checked here
    independently of the tool)."""
    found = []
    for rel in TARGETS:
        source = site / "executorch" / rel
        cache = source.parent / "__pycache__"
        for pyc in cache.glob(source.stem + ".*.pyc") if cache.is_dir() else ():
            data = pyc.read_bytes()
            if data[4:8] == b"\x01\0\0\0" and data[8:16] != importlib.util.source_hash(
                source.read_bytes()
            ):
                found.append(str(pyc))
    return found


def bytecode_of_targets(top: Path, site: Path) -> list:
    """Every cached bytecode file of a target, relative to ``top``."""
    files = []
    for rel in TARGETS:
        source = site / "executorch" / rel
        cache = source.parent / "__pycache__"
        files += [str(p.relative_to(top)) for p in cache.glob(source.stem + ".*.pyc")]
    return files


@pytest.mark.parametrize("mode", list(MODES))
def test_revert_runs_the_stock_code(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files an earlier version patched in place, and bytecode compiled from
    the patched text (as a Docker image built after that apply would):
    revert writes the stock text back, and Python runs the stock code."""
    site = make_site(tmp_path / "site")
    compile_site(site, mode, optimize=(0, 1))
    before = snapshot(tmp_path)
    cached = bytecode_of_targets(tmp_path, site)
    assert len(cached) == 2 * len(TARGETS)
    patch_in_place(site)
    compile_site(site, mode)
    assert loaded(site, monkeypatch) == {rel: "patched" for rel in TARGETS}

    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout.count("restored ") == len(TARGETS), reverted.stdout
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    # The patched text's bytecode, which Python rejects for the stock text,
    # may stay (timestamp, checked-hash) or go (unchecked-hash); nothing else
    # changed (the targets hold the stock text; version.py's bytecode stays,
    # byte for byte).
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k not in cached} == {
        k: v for k, v in before.items() if k not in cached
    }
    assert re.search(r"version\.cpython-\d+\.pyc", str(after))


def test_revert_removes_stale_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an earlier version could leave it: the files patched in place,
    unchecked-hash bytecode compiled from the patched text, then the stock
    text put back into all files but one by a revert that left bytecode
    alone. Python runs patched code where the files hold the stock text;
    revert removes that bytecode, and says so."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    compile_site(site)
    first, *rest = TARGETS
    for rel in rest:
        (site / "executorch" / rel).write_bytes(STOCK[rel])
    assert loaded(site, monkeypatch) == {rel: "patched" for rel in TARGETS}
    stale_before = stale(site)
    assert len(stale_before) == len(rest)
    before = snapshot(tmp_path)
    cached = bytecode_of_targets(tmp_path, site)

    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert sorted(
        re.findall(r"^removed stale bytecode (.*)$", reverted.stdout, re.M)
    ) == sorted(stale_before), reverted.stdout
    # The file written back loses the bytecode of the text it held.
    assert reverted.stdout.count("removed bytecode ") == 1, reverted.stdout
    assert f"restored {site / 'executorch' / first}\n" in reverted.stdout
    assert reverted.stdout.count("restored ") == 1, reverted.stdout
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    assert stale(site) == []
    assert_only_targets_changed(tmp_path, site, before, "stock", may_vanish=cached)
    assert bytecode_of_targets(tmp_path, site) == []


def test_killed_at_every_step_never_leaves_stale_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytecode goes before the rename: a kill between leaves the old
    source without bytecode, never a new source with old trusted bytecode."""
    step = 0
    while True:
        step += 1
        top = tmp_path / str(step)
        site = make_site(top / "site")
        patch_in_place(site)
        compile_site(site)
        result = cli(site, "revert", env={FAULT: f"step:{step}:KILL"})
        assert stale(site) == [], step
        if result.returncode == 0:
            break
        assert result.returncode == -signal.SIGKILL, result.stderr
        states = {
            rel: (
                "stock"
                if (site / "executorch" / rel).read_bytes() == STOCK[rel]
                else "patched"
            )
            for rel in TARGETS
        }
        assert loaded(site, monkeypatch) == states, step
        again = cli(site, "revert")
        assert again.returncode == 0, again.stderr
        assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    # Per file: temporary file created, complete, bytecode removed, renamed.
    assert step == 4 * len(TARGETS) + 1, step


@pytest.mark.parametrize("link", ["folder", "file"])
def test_refuses_linked_bytecode(tmp_path: Path, link: str) -> None:
    """A link in the bytecode's place is neither followed nor removed."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    compile_site(site)
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = site / "executorch/exir/emit/__pycache__"
    if link == "folder":
        os.rename(cache, outside / "__pycache__")
        cache.symlink_to(outside / "__pycache__")
        reason = "folder exir/emit/__pycache__ is a symbolic link"
    else:
        (pyc,) = cache.glob("_emitter.*.pyc")
        os.rename(pyc, outside / pyc.name)
        pyc.symlink_to(outside / pyc.name)
        reason = f"exir/emit/__pycache__/{pyc.name} is a symbolic link"
    before = snapshot(tmp_path)
    one_line_error(cli(site, "revert"), reason, "Nothing was changed")
    assert snapshot(tmp_path) == before


# Issue 25, case 5: revert gives the tree back as pip left it, whatever an
# earlier version's apply in place kept of it: the bytecode that pip compiled
# (and lists in RECORD), extended attributes, and the modification times of
# files and folders.

OLD = 1_700_000_000_123_456_789  # ns: a time that "now" never is


def full_snapshot(top: Path) -> Dict[str, tuple]:
    """Every file, link and folder under ``top``: its bytes (hash), mode,
    owner, modification time (ns) and extended attributes."""
    result = {}
    for path in sorted(top.rglob("*")):
        st = path.lstat()
        if path.is_symlink():
            content = "-> " + os.readlink(path)
        elif path.is_dir():
            content = "dir"
        else:
            content = sha(path.read_bytes())
        attrs = (
            tuple(
                sorted(
                    (n, os.getxattr(path, n, follow_symlinks=False))
                    for n in os.listxattr(path, follow_symlinks=False)
                )
            )
            if not path.is_symlink()
            else ()
        )
        result[str(path.relative_to(top))] = (
            content,
            st.st_mode,
            st.st_uid,
            st.st_gid,
            st.st_mtime_ns,
            attrs,
        )
    return result


def _as_pip_installs(site: Path, mode: str) -> None:
    """Sources with install-time mtimes, bytecode compiled from them and
    listed in RECORD, folders' times settled: as pip leaves a wheel."""
    package = site / "executorch"
    for path in package.rglob("*.py"):
        os.utime(path, ns=(OLD, OLD))
    compile_site(site, mode)
    record = next(site.glob("*.dist-info")) / "RECORD"
    pycs = sorted(p.relative_to(site) for p in package.rglob("*.pyc"))
    record.write_text(record.read_text() + "".join(f"{p},,\n" for p in pycs))
    for path in [*package.rglob("*.pyc"), *package.rglob("*"), package]:
        if path.is_dir() or path.suffix == ".pyc":
            os.utime(path, ns=(OLD, OLD + 1))


def _patch_as_an_earlier_apply_did(site: Path) -> None:
    """The patched text written into each target in place, which keeps the
    file's inode (its owner, mode and extended attributes) and, as that apply
    did, its modification time; the folders gain or lose no name."""
    for rel in TARGETS:
        path = site / "executorch" / rel
        st = path.stat()
        path.write_bytes(PATCHED[rel])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("mode", ["timestamp", "checked-hash"])
def test_revert_gives_back_bytecode_xattrs_and_times(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site(tmp_path / "site")
    _as_pip_installs(site, mode)
    emitter = site / "executorch" / EMITTER
    try:
        os.setxattr(emitter, "user.origin", b"wheel-1.5.1")
    except OSError as e:
        pytest.skip(f"no user extended attributes here: {e}")
    before = full_snapshot(tmp_path)
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    _patch_as_an_earlier_apply_did(site)
    # Python rejects the stock text's bytecode for the patched text.
    assert loaded(site, monkeypatch) == {rel: "patched" for rel in TARGETS}
    patched = full_snapshot(tmp_path)
    changed = sorted(k for k in before if before[k] != patched[k])
    assert changed == sorted(str(Path("site/executorch") / r) for r in TARGETS)

    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert "removed bytecode" not in reverted.stdout, reverted.stdout
    assert reverted.stdout.count("restored ") == len(TARGETS), reverted.stdout
    assert os.getxattr(emitter, "user.origin") == b"wheel-1.5.1"
    assert emitter.stat().st_mtime_ns == OLD
    assert full_snapshot(tmp_path) == before
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}


def _pyc(magic: int, source: bytes, flags: int = 1) -> bytes:
    """The header of a hash-based .pyc that a Python whose magic number is
    ``magic`` writes for ``source`` (and an empty code object's worth)."""
    raw = magic.to_bytes(2, "little") + b"\r\n"
    key = int.from_bytes(raw, "little")
    return raw + flags.to_bytes(4, "little") + _imp.source_hash(key, source) + b"\0"


def test_another_pythons_valid_unchecked_hash_bytecode_is_not_stale(
    tmp_path: Path,
) -> None:
    """Case 9: a tree shared by two Pythons: 3.12's and 3.13's unchecked-hash
    bytecode of the stock emitter matches it (checked with their own keys),
    so revert does not call it stale and keeps it. One of other bytes is
    stale; one of a Python whose hash cannot be checked here (3.10) may be:
    revert, writing back another file that an earlier version patched in
    place, removes both and names each."""
    site = make_site(tmp_path / "site")
    other = next(rel for rel in TARGETS if rel != EMITTER)
    patch_in_place(site, [other])
    cache = site / "executorch/exir/emit/__pycache__"
    cache.mkdir()
    valid = {
        cache / "_emitter.cpython-312.pyc": _pyc(3531, STOCK[EMITTER]),
        cache / "_emitter.cpython-313.pyc": _pyc(3571, STOCK[EMITTER]),
    }
    stale_one = cache / "_emitter.cpython-312.opt-1.pyc"
    older = cache / "_emitter.cpython-310.pyc"
    for path, data in valid.items():
        path.write_bytes(data)
    stale_one.write_bytes(_pyc(3531, b"other text"))
    older.write_bytes(_pyc(3439, b"other text"))
    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert f"restored {site / 'executorch' / other}\n" in reverted.stdout
    assert sorted(
        re.findall(r"^removed stale bytecode (.*)$", reverted.stdout, re.M)
    ) == sorted([str(stale_one), str(older)]), reverted.stdout
    assert sorted(cache.iterdir()) == sorted(valid), reverted.stdout
    assert all(path.read_bytes() == data for path, data in valid.items())


def test_which_kept_bytecode_python_could_run_instead() -> None:
    """The rule behind keeping bytecode (case 5): a replaced file keeps its
    modification time, so a timestamp .pyc of the old text is rejected by
    its size, unless old and new have the same size: then it goes. A
    checked-hash one is always checked; an unchecked-hash one goes unless it
    is the new text's."""
    from executorch_device_guard.installation import bytecode

    magic = importlib.util.MAGIC_NUMBER
    mtime_ns = OLD
    seconds = (OLD // 10**9).to_bytes(4, "little")

    def timestamp(source: bytes) -> bytes:
        return magic + b"\0\0\0\0" + seconds + len(source).to_bytes(4, "little")

    def hashed(source: bytes, flags: int) -> bytes:
        return magic + flags.to_bytes(4, "little") + importlib.util.source_hash(source)

    old, longer, same_size = b"a = 1\n", b"a = 10\n", b"a = 2\n"
    assert not bytecode.runs_instead(timestamp(old), longer, mtime_ns, old)
    assert bytecode.runs_instead(timestamp(old), same_size, mtime_ns, old)
    # Compiled from the new text by an earlier run: sizes differ, it stays.
    assert not bytecode.runs_instead(timestamp(longer), longer, mtime_ns + 1, old)
    assert not bytecode.runs_instead(hashed(old, 3), longer, mtime_ns, old)
    assert bytecode.runs_instead(hashed(old, 1), longer, mtime_ns, old)
    assert not bytecode.runs_instead(hashed(longer, 1), longer, mtime_ns, old)
