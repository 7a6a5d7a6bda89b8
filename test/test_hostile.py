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
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import REPO
from sites import (
    assert_only_targets_changed,
    cli,
    FAULT,
    make_site,
    one_line_error,
    patch_in_place,
    PATCHED,
    sha,
    snapshot,
    STOCK,
    TARGETS,
    target_states,
    tool,
    venv_python,
    venv_site,
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
    """Files that an earlier version patched in place, one folder a link out
    of the package: revert refuses to write through it. status says what
    Python runs, which follows the link."""
    patch_in_place(site)
    emit = site / "executorch" / "exir" / "emit"
    shutil.move(emit, outside / "emit")
    emit.symlink_to(outside / "emit")
    before = snapshot(tmp_path)
    one_line_error(
        cli(site, "revert"),
        "(folder exir/emit is a symbolic link)",
        "Nothing was changed",
    )
    status = cli(site, "status").stdout
    assert re.search(
        r"^  patched +exir/emit/_emitter\.py \(form: upstream\)$", status, re.M
    ), status
    assert f"{len(TARGETS)} file(s) were patched in place" in status, status
    assert snapshot(tmp_path) == before


def test_refuses_a_file_symlinked_outside(tmp_path: Path, site: Path, outside: Path):
    patch_in_place(site)
    target = site / "executorch" / EMITTER
    shutil.move(target, outside / "_emitter.py")
    target.symlink_to(outside / "_emitter.py")
    before = snapshot(tmp_path)
    one_line_error(cli(site, "revert"), "(exir/emit/_emitter.py is a symbolic link)")
    assert snapshot(tmp_path) == before


def test_a_symlinked_package_is_refused_by_revert_and_served_by_run(tmp_path: Path, site: Path, outside: Path):
    """revert writes no file through a symbolic link; run writes nothing, and
    the import hook serves what Python loads through it."""
    patch_in_place(site)
    shutil.move(site / "executorch", outside / "executorch")
    (site / "executorch").symlink_to(outside / "executorch")
    before = snapshot(tmp_path)
    one_line_error(cli(site, "revert"), "is a symbolic link", "Reinstall ExecuTorch")
    ran = cli(site, *_run_args("run"))
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
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
    patch_in_place(site)
    plant(site, outside)
    before = snapshot(tmp_path)
    result = cli(site, "revert")
    assert result.returncode == 0, result.stderr
    assert_only_targets_changed(tmp_path, site, before, "stock", may_vanish=gone)
    assert f"removed leftover {state}" in result.stdout
    assert not state.exists()

    plant(site, outside)
    planted = snapshot(tmp_path)
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    for rel in TARGETS:
        assert re.search(
            rf"^  stock +{re.escape(rel)} \(form: \S+\)$", status.stdout, re.M
        ), rel
    assert snapshot(tmp_path) == planted
    assert (outside / "victim.txt").read_text() == "root-only secret\n"


def test_an_old_state_file_that_is_a_link_is_left_alone(
    tmp_path: Path, site: Path, outside: Path
):
    patch_in_place(site)
    state = site / "executorch" / ".device_guard.json"
    state.symlink_to(outside / "victim.txt")
    before = snapshot(tmp_path)
    for command in ("status", "revert"):
        assert cli(site, command).returncode == 0
    assert_only_targets_changed(tmp_path, site, before, "stock")
    assert os.readlink(state) == str(outside / "victim.txt")


def test_the_same_refusals_without_dir_fd_support(
    tmp_path: Path, site: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
):
    """Where the OS cannot open folders (Windows), paths are checked instead."""
    from executorch_device_guard.installation import confined, installed
    from executorch_device_guard.errors import GuardError

    monkeypatch.setattr(confined, "_DIR_FD", False)
    root = site / "executorch"
    before = snapshot(tmp_path)
    patch_in_place(site)
    installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == before

    patch_in_place(site)
    emit = root / "exir" / "emit"
    shutil.move(emit, outside / "emit")
    emit.symlink_to(outside / "emit")
    hostile = snapshot(tmp_path)
    with pytest.raises(GuardError, match="folder exir/emit is a symbolic link"):
        installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == hostile
    emit.unlink()
    shutil.move(outside / "emit", emit)
    (emit / "_emitter.py").rename(outside / "_emitter.py")
    (emit / "_emitter.py").symlink_to(outside / "_emitter.py")
    hostile = snapshot(tmp_path)
    with pytest.raises(GuardError, match="_emitter.py is a symbolic link"):
        installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == hostile
    assert installed.status(root, TARGETS)[EMITTER] is installed.FileState.UNKNOWN
    (emit / "_emitter.py").unlink()
    shutil.move(outside / "_emitter.py", emit / "_emitter.py")
    installed.revert(root, TARGETS)
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
    """A non-root user may write the folder, but the files (patched in place
    by an earlier version) are root's: the rename would make them the
    user's, so revert refuses."""
    top, site = shared_site
    patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    emitter.chmod(0o444)
    before, owners = snapshot(top), _owners(top)
    one_line_error(
        cli(site, "revert", wrap=NOBODY),
        f"{emitter} belongs to another user (root, uid 0), not to you (nobody, "
        "uid 65534)",
        "Nothing was changed",
    )
    assert (snapshot(top), _owners(top)) == (before, owners)
    assert cli(site, "revert").returncode == 0  # root keeps owner and mode
    assert _owners(top) == owners and emitter.stat().st_mode & 0o777 == 0o444
    assert set(target_states(site).values()) == {"stock"}


def test_root_keeps_each_files_owner(tmp_path: Path, site: Path) -> None:
    emitter = site / "executorch" / EMITTER
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    patch_in_place(site)
    os.chown(emitter, 1234, 5678)
    emitter.chmod(0o444)
    assert cli(site, "revert").returncode == 0
    assert emitter.read_bytes() == STOCK[EMITTER]
    st = emitter.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (1234, 5678, 0o444)


def test_refuses_another_users_file_anywhere(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same refusal for any user: files owned by someone else (here, by
    pretending to be another user) are not replaced."""
    from executorch_device_guard.installation import installed
    from executorch_device_guard.errors import GuardError

    patch_in_place(site)
    before = snapshot(tmp_path)
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    refusal = rf"belongs to another user \(.*uid {real}\), not to you"
    with pytest.raises(GuardError, match=refusal):
        installed.revert(site / "executorch", TARGETS)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("planted", ["fifo", "link"])
def test_planted_bytecode_blocks_revert_in_one_line(
    tmp_path: Path, site: Path, outside: Path, planted: str
) -> None:
    """The files were patched in place by an earlier version, but an entry
    where the emitter's bytecode belongs makes revert refuse, in one line
    that says how to get past it. status reads the files only: it does not
    wait on the FIFO, and says what Python runs."""
    patch_in_place(site)
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
    assert re.search(
        rf"^  patched +{re.escape(EMITTER)} \(form: upstream\)$", status.stdout, re.M
    )
    assert f"{len(TARGETS)} file(s) were patched in place" in status.stdout
    one_line_error(
        cli(site, "revert", timeout=30),
        reason,
        "removes only plain files in a real __pycache__ folder",
        "Nothing was changed",
    )
    assert snapshot(tmp_path) == before
    pyc.unlink()  # the way out
    assert cli(site, "revert").returncode == 0
    assert_only_targets_changed(
        tmp_path, site, before, "stock", may_vanish=[str(pyc.relative_to(tmp_path))]
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
    shipped would serve the fix to the rest and call it done, the emitter
    loaded stock."""
    site = venv_site(tmp_path / "venv")
    (site / "executorch" / "exir" / "emit" / "__init__.py").write_text("")
    record = next(site.glob("*.dist-info")) / "RECORD"
    lines = record.read_text().splitlines(keepends=True)
    record.write_text(
        "".join(line for line in lines if not line.startswith(f"executorch/{EMITTER},"))
        + "executorch/exir/emit/__init__.py,,\n"
    )
    _served_all_the_same(tmp_path, site)


def _served_all_the_same(tmp_path: Path, site: Path) -> None:
    """In ``venv_site``'s venv, whose RECORD leaves the emitter out: status
    shows it stock, as the import hook finds it, never "not shipped"; apply
    serves it the fix, and so does run; nothing under ``tmp_path`` is left
    changed."""
    emitter = site / "executorch" / EMITTER
    before = snapshot(tmp_path)
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(
        rf"^  stock +{re.escape(EMITTER)} \(form: upstream\)$", status.stdout, re.M
    ), status.stdout
    assert "apply refuses" not in status.stdout, status.stdout
    applied = tool(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert f"served with the fix: {emitter}\n" in applied.stdout, applied.stdout
    assert tool(site, "revert").returncode == 0
    name = "executorch.exir.emit._emitter"
    code = (
        f"import importlib.util, sys; importlib.util.find_spec({name!r}); "
        f"print([f.served[{name!r}] for f in sys.meta_path if hasattr(f, 'served')])"
    )
    ran = tool(site, "run", "--", str(venv_python(site)), "-c", code)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "[('changed', '')]\n", "")
    assert snapshot(tmp_path) == before


# Issue 25: a hostile test of ddcd504 (../shared/reports/hostile-ddcd504.md).
# Each test below failed on ddcd504; docs/hostile.md has the table.


def _record(site: Path) -> Path:
    return next(site.glob("*.dist-info")) / "RECORD"


def _run_args(command: str) -> list:
    return [command] + (
        ["--", sys.executable, "-c", "pass"] if command == "run" else []
    )


def _refused(tmp_path: Path, site: Path, line: str, error: str) -> None:
    """In ``venv_site``'s venv: status shows a line that matches ``line`` (a
    regular expression), an unknown file, and says that apply refuses; apply
    refuses in one line naming that file and why, as status does (or, where
    an earlier version patched files in place, asks for revert first);
    revert writes nothing back (it refuses in one line holding ``error``
    where files were patched in place); run refuses in one line naming that
    file and why, as status does; nothing under ``tmp_path`` changed."""
    before = snapshot(tmp_path)
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    found = re.search(line, status.stdout, re.M)
    assert found, status.stdout
    (shown,) = [x for x in status.stdout.splitlines() if found.group(0) in x]
    unknown = re.fullmatch(r"  unknown +(\S+) \((.*)\)", shown)
    assert unknown, shown
    assert "Some files load without the fix (above), so apply refuses" in (
        status.stdout
    )
    assert "On:" not in status.stdout
    legacy = "were patched in place by an earlier version" in status.stdout
    rel, why = unknown.groups()
    one_line_error(
        tool(site, "apply"),
        (
            "were patched in place by an earlier version"
            if legacy
            else f"{site / 'executorch' / rel} would load without the fix (unknown: "
            f"{why}), so apply refuses"
        ),
        "Nothing was changed",
    )
    reverted = tool(site, "revert")
    if legacy:
        one_line_error(reverted, error)
    else:
        assert reverted.returncode == 0, reverted.stderr
        assert reverted.stdout == f"nothing to revert in {site / 'executorch'}\n"
    one_line_error(
        tool(site, *_run_args("run")),
        f"{site / 'executorch' / rel} is unknown ({why}): it would load without "
        "the fix. Nothing was run.",
    )
    assert snapshot(tmp_path) == before


def test_an_edit_made_while_revert_writes_is_kept(tmp_path: Path, site: Path) -> None:
    """Case 1: another program appends to the emitter (patched in place by
    an earlier version) while revert has its stock text written beside it:
    the rename would lose the edit, so revert stops."""
    import subprocess

    patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env[FAULT] = "delay:1.5"  # every write step sleeps: the window is wide
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "revert"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(emitter.parent.glob("._emitter.py.device-guard.*.tmp")):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        with open(emitter, "ab") as f:
            f.write(b"# someone else's edit\n")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    edited = PATCHED[EMITTER] + b"# someone else's edit\n"
    assert emitter.read_bytes() == edited
    one_line_error(
        subprocess.CompletedProcess([], proc.returncode, out, err),
        f"{emitter} changed while this command ran (another program wrote it); "
        "what it wrote is kept",
    )
    assert "0 of " in err
    assert not list(emitter.parent.glob("*.tmp"))
    for rel in TARGETS:
        if rel != EMITTER:
            assert (site / "executorch" / rel).read_bytes() == PATCHED[rel], rel


def test_an_edit_in_the_instant_of_the_rename_is_put_back(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case 1, the narrowest window: a write to the old file between the
    last comparison and the rename lands in a file that the rename takes
    away. revert sees it on the old file and puts what it holds back."""
    from executorch_device_guard.installation import installed
    from executorch_device_guard.errors import GuardError

    patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    real = os.replace

    def replace_after_a_write(src, dst, **kwargs):
        if str(dst).endswith("_emitter.py"):
            with open(emitter, "ab") as f:
                f.write(b"# written in the instant\n")
        return real(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace_after_a_write)
    with pytest.raises(GuardError, match="changed while this command ran"):
        installed.revert(site / "executorch", TARGETS)
    monkeypatch.undo()
    assert emitter.read_bytes() == PATCHED[EMITTER] + b"# written in the instant\n"
    assert not list(emitter.parent.glob("*.tmp"))


def test_a_record_that_omits_the_emitters_folder_still_gets_the_fix(tmp_path: Path) -> None:
    """Case 2: RECORD lists nothing under exir/emit/, but the emitter is
    there: RECORD and the disk disagree, so nothing is taken for 'not
    shipped'. The import hook serves the emitter the fix as it finds it."""
    site = venv_site(tmp_path / "venv")
    record = _record(site)
    record.write_text(
        "".join(
            line
            for line in record.read_text().splitlines(keepends=True)
            if not line.startswith("executorch/exir/emit/")
        )
    )
    _served_all_the_same(tmp_path, site)


def test_record_that_omits_the_emitter_after_apply_is_refused_by_revert(
    tmp_path: Path, site: Path
) -> None:
    """Case 2, the mirror image: patched in place, then RECORD loses the
    emitter; revert must not leave it patched and restore the rest. Without
    RECORD's hash, nothing shows that an earlier version patched it: status
    calls it fixed, the rest patched in place."""
    patch_in_place(site)
    record = _record(site)
    record.write_text(
        "".join(
            line
            for line in record.read_text().splitlines(keepends=True)
            if not line.startswith(f"executorch/{EMITTER},")
        )
    )
    before = snapshot(tmp_path)
    one_line_error(cli(site, "revert"), f"{site / 'executorch' / EMITTER} is unknown")
    status = cli(site, "status").stdout
    assert re.search(rf"^  fixed +{re.escape(EMITTER)} ", status, re.M), status
    assert f"{len(TARGETS) - 1} file(s) were patched in place" in status, status
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("spelling", ["exir/x/../emit/", "./exir/emit/", "exir//emit/"])
def test_record_paths_are_normalized(tmp_path: Path, site: Path, spelling: str) -> None:
    """Case 2: RECORD spells the emitter's path another way: it is still the
    emitter, and revert restores it with the rest (patched in place by an
    earlier version)."""
    record = _record(site)
    record.write_text(
        record.read_text().replace("executorch/exir/emit/", f"executorch/{spelling}")
    )
    assert f"executorch/{spelling}_emitter.py" in record.read_text()
    before = snapshot(tmp_path)
    patch_in_place(site)
    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert f"restored {site / 'executorch' / EMITTER}\n" in reverted.stdout
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["status", "apply", "revert", "run"])
def test_a_second_dist_info_is_refused(
    tmp_path: Path, site: Path, command: str
) -> None:
    """Case 3: a stale executorch-*.dist-info of another release beside the
    real one: which release the package is cannot be told, so every command
    refuses rather than guess (on ddcd504 the stale one set the release)."""
    stale = site / "executorch-1.4.1.dist-info"
    shutil.copytree(site / "executorch-1.5.1.dist-info", stale)
    (stale / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: executorch\nVersion: 1.4.1\n"
    )
    before = snapshot(tmp_path)
    one_line_error(
        cli(site, *_run_args(command)),
        f"{site} holds 2 executorch distributions (executorch-1.4.1.dist-info and "
        "executorch-1.5.1.dist-info)",
        "Nothing was changed",
    )
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("how", ["version", "version-and-folder"])
@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_a_version_that_disagrees_with_the_files_is_refused(
    tmp_path: Path, command: str, how: str
) -> None:
    """Case 3: the release decides which backports apply, so a Version that
    the files do not bear out is refused: edited in METADATA (its folder
    says otherwise), or edited with the folder renamed (RECORD's hash of
    METADATA says otherwise)."""
    site = make_site(tmp_path / "site")
    dist = site / "executorch-1.5.1.dist-info"
    metadata = dist / "METADATA"
    if how == "version":
        metadata.write_text(metadata.read_text().replace("1.5.1", "1.4.1"))
        needle = "says Version '1.4.1', but its folder is named for '1.5.1'"
    elif how == "version-and-folder":
        metadata.write_text(metadata.read_text().replace("1.5.1", "1.4.1"))
        dist = dist.rename(site / "executorch-1.4.1.dist-info")
        record = dist / "RECORD"
        record.write_text(
            record.read_text().replace("1.5.1.dist-info", "1.4.1.dist-info")
        )
        needle = "is not the file that"
    before = snapshot(tmp_path)
    one_line_error(cli(site, *_run_args(command)), needle)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_metadata_without_a_version_is_refused(
    tmp_path: Path, site: Path, command: str
) -> None:
    """Beyond the report: the release decides which backports apply, so a
    METADATA without Version (or none at all) is refused, not taken for
    'every release'."""
    metadata = next(site.glob("*.dist-info")) / "METADATA"
    metadata.unlink()
    before = snapshot(tmp_path)
    one_line_error(cli(site, *_run_args(command)), f"{metadata} gives no Version")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("what", ["RECORD", "METADATA"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_a_fifo_or_a_device_as_metadata_is_one_line(
    tmp_path: Path, site: Path, what: str, kind: str, command: str
) -> None:
    """Case 7: a FIFO as RECORD or METADATA made status wait forever, a link
    to /dev/zero read until memory ran out. Both are refused in one line."""
    path = next(site.glob("*.dist-info")) / what
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    before = snapshot(tmp_path)
    result = cli(site, *_run_args(command), wrap=LIMITED, timeout=60)
    one_line_error(result, str(path), "Nothing was changed")
    assert snapshot(tmp_path) == before


# Memory for the CLI: 2 GiB of address space, as `ulimit -v` gives.
LIMITED = [
    sys.executable,
    "-c",
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, "
    "2 << 30)); os.execv(sys.argv[1], sys.argv[1:])",
]


def _in_venv(site: Path, *argv: str, wrap: List[str] = ()):
    """``python ARGV`` (under ``wrap``) with the Python of ``venv_site``'s
    venv, started as ``tool`` starts it: no PYTHONPATH."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", FAULT)}
    return subprocess.run(
        [*wrap, str(site.parents[2] / "bin" / "python"), *argv],
        env=env,
        cwd=site.parents[3],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_a_huge_sparse_target_is_not_read(tmp_path: Path, command: str) -> None:
    """Case 7: a 6 GB sparse emitter is larger than any source file can be:
    unknown, never read into memory (apply in a venv, where it would turn
    the fix on)."""
    if command == "apply":
        site = venv_site(tmp_path / "venv")
    else:
        site = make_site(tmp_path / "site")
    emitter = site / "executorch" / EMITTER
    os.truncate(emitter, 6 << 30)
    before = snapshot_sizes(tmp_path)
    if command == "apply":
        result = _in_venv(site, "-m", "executorch_device_guard", "apply", wrap=LIMITED)
    else:
        result = cli(site, *_run_args(command), wrap=LIMITED, timeout=120)
    if command == "status":
        assert result.returncode == 0, result.stderr
        assert re.search(
            rf"  unknown +{re.escape(EMITTER)} \({re.escape(EMITTER)} is "
            rf"{6 << 30} bytes, more than any file it can be\)",
            result.stdout,
        ), result.stdout
    else:
        one_line_error(result, f"{EMITTER} is {6 << 30} bytes")
    assert snapshot_sizes(tmp_path) == before


# Imports the CLI, then leaves it 16 MiB more address space than it holds.
_SQUEEZED = """
import re, resource, sys
from executorch_device_guard import cli, patchset
from executorch_device_guard.installation import confined, installed, lock
with open("/proc/self/status") as f:
    vm = int(re.search(r"VmSize:\\s+(\\d+) kB", f.read()).group(1)) << 10
resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 20), vm + (16 << 20)))
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["status", "apply", "revert"])
def test_running_out_of_memory_is_one_line(tmp_path: Path, command: str) -> None:
    """A `ulimit -v` too small to read a 60 MiB emitter (under the size any
    target may have) is one line, exit 2, not a MemoryError traceback
    (apply in a venv, where it would turn the fix on)."""
    if command == "apply":
        site = venv_site(tmp_path / "venv")
    else:
        site = make_site(tmp_path / "site")
    emitter = site / "executorch" / EMITTER
    with open(emitter, "ab") as f:
        f.write(b"#" * (60 << 20))
    before = snapshot_sizes(tmp_path)
    if command == "apply":
        result = _in_venv(site, "-c", _SQUEEZED, command)
    else:
        result = cli(site, "-c", _SQUEEZED, command, module=False, timeout=120)
    one_line_error(result, "out of memory")
    assert snapshot_sizes(tmp_path) == before


