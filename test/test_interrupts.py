# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""revert of files that an earlier version patched in place, interrupted at
every step that writes.

``apply`` writes no file of ExecuTorch; ``revert`` still writes the stock text
back into the files that an earlier version of this tool patched in place
(set up here with ``sites.patch_in_place``). The test hook
``EXECUTORCH_DEVICE_GUARD_TEST_FAULT=step:N:SIGNAL`` (see
``executorch_device_guard.installation.faults``) sends the CLI a signal at its
N-th write step; N runs from 1 until a run finishes before reaching it. After each
interrupted run every file must be whole (stock or patched, by hash), nothing
outside the package may have changed, ``status`` must report each file as it
is, and ``revert`` run again must then complete.
"""

import os
import re
import signal
from pathlib import Path

import pytest

from executorch_device_guard.installation import installed
from sites import (
    assert_only_targets_changed,
    cli,
    FAULT,
    make_site,
    one_line_error,
    PATCHED,
    patch_in_place,
    snapshot,
    STOCK,
    target_states,
    TARGETS,
)

# Named as the tool names its temporary files (since it records the folder's
# time and names in the name: ``.HEX.MTIME.NAMES.tmp``; before: ``.HEX.tmp``).
OURS = r"\.device-guard\.[0-9a-f]{16}(\.-?[0-9a-f]+\.[0-9a-f]{16})?\.tmp$"
EMITTER = "exir/emit/_emitter.py"


def _garbage(site: Path) -> list:
    """What earlier runs may have left: a temporary file and a 0.1.0 state file."""
    package = site / "executorch"
    temp = package / "exir/emit/._emitter.py.device-guard.0123456789abcdef.tmp"
    temp.write_text("half a file")
    (package / ".device_guard.json").write_text('{"files": {"/etc/passwd": {}}}')
    return [temp, package / ".device_guard.json"]


def _patched_site(tmp_path: Path) -> Path:
    """A site whose targets an earlier version patched in place."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    return site


def _status_states(site: Path) -> dict:
    """``status``'s state of each target ('stock' or 'patched')."""
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    found = dict(
        (rel, state)
        for state, rel in re.findall(
            r"^  (stock|patched) +(\S+) \(form: \S+\)$", status.stdout, re.M
        )
    )
    return {rel: found.get(rel) for rel in TARGETS}


@pytest.mark.parametrize("signame", ["INT", "TERM", "KILL"])
def test_interrupted_at_every_write_step(tmp_path: Path, signame: str) -> None:
    signum = getattr(signal, "SIG" + signame)
    step = 0
    while True:
        step += 1
        top = tmp_path / str(step)
        site = _patched_site(top)
        garbage = [str(p.relative_to(top)) for p in _garbage(site)]
        before = snapshot(top)
        result = cli(site, "revert", env={FAULT: f"step:{step}:{signame}"})
        if result.returncode == 0:
            break  # the run finished before step N: every step was covered
        where = f"revert {signame} at step {step}"
        if signame == "KILL":
            assert result.returncode == -signal.SIGKILL, where
        else:
            assert result.returncode == 128 + signum, (where, result.stderr)
            assert result.stderr == (
                f"executorch-device-guard: error: interrupted (SIG{signame}): every "
                "file is whole, stock or patched; `status` shows which, and `revert` "
                "again finishes.\n"
            ), where
        states = assert_only_targets_changed(
            top,
            site,
            before,
            None,
            may_vanish=garbage,
            # Only SIGKILL cannot wait for the rename: it may leave our temp file.
            may_appear=OURS if signame == "KILL" else "",
        )
        assert _status_states(site) == states, where
        found = installed.survey(site / "executorch", TARGETS)
        assert {rel: i.state.value for rel, i in found.files.items()} == states, where
        left = [str(top / rel) for rel in snapshot(top) if re.search(OURS, rel)]
        assert len(found.leftovers) == len(left), where

        # revert, run again, completes, and removes what was left: our
        # temporary files and 0.1.0's state file.
        legacy = site / "executorch" / ".device_guard.json"
        left += [str(legacy)] if legacy.exists() else []
        again = cli(site, "revert")
        assert again.returncode == 0, (where, again.stderr)
        assert sorted(
            re.findall(r"^removed leftover (.*)$", again.stdout, re.M)
        ) == sorted(left), (where, again.stdout)
        assert_only_targets_changed(top, site, before, "stock", may_vanish=garbage)
    # Two leftovers to remove, then three steps per file: temp file created,
    # complete, renamed. The first run without a fault is run number 2+3*N+1.
    assert step == 2 + 3 * len(TARGETS) + 1, step


