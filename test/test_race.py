# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""revert of files that an earlier version patched in place (the only
command that still writes ExecuTorch's files) and the installation's lock:
another process holding it, a package folder swapped while revert waits for
it, and status, which takes no lock, reading alongside."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from executorch_device_guard.installation import installed
from sites import (
    cli,
    FAULT,
    make_site,
    patch_in_place,
    snapshot,
    target_states,
    TARGETS,
)

# Holds the package folder's lock, waits for a line on stdin, then does what
# a pip reinstall does (the old folder moved aside, a fresh one in its place)
# and releases the lock.
_HOLD_AND_SWAP = """
import fcntl, os, shutil, sys
root, stash, fresh = sys.argv[1:]
fd = os.open(root, os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
os.rename(root, stash)
shutil.copytree(fresh, root)
fcntl.flock(fd, fcntl.LOCK_UN)
"""


def test_the_package_swapped_while_waiting_for_the_lock(tmp_path: Path) -> None:
    """revert works on the folder now installed, never on the one moved away."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    patch_in_place(site)
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh)
    stash = site / "executorch.stash"
    before = snapshot(root)
    helper = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_SWAP, str(root), str(stash), str(fresh)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout.readline() == "locked\n"
    run = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "revert"],
        env=_cli_env(site),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert f"waiting for process {helper.pid} (" in run.stderr.readline()
    helper.communicate("go\n", timeout=60)
    out, err = run.communicate(timeout=60)
    assert helper.returncode == 0
    assert run.returncode == 0, err
    assert snapshot(stash) == before, "the folder moved away was changed"
    assert set(target_states(site).values()) == {"stock"}
    assert out.count(f"restored {root}/") == len(TARGETS), out


def test_gives_up_when_the_folder_keeps_being_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from executorch_device_guard.installation import confined
    from executorch_device_guard.errors import GuardError

    site = make_site(tmp_path / "site")
    patch_in_place(site)
    before = snapshot(tmp_path)
    monkeypatch.setattr(confined.Package, "moved", lambda self: True)
    for command in (installed.revert, installed.survey):
        with pytest.raises(GuardError, match="replaced by another folder 3 times"):
            command(site / "executorch", TARGETS)
    assert snapshot(tmp_path) == before


# Issue 25, case 8: a lock that someone else holds.

# Holds an flock on a folder (exclusive, or shared with "sh") until stdin
# closes; prints "locked" once it does.
_HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2:] == ["sh"] else fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def _holder(root: Path, *mode: str, script: str = _HOLD) -> subprocess.Popen:
    helper = subprocess.Popen(
        [sys.executable, "-c", script, str(root), *mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout.readline() == "locked\n"
    return helper


def _cli_env(site: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop(FAULT, None)
    return env


def test_a_lock_held_by_another_process_is_named_and_waited_for_a_while(
    tmp_path: Path,
) -> None:
    """Case 8: any process can hold an flock on the package folder (here a
    plain Python, not this tool). revert of files patched in place, which
    takes it, names it, waits for it a bounded time (--wait), then says so
    in one line, exit 2, nothing changed."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    before = snapshot(tmp_path)
    helper = _holder(site / "executorch")
    try:
        start = time.monotonic()
        result = cli(site, "revert", "--wait", "1", timeout=60)
        took = time.monotonic() - start
    finally:
        helper.communicate("", timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    waiting, error = result.stderr.splitlines()
    assert waiting.startswith(f"waiting for process {helper.pid} ("), waiting
    assert error.startswith(
        f"executorch-device-guard: error: {site / 'executorch'} is locked by "
        f"process {helper.pid} ("
    ), error
    assert "which did not release it within 1 s. Nothing was changed." in error
    assert "another executorch-device-guard" not in result.stderr
    assert took < 30, took
    assert snapshot(tmp_path) == before


def test_a_holders_command_line_is_printed_without_control_characters(
    tmp_path: Path,
) -> None:
    """Another user's process chooses its own command line: one that carries
    terminal escapes (here, erase the line and print a green "Patched.")
    is printed escaped, on the one line the error takes."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    before = snapshot(tmp_path)
    forged = "#\x1b[2K\x1b[32mPatched.\x1b[0m\r\n" + _HOLD
    helper = _holder(site / "executorch", script=forged)
    try:
        result = cli(site, "revert", "--wait", "1", timeout=60)
    finally:
        helper.communicate("", timeout=60)
    assert result.returncode == 2, result.stderr
    waiting, error = result.stderr.splitlines()
    assert not any(c in result.stderr for c in "\x1b\r"), repr(result.stderr)
    assert f"is locked by process {helper.pid} (" in error
    assert "#\\x1b[2K\\x1b[32mPatched.\\x1b[0m import" in error, error
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("holder", ["python", "flock"])
def test_status_answers_in_seconds_whoever_holds_the_lock(
    tmp_path: Path, holder: str
) -> None:
    """Issue 34: status only reads. With the package folder locked by
    another program (a Python's flock, or flock(1) on the folder), f78d3a2
    waited 30 s and gave up with exit 2 (ddcd504: forever). It takes no
    lock: it answers within 5 s, exit 0, each file as it is, and waits for
    no one; revert still waits (test above)."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    first = next(iter(TARGETS))
    patch_in_place(site, [first])
    if holder == "flock":
        if shutil.which("flock") is None:
            pytest.skip("no flock(1)")
        helper = subprocess.Popen(
            [
                "flock",
                str(root),
                sys.executable,
                "-c",
                "import sys; print('locked', flush=True); sys.stdin.read()",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        helper.stdout.readline()
    else:
        helper = _holder(root)
    before = snapshot(tmp_path)
    try:
        start = time.monotonic()
        result = cli(site, "status", timeout=120)
        took = time.monotonic() - start
    finally:
        helper.communicate("", timeout=60)
    assert result.returncode == 0, result.stderr
    assert took < 5, took
    assert result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ExecuTorch 1.5.1 at {root}", lines
    for rel in TARGETS:
        state = "patched" if rel == first else "stock"
        assert any(line.split()[:2] == [state, rel] for line in lines), (
            rel,
            result.stdout,
        )
    assert lines[-1].startswith(
        "1 file(s) were patched in place by an earlier version of this tool"
    ), lines
    assert snapshot(tmp_path) == before


def test_a_shared_holder_lets_status_read(tmp_path: Path) -> None:
    """A shared hold (a reader) blocks revert, not status; revert gives up
    after its default wait (ddcd504 waited until the test's timeout)."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    before = snapshot(tmp_path)
    helper = _holder(site / "executorch", "sh")
    try:
        status = cli(site, "status", timeout=120)
        reverted = cli(site, "revert", timeout=120)
    finally:
        helper.communicate("", timeout=60)
    assert status.returncode == 0 and status.stderr == "", status.stderr
    assert reverted.returncode == 2 and "is locked by process" in reverted.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("signame", ["TERM", "HUP", "INT"])
def test_revert_interrupted_while_it_waits_says_so_in_one_line(
    tmp_path: Path, signame: str
) -> None:
    """Case 9: SIGTERM (or SIGHUP) to revert as it waits for the lock: one
    line, as for SIGINT, and 128+N; nothing was changed."""
    site = make_site(tmp_path / "site")
    patch_in_place(site)
    before = snapshot(tmp_path)
    helper = _holder(site / "executorch")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "executorch_device_guard", "revert"],
            env=_cli_env(site),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert "waiting for" in proc.stderr.readline()
        proc.send_signal(getattr(signal, "SIG" + signame))
        out, err = proc.communicate(timeout=60)
    finally:
        helper.communicate("", timeout=60)
    signum = getattr(signal, "SIG" + signame)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert err == (
        f"executorch-device-guard: error: interrupted (SIG{signame}): every "
        "file is whole, stock or patched; `status` shows which, and `revert` "
        "again finishes.\n"
    ), err
    assert out == ""
    assert snapshot(tmp_path) == before