def snapshot_sizes(top: Path) -> dict:
    """Every file's size and modification time (a 6 GB file is not hashed)."""
    return {
        str(p.relative_to(top)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in sorted(top.rglob("*"))
    }


def test_a_hostile_version_is_quoted_in_the_recovery_command(tmp_path: Path) -> None:
    """Case 9: the recovery command that status (and run's refusal) prints is
    a shell command: a Version with shell syntax (consistent with its folder)
    is quoted."""
    import shlex

    version = "1.5.1;touch pwned #"
    site = make_site(tmp_path / "site", version=version)
    core = site / "executorch" / "devtools/bundled_program/core.py"
    core.write_bytes(core.read_bytes() + b"\xff")  # any unknown file
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    command = status.stdout.splitlines()[-1].split("reinstall ExecuTorch: ", 1)[1]
    assert shlex.split(command) == [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",  # the site is on PYTHONPATH, as pip install --target leaves it
        str(site),
        "--upgrade",
        "--force-reinstall",
        "--no-deps",
        f"executorch=={version}",
    ]
    result = cli(site, *_run_args("run"))
    one_line_error(result)
    assert result.stderr.rstrip().endswith(shlex.quote(f"executorch=={version}"))


def test_a_hard_linked_target_is_replaced_not_written_through(
    tmp_path: Path, site: Path, outside: Path
) -> None:
    """Report §N12 (holds): a target hard-linked to a cache file outside the
    package (uv installs so) is replaced by a new file when revert writes
    back the text an earlier version patched in place; the cache keeps its
    bytes."""
    patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    cache = outside / "_emitter.py"
    os.link(emitter, cache)
    assert cli(site, "revert").returncode == 0
    assert emitter.read_bytes() == STOCK[EMITTER]
    assert cache.read_bytes() == PATCHED[EMITTER]


def test_a_umask_of_077_keeps_modes(tmp_path: Path, site: Path) -> None:
    """Report §N8 (holds): the new file that revert writes gets the old one's
    mode, whatever the umask."""
    patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    emitter.chmod(0o644)
    result = cli(site, "revert", wrap=["sh", "-c", 'umask 077 && exec "$@"', "-"])
    assert result.returncode == 0, result.stderr
    assert emitter.read_bytes() == STOCK[EMITTER]
    assert emitter.stat().st_mode & 0o777 == 0o644


# The second attack (docs/hostile.md): a module that Python imports in place
# of a target, as a package folder or an extension module beside it.
_SHADOWS = {
    "package": "exir/emit/_emitter/__init__.py",
    "extension": "exir/emit/_emitter.cpython-311-x86_64-linux-gnu.so",
}


@pytest.mark.parametrize("first", ["stock", "patched"])
@pytest.mark.parametrize("kind", sorted(_SHADOWS))
def test_a_target_that_python_would_not_import_is_never_patched(
    tmp_path: Path, kind: str, first: str
) -> None:
    """Python imports ``_emitter/`` (or ``_emitter.*.so``) before
    ``_emitter.py``: status names it, the emitter unknown; apply refuses,
    revert writes nothing back, run refuses, each in one line, nothing
    changed."""
    site = venv_site(tmp_path / "venv")
    if first == "patched":
        patch_in_place(site)
    shadow = site / "executorch" / _SHADOWS[kind]
    shadow.parent.mkdir(exist_ok=True)
    shadow.write_bytes(STOCK[EMITTER])
    _refused(
        tmp_path,
        site,
        rf"^  unknown +{re.escape(EMITTER)} \(Python loads {re.escape(str(shadow))} "
        "instead: ",
        f"Python imports {_SHADOWS[kind]} instead of it",
    )


def _compile_into(prefix: Path, source: Path) -> Path:
    """Unchecked-hash bytecode of ``source`` under PYTHONPYCACHEPREFIX, as
    ``compileall`` in an image build leaves it; returns its path."""
    import subprocess

    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode",
            "unchecked-hash",
            str(source),
        ],
        env=env,
        check=True,
    )
    (pyc,) = prefix.rglob("_emitter.*.pyc")
    return pyc