def test_status_after_a_kill_mid_revert(tmp_path: Path) -> None:
    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    patch_in_place(site)
    # Steps 1-3: the first file; 4-6: the second; 8: third file's temp complete.
    result = cli(site, "revert", env={FAULT: "step:8:KILL"})
    assert result.returncode == -signal.SIGKILL
    first, second, third = list(TARGETS)[:3]
    temps = [
        rel
        for rel in snapshot(tmp_path)
        if re.search(OURS, rel) and Path(third).name in rel
    ]
    assert len(temps) == 1
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert re.search(
        rf"  stock +{first} \(form: \S+\)\n  stock +{second} \(form: \S+\)\n"
        rf"  patched +{third} \(form: \S+\)\n",
        status.stdout,
    ), status.stdout
    assert (
        f"{len(TARGETS) - 2} file(s) were patched in place by an earlier version "
        "of this tool: `revert` writes their stock text back"
    ) in status.stdout, status.stdout
    revert = cli(site, "revert")
    assert revert.returncode == 0, revert.stderr
    assert f"removed leftover {tmp_path / temps[0]}" in revert.stdout
    assert snapshot(tmp_path) == before


def test_a_full_disk_midway(tmp_path: Path) -> None:
    site = _patched_site(tmp_path)
    before = snapshot(tmp_path)
    # Step 8: the third file's temporary file is complete; its rename fails.
    result = cli(site, "revert", env={FAULT: "step:8:error"})
    assert result.returncode == 2, result.stderr
    assert "No space left on device (test fault)" in result.stderr
    assert f"2 of {len(TARGETS)} files are now stock" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    states = assert_only_targets_changed(tmp_path, site, before, None)
    assert list(states.values()).count("stock") == 2
    assert cli(site, "revert").returncode == 0
    assert_only_targets_changed(tmp_path, site, before, "stock")


def _aged_folders(site: Path) -> dict:
    """Gives every folder of the site a modification time of its own, long
    past (so that any change shows), and returns them."""
    folders = [site] + sorted(p for p in site.rglob("*") if p.is_dir())
    old = 1_000_000_000_123_456_789
    for i, folder in enumerate(reversed(folders)):  # the deepest first
        os.utime(folder, ns=(old + i, old + i))
    return _folder_times(site)


def _folder_times(site: Path) -> dict:
    folders = [site] + sorted(p for p in site.rglob("*") if p.is_dir())
    return {str(p.relative_to(site)): p.stat().st_mtime_ns for p in folders}


def test_a_failed_write_gives_its_folder_back_its_time(tmp_path: Path) -> None:
    """A full disk at any write step of revert ("N of M files are now
    stock", exit 2): the folder that held the temporary file keeps its
    modification time, as on success; so does every other folder (none gains
    or loses a name)."""
    step = 0
    while True:
        step += 1
        site = _patched_site(tmp_path / str(step))
        before = _aged_folders(site)
        result = cli(site, "revert", env={FAULT: f"step:{step}:error"})
        if result.returncode == 0:
            break
        where = f"revert failing at step {step}"
        assert "No space left on device (test fault)" in result.stderr, where
        assert _folder_times(site) == before, where
    assert step == 3 * len(TARGETS) + 1, step


def test_the_next_run_gives_a_killed_runs_folder_back_its_time(
    tmp_path: Path,
) -> None:
    """kill -9 of revert at any write step, then revert: every folder has
    its modification time again. The temporary file a SIGKILL leaves carries
    its folder's time in its name; the run that removes it puts that time
    back. (Only a SIGKILL in the instant between a rename and the folder's
    utime, which the test hook cannot reach, loses it.)"""
    step = 0
    while True:
        step += 1
        site = _patched_site(tmp_path / str(step))
        before = _aged_folders(site)
        result = cli(site, "revert", env={FAULT: f"step:{step}:KILL"})
        if result.returncode == 0:
            break
        where = f"revert killed at step {step}"
        assert result.returncode == -signal.SIGKILL, where
        revert = cli(site, "revert")
        assert revert.returncode == 0, (where, revert.stderr)
        assert set(target_states(site).values()) == {"stock"}, where
        assert _folder_times(site) == before, where
    assert step == 3 * len(TARGETS) + 1, step


