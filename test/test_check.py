# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check``: the matrix it prints and the rule behind its exit code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from executorch_device_guard.check import Row
from executorch_device_guard.runner import Outcome

NAMED = {
    "outcome": "error",
    "type": "InternalError",
    "message": "'w' is on device cuda:0, ...",
}
CPU_OK = {"outcome": "ok", "files": {"program.pte": "ab"}}


@pytest.mark.parametrize(
    "device,stock,patched,problem",
    [
        ("fake:cuda:0", Outcome(-11, None, ""), Outcome(1, NAMED, ""), None),
        ("fake:cuda:0", Outcome(-11, None, ""), Outcome(-11, None, ""), "crashed"),
        (
            "meta",
            Outcome(1, NAMED, ""),
            Outcome(1, {**NAMED, "message": "NULL pointer access"}, ""),
            "does not name the device",
        ),
        ("cuda", Outcome(-11, None, ""), Outcome(1, NAMED, ""), None),
        ("cpu", Outcome(0, CPU_OK, ""), Outcome(0, CPU_OK, ""), None),
        (
            "cpu",
            Outcome(0, CPU_OK, ""),
            Outcome(0, {**CPU_OK, "files": {"program.pte": "cd"}}, ""),
            "bytes differ",
        ),
        ("cpu", Outcome(0, CPU_OK, ""), Outcome(1, NAMED, ""), "CPU export failed"),
    ],
)
def test_verdict(device: str, stock: Outcome, patched: Outcome, problem) -> None:
    problems = Row(device, {"stock": stock, "patched": patched}).problems
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def run_check(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "executorch_device_guard", "check", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def test_default_check_json() -> None:
    result = run_check("--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[10/10]" in result.stderr  # progress
    report = json.loads(result.stdout)
    assert report["ok"] and report["executorch_version"] == "1.5.1"
    rows = {row["device"]: row for row in report["rows"]}
    assert list(rows)[:5] == ["cpu", "meta", "fake:cuda:0", "fake:mps:0", "fake:xpu:0"]
    assert (
        rows["cpu"]["stock"]["result"]["files"]
        == rows["cpu"]["patched"]["result"]["files"]
    )
    assert (
        rows["meta"]["stock"]["summary"]
        == "InternalError: Failed with error: NULL pointer access"
    )
    for device in ("cuda:0", "mps:0", "xpu:0"):
        row = rows[f"fake:{device}"]
        assert row["stock"]["returncode"] == -11
        assert row["stock"]["summary"] == "SIGSEGV (exit 139)"
        assert f"'0.weight' is on device {device}," in row["patched"]["summary"]


def test_check_on_a_users_model_file(tmp_path: Path) -> None:
    model_file = tmp_path / "my_model.py"
    model_file.write_text(
        "import torch\n\n"
        "def make():\n"
        "    model = torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3), torch.nn.Tanh())\n"
        "    return model.eval(), (torch.ones(1, 2, 8),)\n"
    )
    result = run_check(
        "--model", f"{model_file}:make", "--devices", "cpu", "fake:cuda:0"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["device", "stock", "emitter", "patched", "emitter"]
    assert lines[2].split()[:3] == ["cpu", "ok", "ok"]
    assert lines[3].startswith("fake:cuda:0  SIGSEGV (exit 139)")
    assert "'0.weight' is on device cuda:0" in lines[3]