def test_bytecode_under_a_pycache_prefix_is_never_left_to_run_the_old_text(
    tmp_path: Path, site: Path
) -> None:
    """With PYTHONPYCACHEPREFIX, Python keeps bytecode outside the package,
    where the tool writes nothing: revert refuses while an unchecked-hash
    file there, compiled from the text an earlier version patched in place,
    would run instead of the stock text it writes back."""
    patch_in_place(site)
    prefix = tmp_path / "prefix"
    env = {"PYTHONPYCACHEPREFIX": str(prefix)}
    pyc = _compile_into(prefix, site / "executorch" / EMITTER)
    before = snapshot(tmp_path)
    one_line_error(
        cli(site, "revert", env=env), f"Python would run {pyc}", "Nothing was changed"
    )
    assert snapshot(tmp_path) == before

    shutil.rmtree(prefix)  # the way out
    assert cli(site, "revert", env=env).returncode == 0
    assert set(target_states(site).values()) == {"stock"}


def test_checked_hash_bytecode_of_the_stock_text_is_kept(
    tmp_path: Path, site: Path
) -> None:
    """pip writes checked-hash bytecode under SOURCE_DATE_EPOCH. Once an
    earlier version patched the file in place, Python compiles it again (the
    hash differs), so revert has no need to remove that bytecode: it gives
    the package back as it was, bytecode and all."""
    import subprocess

    emitter = site / "executorch" / EMITTER
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "-f",
            "--invalidation-mode",
            "checked-hash",
            str(emitter),
        ],
        check=True,
    )
    before = snapshot(tmp_path)
    assert any(name.endswith(".pyc") for name in before), before
    patch_in_place(site)
    assert cli(site, "revert").returncode == 0
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_a_name_with_a_newline_and_terminal_escapes_is_one_clean_line(
    tmp_path: Path, site: Path, command: str
) -> None:
    """A second dist-info named with a newline and escapes that clear the
    screen: the refusal is one line, the escapes printed as text."""
    (info,) = site.glob("*.dist-info")
    shutil.copytree(info, site / "executorch-1.5.0\n\x1b[2J\x1b[31mFAKE.dist-info")
    before = snapshot(tmp_path)
    result = cli(site, *_run_args(command))
    one_line_error(result, "executorch-1.5.0\\n\\x1b[2J\\x1b[31mFAKE.dist-info")
    assert "\x1b" not in result.stderr
    assert snapshot(tmp_path) == before