def test_files_named_like_an_earlier_versions_temporary_files_are_left_alone(
    tmp_path: Path,
) -> None:
    """Versions up to 0.1.0 named their temporary files as ``tempfile.mkstemp``
    names any file, ``.NAME.XXXXXXXX.tmp``: a user's backup
    ``._emitter.py.20261130.tmp`` holding the stock text has such a name too.
    revert removes only files named as it names its own, and leaves the
    others to the user (issue 25, case 9)."""
    site = make_site(tmp_path / "site")
    package = site / "executorch"
    named = {
        # A user's backups, and what 0.1.0 could have left: the same names.
        package / "exir/emit/._emitter.py.20261130.tmp": STOCK[EMITTER],
        package / "exir/emit/._emitter.py.bak_2026.tmp": STOCK[EMITTER],
        package / "exir/emit/._emitter.py.k3j4h5_6.tmp": PATCHED[EMITTER][:4096],
        package
        / "devtools/bundled_program/.core.py.abc_defg.tmp": STOCK[
            "devtools/bundled_program/core.py"
        ][:10],
        package / ".device_guard_probe.abc_1234": b"",
        package / "exir/emit/._emitter.py.my_notes.tmp": b"my notes\n",
        package / "exir/emit/.device_guard_probe.abcdefgh": b"x",
    }
    others = {
        package / "exir/emit/.notes.py.abcdefgh.tmp": b"x",  # not a target's name
        package / "exir/emit/._emitter.py.toolongname.tmp": b"x",
        package / "exir/._emitter.py.abcdefgh.tmp": b"x",  # not beside the target
        package / "exir/emit/.device_guard_probe.short": b"",
    }
    for path, data in {**named, **others}.items():
        path.write_bytes(data)
    before = snapshot(tmp_path)
    patch_in_place(site)
    result = cli(site, "revert")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("restored ") == len(TARGETS), result.stdout
    assert "removed leftover" not in result.stdout, result.stdout
    assert_only_targets_changed(tmp_path, site, before, "stock")
    assert all(p.read_bytes() == data for p, data in {**named, **others}.items())
    assert snapshot(tmp_path) == before


def test_keyboard_interrupt_right_after_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case, for revert: Ctrl-C just after the third rename
    succeeds."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    before = snapshot(tmp_path)
    patch_in_place(site)
    real_replace = os.replace
    renames = []

    def interrupted(*args, **kwargs):
        real_replace(*args, **kwargs)
        renames.append(args)
        if len(renames) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        installed.revert(root, TARGETS)
    monkeypatch.undo()
    states = assert_only_targets_changed(tmp_path, site, before, None)
    # No rollback: the files renamed before the interrupt stay stock.
    assert list(states.values()).count("stock") == 3
    # The tool's own recovery: revert finishes, stock byte for byte.
    installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == before


# A signal right after the N-th os.replace, whatever the implementation does
# around it: the run is wrapped, not hooked.
_SIGNAL_AFTER_RENAME = """
import os, signal, sys
real, count = os.replace, 0
def replace(*args, **kwargs):
    global count
    real(*args, **kwargs)
    count += 1
    if count == {n}:
        os.kill(os.getpid(), signal.SIG{signame})
os.replace = replace
from executorch_device_guard.cli import main
sys.exit(main(["{command}"]))
"""


@pytest.mark.parametrize("signame", ["INT", "TERM", "KILL"])
def test_signal_right_after_a_rename(tmp_path: Path, signame: str) -> None:
    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    patch_in_place(site)
    code = _SIGNAL_AFTER_RENAME.format(n=3, signame=signame, command="revert")
    result = cli(site, python_flags=["-c", code], module=False)
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    states = assert_only_targets_changed(tmp_path, site, before, None, may_appear=OURS)
    assert list(states.values()).count("stock") == 3, states
    # revert, run next, completes.
    done = cli(site, "revert")
    assert done.returncode == 0, done.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "value", ["step:x:KILL", "step:1:FOO", "step:0:INT", "step:2", "delay:soon", "x"]
)
def test_a_malformed_test_fault_is_one_line(tmp_path: Path, value: str) -> None:
    """The test hook is read in production too: a bad value changes nothing."""
    site = _patched_site(tmp_path)
    before = snapshot(tmp_path)
    result = cli(site, "revert", env={FAULT: value})
    one_line_error(result, f"{FAULT}={value!r} is not a test fault", "unset it")
    assert snapshot(tmp_path) == before
