# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check``: the matrix it prints and the rule behind its exit code."""

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
import torch

from conftest import REPO
from executorch_device_guard.check import Row
from executorch_device_guard.runner import Outcome

NAMED = {
    "outcome": "error",
    "type": "InternalError",
    "message": "'w' is on device cuda:0, ...",
}
CPU_OK = {"outcome": "ok", "files": {"program.pte": "ab"}}
OTHER = {"outcome": "error", "type": "AttributeError", "message": "no attribute 'x'"}
SETUP = {"outcome": "setup-error", "type": "SetupError", "message": "--model m: ..."}


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
    row = Row("emitter", device, {"stock": stock, "patched": patched})
    assert row.tool_errors == []
    if problem is None:
        assert row.problems == []
    else:
        assert len(row.problems) == 1 and problem in row.problems[0]


@pytest.mark.parametrize(
    "device,stock,patched,tool_error",
    [
        # Stock and patched fail alike on a fake device: the tool's fake did
        # not reach the read. An error of the tool, no verdict on the patch.
        ("fake:cuda:0", Outcome(1, OTHER, ""), Outcome(1, OTHER, ""), "fake device"),
        ("cpu", Outcome(1, SETUP, ""), Outcome(1, SETUP, ""), "could not set up"),
        (
            "fake:cuda:0",
            Outcome(0, None, ""),
            Outcome(1, NAMED, ""),
            "without a result",
        ),
        # A real device that fails before the read on both: nothing to judge.
        ("meta", Outcome(1, OTHER, ""), Outcome(1, OTHER, ""), None),
    ],
)
def test_tool_errors_are_no_verdict(
    device: str, stock: Outcome, patched: Outcome, tool_error
) -> None:
    row = Row("xnnpack", device, {"stock": stock, "patched": patched})
    assert row.problems == []
    if tool_error is None:
        assert row.tool_errors == []
    else:
        assert tool_error in " ".join(row.tool_errors)


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
    # No temporary path (the overlays are deleted on exit).
    assert "device-guard-" not in result.stdout
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
        assert row["problems"] == row["tool_errors"] == [], key
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


BATCHNORM_MODEL = """
import torch
from executorch.examples.models.model_base import EagerModelBase


class ConvBatchNorm(EagerModelBase):
    def get_eager_model(self):
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.Conv2d(8, 4, 3, groups=4),
            torch.nn.BatchNorm2d(4),
        )

    def get_example_inputs(self):
        return (torch.randn(1, 3, 16, 16),)
"""

# Where stock ExecuTorch reads device memory on the host, path by path.
CRASH_SITES = {
    "emitter": r'emit/_emitter\.py", line 460 in _tensor_spec_to_evalue',
    "xnnpack": r'operators/node_visitor\.py", line \d+ in get_serialized_buffer_index',
    "bundled": r'bundled_program/core\.py", line \d+ in _emit_bundled_tensor',
}