# Issue 34: the fourth attack (hostile-f78d3a2.md).


def _zip(site: Path, dest: Path, egg: bool = False) -> Path:
    """``site``'s package and metadata in a zip file, with folder entries, as
    ``zip -r`` writes it (a namespace package imports from a zip only with
    them); ``egg``: as an ``.egg``, its metadata in ``EGG-INFO/``."""
    import zipfile

    with zipfile.ZipFile(dest, "w") as archive:
        for path in sorted(site.rglob("*")):
            name = str(path.relative_to(site))
            if egg and ".dist-info" in name:
                continue
            if path.is_dir():
                archive.writestr(name + "/", "")
            else:
                archive.write(path, name)
        if egg:
            archive.writestr("EGG-INFO/", "")
            archive.writestr(
                "EGG-INFO/PKG-INFO",
                "Metadata-Version: 2.1\nName: executorch\nVersion: 1.5.1\n",
            )
    return dest


@pytest.mark.parametrize("command", ["status", "apply", "revert", "run", "check"])
@pytest.mark.parametrize("how", ["zip", "egg", "zip-ahead-of-site"])
def test_executorch_inside_a_zip_or_egg_is_one_line(
    tmp_path: Path, site: Path, how: str, command: str
) -> None:
    """D1: importlib.metadata reads a zipped dist-info (or an egg's
    EGG-INFO) through zipfile.Path: f78d3a2 ended in a TypeError traceback,
    exit 1. Such an installation can be neither patched nor overlaid: one
    line naming the file, exit 2, nothing changed."""
    name = "executorch-1.5.1-py3.11.egg" if how == "egg" else "et.zip"
    archive = _zip(site, tmp_path / name, egg=how == "egg")
    path = [str(archive)] + ([str(site)] if how == "zip-ahead-of-site" else [])
    if how != "zip-ahead-of-site":
        shutil.rmtree(site)
    env = {"PYTHONPATH": os.pathsep.join(path + [str(REPO)])}
    before = snapshot(tmp_path)
    args = ["check", "--paths", "emitter", "--devices", "cpu"]
    args = args if command == "check" else _run_args(command)
    result = cli(archive, *args, env=env)
    one_line_error(result, f"ExecuTorch is installed inside {archive} ")
    assert "Nothing was changed" in result.stderr
    assert snapshot(tmp_path) == before


