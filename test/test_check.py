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
    problems = Row("emitter", device, {"stock": stock, "patched": patched}).problems
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
    assert "[20/20]" in result.stderr  # progress
    report = json.loads(result.stdout)
    assert report["ok"] and report["executorch_version"] == "1.5.1"
    rows = {(row["path"], row["device"]): row for row in report["rows"]}
    assert list(rows) == [
        ("emitter", "cpu"),
        ("emitter", "meta"),
        ("emitter", "fake:cuda:0"),
        ("emitter", "fake:mps:0"),
        ("emitter", "fake:xpu:0"),
        ("xnnpack", "cpu"),
        ("xnnpack", "fake:cuda:0"),
        ("bundled", "cpu"),
        ("bundled", "meta"),
        ("bundled", "fake:cuda:0"),
    ]
    for key, row in rows.items():
        stock, patched = row["stock"], row["patched"]
        if key[1] == "cpu":
            assert stock["result"]["files"] == patched["result"]["files"]
            continue
        if key[1] == "meta":
            assert stock["summary"].endswith("NULL pointer access"), key
        else:
            assert stock["returncode"] == -11, key
            assert stock["summary"] == "SIGSEGV (exit 139)", key
        device = key[1].replace("fake:", "")
        assert f"is on device {device}," in patched["summary"], key
    assert rows[("emitter", "meta")]["stock"]["summary"] == (
        "InternalError: Failed with error: NULL pointer access"
    )
    assert rows[("bundled", "meta")]["stock"]["summary"] == (
        "ValueError: NULL pointer access"
    )
    assert "'0.weight' is on device cuda:0," in (
        rows[("emitter", "fake:cuda:0")]["patched"]["summary"]
    )


def test_check_on_a_users_model_file(tmp_path: Path) -> None:
    model_file = tmp_path / "my_model.py"
    model_file.write_text(
        "import torch\n\n"
        "def make():\n"
        "    model = torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3), torch.nn.Tanh())\n"
        "    return model.eval(), (torch.ones(1, 2, 8),)\n"
    )
    result = run_check(
        "--model",
        f"{model_file}:make",
        "--paths",
        "emitter",
        "--devices",
        "cpu",
        "fake:cuda:0",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "path",
        "device",
        "stock",
        "ExecuTorch",
        "patched",
        "ExecuTorch",
    ]
    assert lines[2].split() == ["emitter", "cpu", "ok", "ok"]
    assert lines[3].startswith("emitter  fake:cuda:0  SIGSEGV (exit 139)")
    assert "'0.weight' is on device cuda:0 ..." in lines[3]
    assert lines[-1].startswith("OK: patched ExecuTorch crashes nowhere")
