# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply and revert, interrupted at every step that writes.

The test hook ``EXECUTORCH_DEVICE_GUARD_TEST_FAULT=step:N:SIGNAL`` (see
``executorch_device_guard.installation.faults``) sends the CLI a signal at its
N-th write step; N runs from 1 until a run finishes before reaching it. After each
interrupted run every file must be whole (stock or patched, by hash), nothing
outside the package may have changed, ``status`` must report each file as it
is, and the same command must then complete, as must the opposite one.
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


def _start(tmp_path: Path, command: str) -> Path:
    site = make_site(tmp_path / "site")
    if command == "revert":
        installed.apply(site / "executorch", TARGETS)
    return site


@pytest.mark.parametrize("signame", ["INT", "TERM", "KILL"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_interrupted_at_every_write_step(
    tmp_path: Path, command: str, signame: str
) -> None:
    goal = "patched" if command == "apply" else "stock"
    signum = getattr(signal, "SIG" + signame)
    step = 0
    while True:
        step += 1
        top = tmp_path / str(step)
        site = _start(top, command)
        garbage = [str(p.relative_to(top)) for p in _garbage(site)]
        before = snapshot(top)
        result = cli(site, command, env={FAULT: f"step:{step}:{signame}"})
        if result.returncode == 0:
            break  # the run finished before step N: every step was covered
        where = f"{command} {signame} at step {step}"
        if signame == "KILL":
            assert result.returncode == -signal.SIGKILL, where
        else:
            assert result.returncode == 128 + signum, (where, result.stderr)
            assert result.stderr == (
                f"executorch-device-guard: error: interrupted (SIG{signame}): every "
                "file is whole, stock or patched; `status` shows which, `apply` "
                "finishes, `revert` undoes.\n"
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
        found = installed.survey(site / "executorch", TARGETS)
        assert {rel: i.state.value for rel, i in found.files.items()} == states, where
        assert len(found.leftovers) == sum(
            bool(re.search(OURS, rel)) for rel in snapshot(top)
        ), where

        # The same command completes; the opposite one then undoes it all.
        again = cli(site, command)
        assert again.returncode == 0, (where, again.stderr)
        assert_only_targets_changed(top, site, before, goal, may_vanish=garbage)
        opposite = installed.revert if command == "apply" else installed.apply
        opposite(site / "executorch", TARGETS)
        assert_only_targets_changed(
            top, site, before, "stock" if goal == "patched" else "patched",
            may_vanish=garbage,
        )
    # Two leftovers to remove, then three steps per file: temp file created,
    # complete, renamed. The first run without a fault is run number 2+3*5+1.
    assert step == 2 + 3 * len(TARGETS) + 1, step


def test_status_after_a_kill_mid_apply(tmp_path: Path) -> None:
    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    # Steps 1-3: the first file; 4-6: the second; 8: third file's temp complete.
    result = cli(site, "apply", env={FAULT: "step:8:KILL"})
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
        rf"  patched +{first} \(form: upstream\)\n  patched +{second} \(form: "
        rf"upstream\)\n  stock +{third} \(form: upstream\)\n",
        status.stdout,
    ), status.stdout
    assert f"Partly patched (2 of {len(TARGETS)} files)" in status.stdout
    assert "1 temporary file(s) left by an interrupted run" in status.stdout
    revert = cli(site, "revert")
    assert revert.returncode == 0, revert.stderr
    assert f"removed leftover {tmp_path / temps[0]}" in revert.stdout
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_full_disk_midway(tmp_path: Path, command: str) -> None:
    site = _start(tmp_path, command)
    before = snapshot(tmp_path)
    # Step 8: the third file's temporary file is complete; its rename fails.
    result = cli(site, command, env={FAULT: "step:8:error"})
    verb = "patched" if command == "apply" else "stock"
    assert result.returncode == 2, result.stderr
    assert "No space left on device (test fault)" in result.stderr
    assert f"2 of {len(TARGETS)} files are now {verb}" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    states = assert_only_targets_changed(tmp_path, site, before, None)
    assert list(states.values()).count(verb) == 2
    assert cli(site, command).returncode == 0
    assert_only_targets_changed(tmp_path, site, before, verb)


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


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_failed_write_gives_its_folder_back_its_time(
    tmp_path: Path, command: str
) -> None:
    """A full disk at any write step ("N of M files are now patched", exit 2):
    the folder that held the temporary file keeps its modification time, as
    on success; so does every other folder (none gains or loses a name)."""
    step = 0
    while True:
        step += 1
        site = _start(tmp_path / str(step), command)
        before = _aged_folders(site)
        result = cli(site, command, env={FAULT: f"step:{step}:error"})
        if result.returncode == 0:
            break
        where = f"{command} failing at step {step}"
        assert "No space left on device (test fault)" in result.stderr, where
        assert _folder_times(site) == before, where
    assert step == 3 * len(TARGETS) + 1, step


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_the_next_run_gives_a_killed_runs_folder_back_its_time(
    tmp_path: Path, command: str
) -> None:
    """kill -9 of apply or revert at any write step, then revert: every
    folder has its modification time again. The temporary file a SIGKILL
    leaves carries its folder's time in its name; the run that removes it
    puts that time back. (Only a SIGKILL in the instant between a rename
    and the folder's utime, which the test hook cannot reach, loses it.)"""
    step = 0
    while True:
        step += 1
        site = _start(tmp_path / str(step), command)
        before = _aged_folders(site)
        result = cli(site, command, env={FAULT: f"step:{step}:KILL"})
        if result.returncode == 0:
            break
        where = f"{command} killed at step {step}"
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
    apply and revert remove only files named as they name theirs; status
    counts the others and leaves them to the user (issue 25, case 9)."""
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
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert "temporary file(s) left by an interrupted run" not in status.stdout
    assert (
        f"{len(named)} file(s) named like temporary files of an earlier version "
        "are left alone: apply and revert remove only files named as they name "
        "theirs. Delete them if they are not yours (e.g. "
        f"{package / '.device_guard_probe.abc_1234'}).\n"
    ) in status.stdout, status.stdout
    for command, goal in (("apply", "patched"), ("revert", "stock")):
        result = cli(site, command)
        assert result.returncode == 0, result.stderr
        assert "removed leftover" not in result.stdout, result.stdout
        assert_only_targets_changed(tmp_path, site, before, goal)
    assert all(p.read_bytes() == data for p, data in {**named, **others}.items())
    assert snapshot(tmp_path) == before


def test_keyboard_interrupt_right_after_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: Ctrl-C just after the third rename succeeds."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    before = snapshot(tmp_path)
    real_replace = os.replace
    renames = []

    def interrupted(*args, **kwargs):
        real_replace(*args, **kwargs)
        renames.append(args)
        if len(renames) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        installed.apply(root, TARGETS)
    monkeypatch.undo()
    states = assert_only_targets_changed(tmp_path, site, before, None)
    # The tool's own recovery: apply finishes, revert gives stock byte for byte.
    installed.apply(root, TARGETS)
    assert set(target_states(site).values()) == {"patched"}
    installed.revert(root, TARGETS)
    assert snapshot(tmp_path) == before
    # No rollback: the files renamed before the interrupt stay patched.
    assert list(states.values()).count("patched") == 3


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


@pytest.mark.parametrize("then", ["apply", "revert"])
@pytest.mark.parametrize("signame", ["INT", "TERM", "KILL"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_signal_right_after_a_rename(
    tmp_path: Path, command: str, signame: str, then: str
) -> None:
    site = _start(tmp_path, command)
    before = snapshot(tmp_path)
    code = _SIGNAL_AFTER_RENAME.format(n=3, signame=signame, command=command)
    result = cli(site, python_flags=["-c", code], module=False)
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert_only_targets_changed(tmp_path, site, before, None, may_appear=OURS)
    # Either command, run next, completes.
    done = cli(site, then)
    assert done.returncode == 0, done.stderr
    goal = "patched" if then == "apply" else "stock"
    assert_only_targets_changed(tmp_path, site, before, goal)


@pytest.mark.parametrize(
    "value", ["step:x:KILL", "step:1:FOO", "step:0:INT", "step:2", "delay:soon", "x"]
)
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_malformed_test_fault_is_one_line(
    tmp_path: Path, command: str, value: str
) -> None:
    """The test hook is read in production too: a bad value changes nothing."""
    site = _start(tmp_path, command)
    before = snapshot(tmp_path)
    result = cli(site, command, env={FAULT: value})
    one_line_error(result, f"{FAULT}={value!r} is not a test fault", "unset it")
    assert snapshot(tmp_path) == before