def _develop_install(tmp_path: Path, site: Path) -> Tuple[Path, Path]:
    """``setup.py develop`` (or ``pip install -e`` of a checkout without a
    pyproject.toml), written by hand as setuptools writes it: the package
    and ``executorch.egg-info`` in the checkout, an ``.egg-link`` and
    ``easy-install.pth`` in site-packages. Returns (site-packages, checkout)."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.move(str(site / "executorch"), checkout / "executorch")
    shutil.rmtree(next(site.glob("*.dist-info")))
    (checkout / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    info = checkout / "executorch.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: executorch\nVersion: 1.5.1\n"
    )
    sources = ["setup.py"] + [f"executorch/{rel}" for rel in TARGETS]
    (info / "SOURCES.txt").write_text("\n".join(sources) + "\n")
    (info / "top_level.txt").write_text("executorch\n")
    (info / "dependency_links.txt").write_text("\n")
    (site / "executorch.egg-link").write_text(f"{checkout}\n.")
    (site / "easy-install.pth").write_text(f"{checkout}\n")
    return site, checkout


# Runs the CLI with ``sys.argv[1]`` added as a site folder (its .pth files
# read), under ``python -S``: the only ExecuTorch is the one it leads to.
_WITH_SITE = (
    "import site, sys; site.addsitedir(sys.argv.pop(1)); "
    "from executorch_device_guard.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize("command", ["status", "apply", "revert", "run"])
def test_a_setup_py_develop_install_is_refused(
    tmp_path: Path, site: Path, command: str
) -> None:
    """D2: f78d3a2 took a checkout installed by ``setup.py develop`` (an
    egg-info without installed-files.txt, found through easy-install.pth)
    for an installation, and apply rewrote the user's source tree. It is
    refused, as a PEP 660 editable install is, naming the checkout."""
    site, checkout = _develop_install(tmp_path, site)
    before = snapshot(tmp_path)
    result = cli(
        tmp_path / "nowhere",
        "-c",
        _WITH_SITE,
        str(site),
        *_run_args(command),
        python_flags=["-S"],
        module=False,
    )
    one_line_error(
        result,
        f"({checkout / 'executorch.egg-info'}) is an editable or source install "
        f"of {checkout / 'executorch'}",
        "git am",
    )
    assert snapshot(tmp_path) == before


def test_an_editable_install_names_its_source_tree(tmp_path: Path, site: Path) -> None:
    """D2: a PEP 660 editable install's refusal named site-packages/executorch,
    which is not there; it names the tree that ``import executorch`` loads."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.move(str(site / "executorch"), checkout / "executorch")
    (info,) = site.glob("*.dist-info")
    (info / "RECORD").write_text("__editable__.executorch-1.5.1.pth,,\n")
    (site / "__editable__.executorch-1.5.1.pth").write_text(f"{checkout}\n")
    before = snapshot(tmp_path)
    for command in ("status", "apply"):
        result = cli(
            tmp_path / "nowhere",
            "-c",
            _WITH_SITE,
            str(site),
            command,
            python_flags=["-S"],
            module=False,
        )
        one_line_error(
            result, f"is an editable or source install of {checkout / 'executorch'}:"
        )
    assert snapshot(tmp_path) == before


