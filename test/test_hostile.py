# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Nothing on disk can steer a write outside the installed package.

Symbolic links inside the package are refused, never followed, and the state
file of versions up to 0.1.0 is never read, whatever it says: each test plants
the hostile file, runs the CLI, and checks by hashing that everything outside
the package is byte-identical and the package ends stock or fully patched.
"""

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from sites import (
    assert_only_targets_changed,
    cli,
    make_site,
    one_line_error,
    PATCHED,
    sha,
    snapshot,
    STOCK,
    TARGETS,
)

EMITTER = "exir/emit/_emitter.py"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path / "site")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the package, with a file an attacker would like changed."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("root-only secret\n")
    return folder


def test_refuses_a_symlinked_folder(tmp_path: Path, site: Path, outside: Path):
    emit = site / "executorch" / "exir" / "emit"
    shutil.move(emit, outside / "emit")
    emit.symlink_to(outside / "emit")
    before = snapshot(tmp_path)
    for command in ("apply", "revert"):
        one_line_error(
            cli(site, command),
            "(folder exir/emit is a symbolic link)",
            "Nothing was changed",
        )
    status = cli(site, "status").stdout
    assert re.search(
        r"^  unknown +exir/emit/_emitter\.py \(folder exir/emit is a symbolic link\)",
        status,
        re.M,
    ), status
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_refuses_a_file_symlinked_outside(
    tmp_path: Path, site: Path, outside: Path, command: str
):
    data = STOCK if command == "apply" else PATCHED
    for rel in TARGETS:
        (site / "executorch" / rel).write_bytes(data[rel])
    target = site / "executorch" / EMITTER
    shutil.move(target, outside / "_emitter.py")
    target.symlink_to(outside / "_emitter.py")
    before = snapshot(tmp_path)
    one_line_error(cli(site, command), "(exir/emit/_emitter.py is a symbolic link)")
    assert snapshot(tmp_path) == before


def test_refuses_a_symlinked_package(tmp_path: Path, site: Path, outside: Path):
    shutil.move(site / "executorch", outside / "executorch")
    (site / "executorch").symlink_to(outside / "executorch")
    before = snapshot(tmp_path)
    one_line_error(cli(site, "apply"), "is a symbolic link", "Reinstall ExecuTorch")
    assert snapshot(tmp_path) == before


def _hostile_state(site: Path, outside: Path) -> None:
    """A 0.1.0 state file whose entries point out of the package, and one whose
    'original' was tampered with, each with the hash that 0.1.0 checked."""
    victim = (outside / "victim.txt").read_bytes()
    depth = len((site / "executorch").relative_to("/").parts)
    entries = {
        "../" * depth + str(outside / "victim.txt")[1:]: victim,
        str(outside / "victim.txt"): victim,
        EMITTER: (site / "executorch" / EMITTER).read_bytes(),
    }
    state = {
        "executorch_version": "1.5.1",
        "files": {
            rel: {
                "original": "pwned\n",
                "original_sha256": sha(b"pwned\n"),
                "patched_sha256": sha(current),
            }
            for rel, current in entries.items()
        },
    }
    (site / "executorch" / ".device_guard.json").write_text(json.dumps(state))


@pytest.mark.parametrize(
    "plant",
    [
        _hostile_state,
        lambda site, outside: (site / "executorch/.device_guard.json").write_bytes(
            b"\xff{ not json"
        ),
    ],
    ids=["traversal-absolute-tampered", "corrupt"],
)
def test_an_old_state_file_is_never_trusted(
    tmp_path: Path, site: Path, outside: Path, plant
):
    state = site / "executorch" / ".device_guard.json"
    gone = [str(state.relative_to(tmp_path))]
    assert cli(site, "apply").returncode == 0
    plant(site, outside)
    before = snapshot(tmp_path)
    result = cli(site, "revert")
    assert result.returncode == 0, result.stderr
    assert_only_targets_changed(tmp_path, site, before, "stock", may_vanish=gone)
    assert f"removed leftover {state}" in result.stdout
    assert not state.exists()

    plant(site, outside)
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert ".device_guard.json (from an earlier version) is ignored" in status.stdout
    result = cli(site, "apply")
    assert result.returncode == 0, result.stderr
    assert_only_targets_changed(tmp_path, site, before, "patched", may_vanish=gone)
    assert (outside / "victim.txt").read_text() == "root-only secret\n"


def test_an_old_state_file_that_is_a_link_is_left_alone(
    tmp_path: Path, site: Path, outside: Path
):
    state = site / "executorch" / ".device_guard.json"
    state.symlink_to(outside / "victim.txt")
    before = snapshot(tmp_path)
    for command in ("apply", "revert"):
        assert cli(site, command).returncode == 0
    assert_only_targets_changed(tmp_path, site, before, "stock")
    assert os.readlink(state) == str(outside / "victim.txt")


def test_the_same_refusals_without_dir_fd_support(
    tmp_path: Path, site: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
):
    """Where the OS cannot open folders (Windows), paths are checked instead."""
    from executorch_device_guard import confined, installed
    from executorch_device_guard.errors import GuardError

    monkeypatch.setattr(confined, "_DIR_FD", False)
    root = site / "executorch"
    before = snapshot(tmp_path)
    installed.apply(root, TARGETS)
    assert_only_targets_changed(tmp_path, site, before, "patched")
    installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == before

    emit = root / "exir" / "emit"
    shutil.move(emit, outside / "emit")
    emit.symlink_to(outside / "emit")
    hostile = snapshot(tmp_path)
    with pytest.raises(GuardError, match="folder exir/emit is a symbolic link"):
        installed.apply(root, TARGETS)
    assert snapshot(tmp_path) == hostile
    emit.unlink()
    shutil.move(outside / "emit", emit)
    (emit / "_emitter.py").rename(outside / "_emitter.py")
    (emit / "_emitter.py").symlink_to(outside / "_emitter.py")
    hostile = snapshot(tmp_path)
    with pytest.raises(GuardError, match="_emitter.py is a symbolic link"):
        installed.apply(root, TARGETS)
    assert snapshot(tmp_path) == hostile
    assert installed.status(root, TARGETS)[EMITTER] is installed.FileState.UNKNOWN
    (emit / "_emitter.py").unlink()
    shutil.move(outside / "_emitter.py", emit / "_emitter.py")
    assert snapshot(tmp_path) == before


@pytest.fixture
def shared_site():
    """A site that another user can reach (pytest's tmp_path is private)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root, to run the CLI as another user")
    top = Path(tempfile.mkdtemp(prefix="device-guard-owner-"))
    try:
        top.chmod(0o755)
        site = make_site(top / "site")
        for folder in [site, *(p for p in site.rglob("*") if p.is_dir())]:
            folder.chmod(0o777)  # a folder the other user can write
        probe = cli(site, "--version", wrap=NOBODY)
        if probe.returncode != 0:
            pytest.skip(f"the other user cannot run the tool: {probe.stderr}")
        yield top, site
    finally:
        shutil.rmtree(top)


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _owners(top: Path) -> dict:
    return {str(p): (p.lstat().st_uid, p.lstat().st_gid) for p in top.rglob("*")}


def test_refuses_to_take_over_another_users_file(shared_site) -> None:
    """A non-root user may write the folder, but the files are root's: the
    rename would make them the user's, so the tool refuses."""
    top, site = shared_site
    emitter = site / "executorch" / EMITTER
    emitter.chmod(0o444)
    before, owners = snapshot(top), _owners(top)
    one_line_error(
        cli(site, "apply", wrap=NOBODY),
        f"{emitter} belongs to another user (root, uid 0), not to you (nobody, "
        "uid 65534)",
        "Nothing was changed",
    )
    assert (snapshot(top), _owners(top)) == (before, owners)
    assert cli(site, "apply").returncode == 0  # root keeps owner and mode
    after_apply = _owners(top)
    assert after_apply == owners and emitter.stat().st_mode & 0o777 == 0o444
    one_line_error(cli(site, "revert", wrap=NOBODY), "user (root, uid 0)")
    assert _owners(top) == owners


def test_root_keeps_each_files_owner(tmp_path: Path, site: Path) -> None:
    emitter = site / "executorch" / EMITTER
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.chown(emitter, 1234, 5678)
    emitter.chmod(0o444)
    for command in ("apply", "revert"):
        assert cli(site, command).returncode == 0
        st = emitter.stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (1234, 5678, 0o444)


def test_refuses_another_users_file_anywhere(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal for any user: files owned by someone else (here, by
    pretending to be another user) are not replaced."""
    from executorch_device_guard import installed
    from executorch_device_guard.errors import GuardError

    before = snapshot(tmp_path)
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    refusal = rf"belongs to another user \(.*uid {real}\), not to you"
    with pytest.raises(GuardError, match=refusal):
        installed.apply(site / "executorch", TARGETS)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("state", ["stock", "patched"])
@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_status_says_once_that_planted_bytecode_blocks_apply(
    tmp_path: Path, site: Path, outside: Path, state: str, planted: str
) -> None:
    """The file is stock (or patched), but an entry where its bytecode belongs
    makes apply and revert refuse: status's conclusion says that, and how to
    get past it, in one line, and promises nothing they will not do."""
    if state == "patched":
        assert cli(site, "apply").returncode == 0
    pyc = site / "executorch/exir/emit/__pycache__/_emitter.cpython-311.pyc"
    pyc.parent.mkdir(exist_ok=True)
    if planted == "fifo":
        os.mkfifo(pyc)
        reason = f"{pyc.relative_to(site / 'executorch')} is not a regular file"
    else:
        pyc.symlink_to(outside / "victim.txt")
        reason = f"{pyc.relative_to(site / 'executorch')} is a symbolic link"
    before = snapshot(tmp_path)
    status = cli(site, "status", timeout=30)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert any(
        re.fullmatch(
            rf"  {state} +{re.escape(f'{EMITTER} (form: upstream; {reason})')}", line
        )
        for line in lines
    ), lines
    then = (
        "`apply` patches it."
        if state == "stock"
        else ("`revert` restores the stock files.")
    )
    assert lines[-1] == (
        f"{state.capitalize()}, but apply and revert refuse: {reason}, where a "
        f"module's cached bytecode belongs. Remove it, then {then}"
    ), status.stdout
    assert status.stdout.count("refuse") == 1, status.stdout
    for command in ("apply", "revert"):
        one_line_error(
            cli(site, command, timeout=30),
            reason,
            "removes only plain files in a real __pycache__ folder",
            "Nothing was changed",
        )
    assert snapshot(tmp_path) == before
    pyc.unlink()  # the way out
    command = "apply" if state == "stock" else "revert"
    assert cli(site, command).returncode == 0
    goal = "patched" if state == "stock" else "stock"
    assert_only_targets_changed(
        tmp_path, site, before, goal, may_vanish=[str(pyc.relative_to(tmp_path))]
    )


@pytest.mark.parametrize("command", ["status", "apply", "revert", "run"])
def test_record_that_is_not_utf8_is_one_line(tmp_path: Path, command: str) -> None:
    """The RECORD says which targets the release ships: one that cannot be
    read is refused in one line, and nothing is written."""
    site = make_site(tmp_path / "site")
    record = next(site.glob("*.dist-info")) / "RECORD"
    record.write_bytes(record.read_bytes() + b"executorch/\xff,,\n")
    before = snapshot(tmp_path)
    args = [command] + (
        ["--", sys.executable, "-c", "pass"] if command == "run" else []
    )
    one_line_error(cli(site, *args), f"{record} cannot be read")
    assert snapshot(tmp_path) == before


def test_record_that_omits_a_target_beside_listed_files(tmp_path: Path) -> None:
    """A RECORD that lists the emitter's folder but not the emitter lies: a
    release that ships the folder ships the file. Taking the emitter for not
    shipped would patch the rest and call it done, the emitter still stock."""
    site = make_site(tmp_path / "site")
    (site / "executorch" / "exir" / "emit" / "__init__.py").write_text("")
    record = next(site.glob("*.dist-info")) / "RECORD"
    lines = record.read_text().splitlines(keepends=True)
    record.write_text(
        "".join(line for line in lines if not line.startswith(f"executorch/{EMITTER},"))
        + "executorch/exir/emit/__init__.py,,\n"
    )
    before = snapshot(tmp_path)
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(
        rf"^  unknown +{re.escape(EMITTER)} \(this release's RECORD lists its "
        r"folder but not it\)$",
        status.stdout,
        re.M,
    ), status.stdout
    assert "Some files are neither stock nor patched" in status.stdout
    one_line_error(cli(site, "apply"), f"{site / 'executorch' / EMITTER} is unknown")
    run = cli(site, "run", "--", sys.executable, "-c", "pass")
    one_line_error(run, f"{site / 'executorch' / EMITTER} is unknown")
    assert snapshot(tmp_path) == before
