# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply and revert racing on one installation, with status reading alongside,
and a package folder swapped while they wait for its lock."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from executorch_device_guard.installation import installed
from sites import (
    assert_only_targets_changed,
    cli,
    FAULT,
    make_site,
    snapshot,
    target_states,
    TARGETS,
)


def test_apply_and_revert_racing(tmp_path: Path) -> None:
    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    # Each write step sleeps 5 ms, so every run is long enough to overlap.
    slow = {FAULT: "delay:0.005"}
    deadline = time.monotonic() + 4
    results = {"apply": [], "revert": [], "status": []}

    def loop(command: str) -> None:
        while time.monotonic() < deadline:
            results[command].append(cli(site, command, env=slow))

    threads = [threading.Thread(target=loop, args=(c,)) for c in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for command, runs in results.items():
        assert len(runs) >= 3, (command, len(runs))
        for run in runs:
            assert run.returncode == 0, (command, run.stdout, run.stderr)
    for run in results["status"]:
        assert "unknown" not in run.stdout, run.stdout
        assert "temporary" not in run.stdout, run.stdout
    # Whichever ran last, the installation is whole; then both directions work.
    states = set(assert_only_targets_changed(tmp_path, site, before, None).values())
    assert len(states) == 1, states
    assert cli(site, "apply").returncode == 0
    assert_only_targets_changed(tmp_path, site, before, "patched")
    assert cli(site, "revert").returncode == 0
    assert snapshot(tmp_path) == before
    waits = sum("waiting for another" in r.stderr for r in results["apply"])
    waits += sum("waiting for another" in r.stderr for r in results["revert"])
    assert waits > 0, "the runs never overlapped"


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


@pytest.mark.parametrize("command", ["apply", "revert", "status"])
def test_the_package_swapped_while_waiting_for_the_lock(
    tmp_path: Path, command: str
) -> None:
    """The run works on the folder now installed, never on the one moved away."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    if command == "revert":
        installed.apply(root, TARGETS)
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh)
    if command == "status":  # so that the two folders read differently
        installed.apply(fresh, TARGETS)
    stash = site / "executorch.stash"
    before = snapshot(root)
    helper = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_SWAP, str(root), str(stash), str(fresh)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout.readline() == "locked\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop(FAULT, None)
    run = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", command],
        env=env,
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
    goal = {"apply": "patched", "revert": "stock", "status": "patched"}[command]
    assert set(target_states(site).values()) == {goal}
    if command == "status":
        assert out.endswith("Patched. `revert` restores the stock files.\n"), out


def test_gives_up_when_the_folder_keeps_being_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from executorch_device_guard.installation import confined
    from executorch_device_guard.errors import GuardError

    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    monkeypatch.setattr(confined.Package, "moved", lambda self: True)
    for command in (installed.apply, installed.revert, installed.survey):
        with pytest.raises(GuardError, match="replaced by another folder 3 times"):
            command(site / "executorch", TARGETS)
    assert snapshot(tmp_path) == before


# Issue 25, cases 4 and 8: what a run reads once it holds the lock, and a
# lock that someone else holds.

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


def test_a_reinstall_while_apply_waits_is_read_after_the_lock(tmp_path: Path) -> None:
    """Case 4: while apply waits for the lock, ExecuTorch is reinstalled as
    a release that ships a target the old one did not. apply reads RECORD
    once it holds the lock, so it patches that target too."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    fresh = tmp_path / "fresh"
    shutil.copytree(root, fresh)  # the new release: every target
    record = next(site.glob("*.dist-info")) / "RECORD"
    new_record = record.read_text()
    xnnpack = "backends/xnnpack/operators/node_visitor.py"
    # The old release ships no XNNPACK backend.
    shutil.rmtree(root / "backends" / "xnnpack")
    record.write_text(
        "".join(
            line
            for line in new_record.splitlines(keepends=True)
            if not line.startswith("executorch/backends/xnnpack/")
        )
    )
    assert f"not shipped          {xnnpack}" in cli(site, "status").stdout
    helper = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_SWAP, str(root), str(site / "old"), str(fresh)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout.readline() == "locked\n"
    run = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "apply"],
        env=_cli_env(site),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert "waiting for" in run.stderr.readline()
    record.write_text(new_record)  # pip writes the new RECORD...
    helper.communicate("go\n", timeout=60)  # ...and the new folder
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert f"patched {root / xnnpack}" in out
    assert set(target_states(site).values()) == {"patched"}
    status = cli(site, "status")
    assert status.stdout.endswith("Patched. `revert` restores the stock files.\n")