def _recovery(status: str) -> list:
    """The recovery command in status's output or in a refusal."""
    import shlex

    said = re.compile(r"[Rr]einstall ExecuTorch: ")
    line = next(x for x in status.splitlines() if said.search(x))
    return shlex.split(said.split(line, 1)[1])


@pytest.mark.parametrize("how", ["target", "other-venv", "uv-venv", "uv-target"])
def test_the_recovery_command_reinstalls_where_executorch_is(
    tmp_path: Path, how: str
) -> None:
    """D5: the printed recovery command reinstalled into the tool's own
    environment whatever the files said. ``pip install --target DIR`` with
    PYTHONPATH=DIR needs ``--target DIR --upgrade``; another venv's
    site-packages (reached through a .pth file) its own Python; a venv that
    uv made (INSTALLER says uv, no pip in it) ``uv pip install``."""
    if how.endswith("venv"):
        venv = tmp_path / "venv"
        site = make_site(venv / "lib" / "python3.11" / "site-packages")
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "bin").mkdir()
        (venv / "bin" / "python").symlink_to(sys.executable)
        python = str(venv / "bin" / "python")
    else:
        site = make_site(tmp_path / "site")
    if how.startswith("uv"):
        (next(site.glob("*.dist-info")) / "INSTALLER").write_text("uv\n")
    emitter = site / "executorch" / EMITTER
    emitter.write_bytes(emitter.read_bytes().replace(b"\n", b"\r\n"))
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    tail = ["--no-deps", "executorch==1.5.1"]
    expected = {
        "target": [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--target",
            str(site),
            "--upgrade",
            "--force-reinstall",
            *tail,
        ],
        "other-venv": (
            [python, "-m", "pip", "install", "--force-reinstall", *tail]
            if how == "other-venv"
            else None
        ),
        "uv-venv": (
            ["uv", "pip", "install", "--python", python, "--reinstall", *tail]
            if how == "uv-venv"
            else None
        ),
        "uv-target": [
            "uv",
            "pip",
            "install",
            "--target",
            str(site),
            "--reinstall",
            *tail,
        ],
    }[how]
    assert _recovery(status.stdout) == expected, status.stdout
    result = cli(site, *_run_args("run"))
    one_line_error(result)
    assert _recovery(result.stderr) == expected


def test_the_recovery_command_keeps_the_release_when_record_cannot_be_read(
    tmp_path: Path, site: Path
) -> None:
    """D5: with RECORD not UTF-8, METADATA (and the folder's name) still give
    the release; the command dropped the pin, and --no-deps would install
    the newest ExecuTorch whatever torch it needs."""
    record = next(site.glob("*.dist-info")) / "RECORD"
    record.write_bytes(record.read_bytes() + b"executorch/\xff,,\n")
    result = cli(site, "status")
    one_line_error(result, f"{record} cannot be read")
    assert result.stderr.rstrip().endswith(" executorch==1.5.1"), result.stderr


def _chattr(flag: str, path: Path) -> bool:
    import subprocess

    try:
        done = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    except OSError:
        return False
    return done.returncode == 0


