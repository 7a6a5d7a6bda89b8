# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply and revert racing on one installation, with status reading alongside."""

import threading
import time
from pathlib import Path

from sites import assert_only_targets_changed, cli, FAULT, make_site, snapshot


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