@pytest.mark.parametrize("command", ["apply", "revert", "run"])
def test_a_lock_held_by_another_process_is_named_and_waited_for_a_while(
    tmp_path: Path, command: str
) -> None:
    """Case 8: any process can hold an flock on the package folder (here a
    plain Python, not this tool). Each command names it, waits for it a
    bounded time (--wait), then says so in one line, exit 2, nothing
    changed."""
    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    helper = _holder(site / "executorch")
    try:
        args = [command, "--wait", "1"]
        if command == "run":
            args += ["--", sys.executable, "-c", "pass"]
        start = time.monotonic()
        result = cli(site, *args, timeout=60)
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
    before = snapshot(tmp_path)
    forged = "#\x1b[2K\x1b[32mPatched.\x1b[0m\r\n" + _HOLD
    helper = _holder(site / "executorch", script=forged)
    try:
        result = cli(site, "apply", "--wait", "1", timeout=60)
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
    waited 30 s and gave up with exit 2 (ddcd504: forever). It answers
    within 5 s, exit 0, naming the holder, and says what it could not be
    sure of; apply still waits (test above)."""
    site = make_site(tmp_path / "site")
    root = site / "executorch"
    if holder == "flock":
        if shutil.which("flock") is None:
            pytest.skip("no flock(1)")
        helper = subprocess.Popen(
            ["flock", str(root), sys.executable, "-c",
             "import sys; print('locked', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        helper.stdout.readline()
        shown = f"process {helper.pid} (flock /"
    else:
        helper = _holder(root)
        shown = f"process {helper.pid} ({sys.executable} -c "
    before = snapshot(tmp_path)
    try:
        start = time.monotonic()
        result = cli(site, "status", timeout=120)
        took = time.monotonic() - start
    finally:
        helper.communicate("", timeout=60)
    assert result.returncode == 0, result.stderr
    assert took < 5, took
    assert "Stock. `apply` patches it." in result.stdout, result.stdout
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"Read without the lock on {root}, which {shown}"), last
    assert "what is above may already be out of date" in last
    (waiting,) = result.stderr.splitlines()
    assert waiting.startswith(f"waiting for {shown}"), waiting
    assert "then status reads without it" in waiting
    assert snapshot(tmp_path) == before


def test_a_shared_holder_lets_status_read(tmp_path: Path) -> None:
    """A shared hold (a reader) blocks apply, not status; apply gives up
    after its default wait (ddcd504 waited until the test's timeout)."""
    site = make_site(tmp_path / "site")
    helper = _holder(site / "executorch", "sh")
    try:
        status = cli(site, "status", timeout=120)
        applied = cli(site, "apply", timeout=120)
    finally:
        helper.communicate("", timeout=60)
    assert status.returncode == 0 and status.stderr == "", status.stderr
    assert applied.returncode == 2 and "is locked by process" in applied.stderr


@pytest.mark.parametrize("signame", ["TERM", "HUP", "INT"])
def test_status_interrupted_while_it_waits_says_so_in_one_line(
    tmp_path: Path, signame: str
) -> None:
    """Case 9: SIGTERM (or SIGHUP) to status as it waits: one line, as for
    SIGINT, and 128+N."""
    site = make_site(tmp_path / "site")
    helper = _holder(site / "executorch")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "executorch_device_guard", "status"],
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
    assert err == f"executorch-device-guard: error: interrupted (SIG{signame}).\n"
    assert out == ""