def test_an_append_only_folder_is_named_with_the_way_out(
    tmp_path: Path, site: Path
) -> None:
    """D6: in an append-only folder (chattr +a) a file can be created but not
    renamed over or removed: f78d3a2's revert failed half-way, left its
    temporary file and the folder a new time, and every later run printed a
    bare "[Errno 1] ... '._emitter.py.device-guard....tmp'". The flag is
    seen first: one line naming the folder and `chattr -a`, nothing
    changed (the files patched in place by an earlier version)."""
    if os.geteuid() != 0:
        pytest.skip("chattr needs root")
    patch_in_place(site)
    emit = site / "executorch" / "exir" / "emit"
    leftover = emit / (
        "._emitter.py.device-guard.0123456789abcdef.1.0123456789abcdef.tmp"
    )
    leftover.write_bytes(b"x")
    if not _chattr("+a", emit):
        pytest.skip("no append-only flag on this file system")
    try:
        mtime = os.stat(emit).st_mtime_ns
        before = snapshot(tmp_path)
        one_line_error(
            cli(site, "revert"),
            f"{emit} is append-only, so this tool cannot replace or remove "
            "files in it. Nothing was changed.",
            f"(chattr -a {emit}, as root)",
        )
        assert snapshot(tmp_path) == before
        assert os.stat(emit).st_mtime_ns == mtime
    finally:
        _chattr("-a", emit)
    assert cli(site, "revert").returncode == 0
    assert not leftover.exists()
    assert set(target_states(site).values()) == {"stock"}


def test_a_pycache_prefix_given_with_dash_x_is_seen_too(
    tmp_path: Path, site: Path
) -> None:
    """Q: ``python -X pycache_prefix=DIR`` is PYTHONPYCACHEPREFIX by another
    name: revert run that way refuses as with the variable (held on f78d3a2
    too)."""
    patch_in_place(site)
    prefix = tmp_path / "prefix"
    pyc = _compile_into(prefix, site / "executorch" / EMITTER)
    before = snapshot(tmp_path)
    result = cli(site, "revert", python_flags=["-X", f"pycache_prefix={prefix}"])
    one_line_error(result, f"Python would run {pyc}")
    assert snapshot(tmp_path) == before


# The fifth attack (docs/hostile.md, "The fifth attack").


def _with_a_dead_copy(text: str) -> str:
    """The emitter with a dead copy of ``_tensor_spec_to_evalue`` (under
    ``if False:``) where the series' first hunk expects it, the live method
    pushed down: what the attack's dup_context.py writes."""
    lines = text.split("\n")
    start = next(i for i, x in enumerate(lines) if "def _tensor_spec_to_evalue" in x)
    end = start + 1
    while not lines[end].startswith("    def "):
        end += 1
    header = [
        "if False:  # a stale copy kept by a user",
        "  class _Unused:",
        "    def _f(self, buffer_idx=None):",
    ]
    pad = ["# pad"] * (start - 6)
    return "\n".join(pad + header + lines[start - 3 : end] + lines)


@pytest.mark.parametrize("state", ["stock", "patched"])
def test_a_hunk_whose_lines_occur_twice_is_never_placed_by_proximity(
    tmp_path: Path, state: str
) -> None:
    """D2: a dead copy of a hunk's lines nearer to where the hunk expects
    them: 7f6ba8a patched the copy ("Patched.", the live method stock and
    every export broken), or, patched, called it "Patched." and would have
    reverted the copy. Where the change goes cannot be told: unknown, and
    apply, revert (patched in place) and run refuse in one line, nothing
    changed."""
    import ast

    site = venv_site(tmp_path / "venv")
    if state == "patched":
        patch_in_place(site)
    emitter = site / "executorch" / EMITTER
    emitter.write_text(_with_a_dead_copy(emitter.read_text()))
    ast.parse(emitter.read_text())  # still Python
    _refused(
        tmp_path,
        site,
        rf"^  unknown +{re.escape(EMITTER)} \(the change does not fit it \(the "
        rf"{state} lines of hunk 1 occur 2 times \(from lines \d+, \d+\), so "
        r"where the change goes cannot be told\)\)$",
        f"{site / 'executorch' / EMITTER} is unknown",
    )


@pytest.mark.parametrize("command", ["status", "apply", "revert", "run"])
def test_an_empty_namespace_folder_ahead_on_the_path_is_no_shadow(
    tmp_path: Path, command: str
) -> None:
    """D11: an empty executorch/backends/ (no __init__.py) ahead on
    PYTHONPATH: Python still imports the installed regular package, which
    wins over such a folder. 7f6ba8a refused, saying that `import
    executorch.backends` loads the empty folder. In a venv, where apply
    turns the fix on, every command goes ahead."""
    site = venv_site(tmp_path / "venv")
    ahead = tmp_path / "ahead"
    (ahead / "executorch" / "backends").mkdir(parents=True)
    env = {"PYTHONPATH": str(ahead)}
    pth = site / "executorch_device_guard.pth"
    if command == "revert":
        assert tool(site, "apply", env=env).returncode == 0
    result = tool(site, *_run_args(command), env=env)
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr, result.stderr
    if command == "status":
        assert "unknown" not in result.stdout, result.stdout
        assert re.search(
            rf"^  stock +{re.escape(EMITTER)} \(form: upstream\)$", result.stdout, re.M
        )
        assert result.stdout.endswith(
            "`run -- COMMAND` to one command.\n"
        ), result.stdout
    if command == "apply":
        assert f"served with the fix: {site / 'executorch' / EMITTER}\n" in (
            result.stdout
        )
        assert pth.is_file()
    if command == "revert":
        assert f"removed {pth}\n" in result.stdout, result.stdout
        assert not pth.exists()
    assert set(target_states(site).values()) == {"stock"}


_HOOK = """
import importlib.util, sys

MAPPING = {"executorch.exir.emit._emitter": %r}


class Finder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(fullname, MAPPING[fullname])


def install():
    sys.meta_path.insert(0, Finder)
"""


