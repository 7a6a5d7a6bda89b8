# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply and revert with cached bytecode in the package.

An unchecked-hash ``.pyc`` (``compileall --invalidation-mode unchecked-hash``,
as Docker images and Bazel's rules_python build them) is loaded without
looking at the source: unless ``apply`` removes it, Python keeps running the
stock code of a patched file. Each test asks Python's own source loader which
code it would run for each target, and checks by hashing that nothing else
changed.
"""

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
def test_apply_and_revert_run_the_new_code(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site(tmp_path / "site")
    compile_site(site, mode, optimize=(0, 1))
    before = snapshot(tmp_path)
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    cached = bytecode_of_targets(tmp_path, site)
    assert len(cached) == 2 * len(TARGETS)

    applied = cli(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert loaded(site, monkeypatch) == {rel: "patched" for rel in TARGETS}
    # Only the targets' bytecode went; version.py's stays, byte for byte.
    assert_only_targets_changed(tmp_path, site, before, "patched", may_vanish=cached)
    assert re.search(r"version\.cpython-\d+\.pyc", str(snapshot(tmp_path)))
    status = cli(site, "status")
    assert status.stdout.endswith("Patched. `revert` restores the stock files.\n")

    compile_site(site, mode)  # as a Docker image built after apply would
    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    assert_only_targets_changed(tmp_path, site, before, "stock", may_vanish=cached)


def test_status_flags_stale_bytecode_and_apply_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an earlier version left it: patched sources, stock bytecode trusted."""
    site = make_site(tmp_path / "site")
    compile_site(site)
    for rel in TARGETS:
        (site / "executorch" / rel).write_bytes(PATCHED[rel])
    assert loaded(site, monkeypatch) == {rel: "stock" for rel in TARGETS}
    before = snapshot(tmp_path)
    cached = bytecode_of_targets(tmp_path, site)

    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    pyc = re.escape("exir/emit/__pycache__/_emitter.") + r"cpython-\d+\.pyc"
    assert re.search(
        r"  patched +exir/emit/_emitter\.py \(form: upstream; Python runs other "
        r"code from its "
        f"unchecked-hash bytecode {pyc}\\)\n",
        status.stdout,
    ), status.stdout
    assert (
        f"{len(TARGETS)} file(s) of unchecked-hash bytecode do not match their "
        "source" in status.stdout
    )

    applied = cli(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count("removed stale bytecode ") == len(TARGETS)
    assert "already applied" in applied.stdout
    assert loaded(site, monkeypatch) == {rel: "patched" for rel in TARGETS}
    assert_only_targets_changed(tmp_path, site, before, "patched", may_vanish=cached)
    assert "bytecode" not in cli(site, "status").stdout


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_killed_at_every_step_never_leaves_stale_bytecode(
    tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytecode goes before the rename: a kill between leaves the old
    source without bytecode, never a new source with old trusted bytecode."""
    step = 0
    while True:
        step += 1
        top = tmp_path / str(step)
        site = make_site(top / "site")
        if command == "revert":
            assert cli(site, "apply").returncode == 0
        compile_site(site)
        result = cli(site, command, env={FAULT: f"step:{step}:KILL"})
        assert stale(site) == [], (command, step)
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
        assert loaded(site, monkeypatch) == states, (command, step)
        again = cli(site, command)
        assert again.returncode == 0, again.stderr
        goal = "patched" if command == "apply" else "stock"
        assert loaded(site, monkeypatch) == {rel: goal for rel in TARGETS}
    # Per file: temporary file created, complete, bytecode removed, renamed.
    assert step == 4 * len(TARGETS) + 1, step


@pytest.mark.parametrize("link", ["folder", "file"])
def test_refuses_linked_bytecode(tmp_path: Path, link: str) -> None:
    """A link in the bytecode's place is neither followed nor removed."""
    site = make_site(tmp_path / "site")
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
    for command in ("apply", "revert"):
        one_line_error(cli(site, command), reason, "Nothing was changed")
    assert reason in cli(site, "status").stdout
    assert snapshot(tmp_path) == before
