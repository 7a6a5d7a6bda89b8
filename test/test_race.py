# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply and revert racing on one installation, with status reading alongside,
and a package folder swapped while they wait for its lock."""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO
from executorch_device_guard import installed
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
    assert "waiting for another" in run.stderr.readline()
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
    from executorch_device_guard import confined
    from executorch_device_guard.errors import GuardError

    site = make_site(tmp_path / "site")
    before = snapshot(tmp_path)
    monkeypatch.setattr(confined.Package, "moved", lambda self: True)
    for command in (installed.apply, installed.revert, installed.survey):
        with pytest.raises(GuardError, match="replaced by another folder 3 times"):
            command(site / "executorch", TARGETS)
    assert snapshot(tmp_path) == before