def test_a_copy_with_the_fix_that_another_hook_serves_is_never_reverted(
    tmp_path: Path,
) -> None:
    """Another import hook serves a copy that holds the fix from elsewhere;
    the installed file is stock. status calls the target fixed, naming the
    copy, never "this release ships the fix"; apply takes it; revert writes
    nothing, here or there."""
    site = venv_site(tmp_path / "venv")
    copy = tmp_path / "other" / "executorch" / EMITTER
    copy.parent.mkdir(parents=True)
    copy.write_bytes(PATCHED[EMITTER])
    (site / "mytools_finder.py").write_text(_HOOK % str(copy))
    (site / "mytools_finder.pth").write_text(
        "import mytools_finder; mytools_finder.install()\n"
    )
    status = tool(site, "status")
    assert re.search(
        rf"^  fixed +{re.escape(EMITTER)} \(Python loads {re.escape(str(copy))} "
        r"instead: form: upstream\)$",
        status.stdout,
        re.M,
    ), status.stdout
    before = snapshot(tmp_path)
    assert tool(site, "revert").stdout == f"nothing to revert in {site / 'executorch'}\n"
    assert snapshot(tmp_path) == before
    assert tool(site, "apply").returncode == 0


@pytest.mark.parametrize("first", ["stock", "patched"])
def test_an_import_hook_that_serves_another_copy_is_a_shadow(
    tmp_path: Path, first: str
) -> None:
    """D4: a .pth file in site-packages puts a meta-path finder first (as
    editable installs do) that serves the emitter from a stock copy
    elsewhere. 7f6ba8a said "Patched." and run ran the command on the
    stock copy, without a word. Each target is looked up as the program
    would, hooks first: status says the emitter loads without the fix,
    naming the copy, and apply and run refuse in one line (revert first
    writes back what an earlier version patched in place)."""
    site = venv_site(tmp_path / "venv")
    python = site.parents[2] / "bin" / "python"
    if first == "patched":
        patch_in_place(site)
    copy = tmp_path / "elsewhere" / "_emitter.py"
    copy.parent.mkdir()
    copy.write_bytes(STOCK[EMITTER])
    (site / "mytools_finder.py").write_text(_HOOK % str(copy))
    (site / "mytools_finder.pth").write_text(
        "import mytools_finder; mytools_finder.install()\n"
    )
    before = snapshot(tmp_path)
    why = f"Python loads {copy} instead: it is not at executorch/{EMITTER}"
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(
        rf"^  unknown +{re.escape(EMITTER)} \({re.escape(why)}\)$", status.stdout, re.M
    ), status.stdout
    assert "Some files load without the fix (above), so apply refuses" in (
        status.stdout
    )
    reverted = tool(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    if first == "patched":
        assert f"restored {site / 'executorch' / EMITTER}\n" in reverted.stdout
        assert_only_targets_changed(tmp_path, site, before, "stock")
    else:
        assert reverted.stdout == f"nothing to revert in {site / 'executorch'}\n"
    after = snapshot(tmp_path)
    one_line_error(
        tool(site, "apply"),
        f"{site / 'executorch' / EMITTER} would load without the fix (unknown: "
        f"{why}), so apply refuses. Nothing was changed.",
    )
    one_line_error(
        tool(site, "run", "--", str(python), "-c", "pass"),
        f"{site / 'executorch' / EMITTER} is unknown ({why}): it would load "
        "without the fix. Nothing was run. Have Python load the installed file",
    )
    assert snapshot(tmp_path) == after


PORTABLE_LIB = "extension/pybindings/portable_lib.py"


def _with_portable_lib(site: Path, data: bytes) -> None:
    """The runtime-inputs backport's target, listed in RECORD."""
    from sites import record_hash

    path = site / "executorch" / PORTABLE_LIB
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    with open(_record(site), "a") as f:
        f.write(f"executorch/{PORTABLE_LIB},{record_hash(data)},{len(data)}\n")


@pytest.mark.parametrize(
    "label,state",
    [("1.5.1", "stock"), ("1.5.1", "patched"), ("1.4.2", "stock")],
)
def test_a_backport_is_not_left_out_on_the_version_label_alone(
    tmp_path: Path, label: str, state: str
) -> None:
    """D3: the runtime-inputs backport is for 1.0.0 to 1.4.1 (1.5 has
    upstream's C++ fix). 7f6ba8a decided by the dist-info's Version alone:
    1.4.1's portable_lib.py under a label of 1.5.1 (or an unknown 1.4.2, a
    patch release of the 1.4 line) was "not for this release", left stock,
    and status said "Patched.". Now a file whose bytes are that backport's
    stock or patched text under a release outside its range is unknown, and
    so is a later release of its last line: status says it loads without
    the fix, apply, revert (patched in place) and run refuse in one line,
    nothing changed."""
    from sites import ALL_TARGETS

    site = venv_site(tmp_path / "venv", version=label)
    (backport,) = ALL_TARGETS[PORTABLE_LIB]
    (hunk,) = backport.hunks
    _with_portable_lib(
        site, "".join(hunk.new_lines if state == "patched" else hunk.old_lines).encode()
    )
    if state == "patched":
        patch_in_place(site)
    why = (
        f"its text is the {state} text of ExecuTorch 1.0.0 to 1.4.1, which its "
        f"backport is for, but this release says {label}"
        if label == "1.5.1"
        else "ExecuTorch 1.4.2 comes after 1.4.1, the last release its backport "
        "is for, on the same line"
    )
    _refused(
        tmp_path,
        site,
        rf"^  unknown +{re.escape(PORTABLE_LIB)} \({re.escape(why)}",
        f"{PORTABLE_LIB} is unknown ({why}",
    )


@pytest.mark.parametrize("command", ["status", "apply", "run"])
def test_a_version_py_of_another_release_is_refused(
    tmp_path: Path, site: Path, command: str
) -> None:
    """D3: executorch/version.py is written from the same version as the
    dist-info: 1.4.1's files (version.py says 1.4.1+cpu) under a dist-info
    relabelled 1.5.1, folder, METADATA and RECORD alike, are refused."""
    (site / "executorch" / "version.py").write_text('__version__ = "1.4.1+cpu"\n')
    before = snapshot(tmp_path)
    one_line_error(
        cli(site, *_run_args(command)),
        f"{site / 'executorch' / 'version.py'} says __version__ '1.4.1+cpu', but "
        f"{site / 'executorch-1.5.1.dist-info' / 'METADATA'} says Version '1.5.1'",
        "Nothing was changed",
    )
    assert snapshot(tmp_path) == before