def test_batchnorm_model_on_every_path(tmp_path: Path) -> None:
    """Conv + BatchNorm, as an EagerModelBase class: XNNPACK fuses the two into
    new weights; those stay on the device, and the crash is ExecuTorch's."""
    model_file = tmp_path / "bn_model.py"
    model_file.write_text(BATCHNORM_MODEL)
    result = run_check("--model", f"{model_file}:ConvBatchNorm", "--json", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    report = json.loads(result.stdout)
    assert report["ok"] and len(report["rows"]) == 10
    for row in report["rows"]:
        stock, patched = row["stock"], row["patched"]
        if row["device"] == "cpu":
            assert stock["result"]["files"] == patched["result"]["files"]
            continue
        if row["device"].startswith("fake:"):
            assert stock["summary"] == "SIGSEGV (exit 139)", row
            assert re.search(CRASH_SITES[row["path"]], stock["stderr"]), stock["stderr"]
        device = row["device"].replace("fake:", "")
        assert f"is on device {device}," in patched["summary"], row
    xnnpack = [r for r in report["rows"] if r["path"] == "xnnpack"][1]
    # The fused weight that XNNPACK's BatchNorm fusion made on the device.
    assert "_fused_bn' is on device cuda:0," in xnnpack["patched"]["summary"]


def test_executorch_example_model_as_it_is() -> None:
    """ExecuTorch's own ResNet8 (EagerModelBase), through XNNPACK."""
    model = "executorch.examples.models.mlperf_tiny.resnet8:ResNet8Model"
    result = run_check("--model", model, "--paths", "xnnpack")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    lines = result.stdout.splitlines()
    assert lines[2].split() == ["xnnpack", "cpu", "ok", "ok"]
    assert lines[3].startswith("xnnpack  fake:cuda:0  SIGSEGV (exit 139)")
    assert lines[3].endswith("is on device cuda:0 ...")


def test_verbose_and_log_dir_show_each_childs_stderr(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = run_check(
        "--paths",
        "emitter",
        "--devices",
        "fake:cuda:0",
        "--verbose",
        "--log-dir",
        str(logs),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The table keeps one line per row.
    assert len(result.stdout.splitlines()) == 5
    stock = (logs / "emitter_fake_cuda_0_stock.log").read_text()
    patched = (logs / "emitter_fake_cuda_0_patched.log").read_text()
    assert "Fatal Python error: Segmentation fault" in stock
    assert re.search(CRASH_SITES["emitter"], stock)
    # The whole error, not only its first line: the emitter's node dump too.
    assert "Traceback (most recent call last)" in patched
    assert "Here is the node in the graph module" in patched
    assert stock in result.stderr and patched in result.stderr
    assert "===== emitter fake:cuda:0 patched: InternalError:" in result.stderr


def run_checks(*argvs: List[str]) -> List[subprocess.CompletedProcess]:
    with concurrent.futures.ThreadPoolExecutor(len(argvs)) as pool:
        return list(pool.map(lambda argv: run_check(*argv), argvs))


def assert_refused(result: subprocess.CompletedProcess, *message: str) -> None:
    """Exit 2, one line naming the problem, no traceback, no export run.

    ``message``: literal parts, with ``...`` standing for any text between them.
    """
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    pattern = "executorch-device-guard: error: " + ".*".join(
        re.escape(part) for part in message
    )
    assert len(lines) == 1 and re.fullmatch(pattern, lines[0]), result.stderr
    assert "Traceback" not in result.stderr
    assert "exports" not in result.stderr


def test_selections_that_run_no_export_are_refused() -> None:
    started = time.monotonic()
    results = run_checks(
        ["--jobs", "0"],
        ["--jobs", "-3"],
        ["--devices", "bogus"],
        ["--devices", "cpu", "fake:cuda"],
        ["--paths", "xnnpack", "--devices", "meta"],
    )
    assert time.monotonic() - started < 30  # nothing is imported
    assert_refused(results[0], "--jobs must be at least 1, not 0")
    assert_refused(results[1], "--jobs must be at least 1, not -3")
    assert_refused(
        results[2],
        "unknown device 'bogus'; choose from cpu, meta, fake:cuda:0, "
        "fake:mps:0, fake:xpu:0, cuda",
    )
    assert_refused(results[3], "unknown device 'fake:cuda'; choose from ", "")
    assert_refused(
        results[4],
        "--devices meta selects no export: the paths xnnpack run on cpu, fake:cuda:0",
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_is_refused() -> None:
    assert_refused(
        run_check("--devices", "cuda"),
        "--devices cuda selects no export: this machine has no CUDA device",
    )


def test_a_bad_model_is_refused_before_any_export(tmp_path: Path) -> None:
    (tmp_path / "models_here.py").write_text(
        "import torch\n" "not_a_model = 42\n" "module_only = torch.nn.Linear(2, 2)\n"
    )
    missing = tmp_path / "missing.py"
    here = tmp_path / "models_here.py"
    started = time.monotonic()
    # Warm parents and fresh processes check the model the same way; --fresh
    # starts one interpreter (the check) instead of two warm parents.
    results = run_checks(
        ["--model", f"{missing}:model"],
        ["--model", "no_such_package.models:model"],
        ["--fresh", "--model", f"{here}:nope"],
        ["--fresh", "--model", f"{here}:not_a_model"],
        ["--fresh", "--model", f"{here}:module_only"],
    )
    assert time.monotonic() - started < 120
    assert_refused(results[0], f"--model {missing}:model: no such file {missing}; ", "")
    assert_refused(
        results[1],
        "--model no_such_package.models:model: no module named 'no_such_package' ",
        "",
    )
    assert_refused(
        results[2], f"--model {here}:nope: ", " has no attribute 'nope'; ", ""
    )
    assert_refused(
        results[3], f"--model {here}:not_a_model: got a value of type int; give ", ""
    )
    assert_refused(
        results[4],
        f"--model {here}:module_only: got a torch.nn.Module without example inputs; ",
        "",
    )
