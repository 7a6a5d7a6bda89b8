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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest
import torch

from conftest import REPO
from executorch_device_guard.check import matrix
from executorch_device_guard.check.matrix import Row
from executorch_device_guard.check.runner import Outcome
from sites import make_site, patch_in_place, ship_the_fix, snapshot
from throwaway import (
    copy_of_installed_executorch,
    leftovers,
    survivors,
    venv_over_this_environment,
    venv_with_installed_executorch,
)

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


BUNDLE = "bundled_program.bpte"


def bundled(files: str, host_copy: Optional[str] = None) -> Outcome:
    result = {"outcome": "ok", "files": {BUNDLE: files}}
    if host_copy is not None:
        result["host_copy"] = {BUNDLE: host_copy}
    return Outcome(0, result, "")


def test_a_bundled_device_row_compares_host_copies_of_its_own_tensors() -> None:
    """The bundled program reads test data on a device from a host copy: a
    device row passes when patched's bundle equals the bundle that its own
    child made of host copies of the same tensors, whatever the CPU row's
    bundle holds (a GPU computes other low bits than a CPU)."""
    crash = Outcome(-11, None, "")
    cpu = Row("bundled", "cpu", {"stock": bundled("cc"), "patched": bundled("cc")})
    same = Row("bundled", "cuda", {"stock": crash, "patched": bundled("gg", "gg")})
    assert same.problems == [] and same.reached
    verdict = matrix.judge([cpu, same])
    assert verdict.exit_code == 0, verdict.lines()
    assert verdict.lines()[-1].startswith(
        "OK: patched ExecuTorch crashes nowhere, names the device in every "
        "error, reads bundled test data from a host copy"
    )
    differs = Row("bundled", "cuda", {"stock": crash, "patched": bundled("gg", "hh")})
    assert "differs from the bundle of their host copies" in differs.problems[0]
    assert matrix.judge([cpu, differs]).exit_code == 1
    # On every other path, a device's data read as if it were the host's.
    # A child that made no bundle of host copies (another form of the tool's
    # child) gives no verdict, not a FAIL.
    unmade = Row("bundled", "cuda", {"stock": crash, "patched": bundled("gg")})
    assert unmade.problems == [] and "no bundle of host copies" in unmade.tool_errors[0]
    emitter = Row("emitter", "fake:cuda:0", {"stock": crash, "patched": bundled("gg")})
    assert "exports where stock fails" in emitter.problems[0]


DRIFTS_ON_THE_DEVICE = """
import sys

import torch


class Drifts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        # As a GPU's kernels do: other low bits on the device than on a CPU.
        if "fake:cuda:0" in sys.argv:
            y = y + 1e-6
        return y


def make():
    return Drifts().eval(), (torch.ones(2, 4),)
"""


def test_a_bundle_whose_device_outputs_differ_from_the_cpus_is_ok(
    tmp_path: Path,
) -> None:
    """Outputs computed on the device that differ from the CPU row's in
    their low bits (swin_t on an H200) are no FAIL: the patch read a host
    copy of the device's own tensors."""
    model = tmp_path / "drifts.py"
    model.write_text(DRIFTS_ON_THE_DEVICE)
    result = run_check(
        "--model",
        f"{model}:make",
        "--paths",
        "bundled",
        "--devices",
        "cpu",
        "fake:cuda:0",
        "--json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["device"]: row for row in json.loads(result.stdout)["rows"]}
    cpu, device = (
        rows["cpu"]["patched"]["result"],
        rows["fake:cuda:0"]["patched"]["result"],
    )
    assert device["files"] != cpu["files"]  # the device's outputs differ
    assert device["files"] == device["host_copy"]
    assert rows["fake:cuda:0"]["reached"]


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


def run_check(
    *args: str,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(REPO))
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "executorch_device_guard", "check", *args]
    return subprocess.run(
        cmd, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_default_check_json() -> None:
    result = run_check("--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[24/24]" in result.stderr  # progress
    report = json.loads(result.stdout)
    assert report["ok"] and report["executorch_version"] == "1.5.1"
    # No temporary path (check's folder is removed on exit).
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
        ("vulkan", "cpu"),
        ("vulkan", "fake:cuda:0"),
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
        if key == ("bundled", "fake:cuda:0"):
            # Test data: read from a host copy, the CPU row's bytes.
            assert patched["summary"] == "ok", key
            assert patched["result"]["files"] == (
                rows[("bundled", "cpu")]["stock"]["result"]["files"]
            )
        elif key == ("bundled", "meta"):
            assert "Cannot copy out of meta tensor" in patched["summary"], key
        else:
            assert f"is on device {device}," in patched["summary"], key
        assert row["reached"], key
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
        "constants",
        "stock",
        "ExecuTorch",
        "patched",
        "ExecuTorch",
    ]
    # The Conv1d's weight and bias: the constants on the guarded path.
    assert lines[2].split() == ["emitter", "cpu", "2", "ok", "ok"]
    assert lines[3].startswith("emitter  fake:cuda:0  2          SIGSEGV (exit 139)")
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
    "vulkan": r'vulkan_graph_builder\.py", line \d+ in maybe_add_constant_tensor',
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
    assert report["ok"] and len(report["rows"]) == 12
    for row in report["rows"]:
        stock, patched = row["stock"], row["patched"]
        if row["device"] == "cpu":
            assert stock["result"]["files"] == patched["result"]["files"]
            continue
        if row["device"].startswith("fake:"):
            assert stock["summary"] == "SIGSEGV (exit 139)", row
            assert re.search(CRASH_SITES[row["path"]], stock["stderr"]), stock["stderr"]
        assert row["reached"] and row["problems"] == [], row
        if row["path"] == "bundled":
            # Test data: a host copy of it is read (meta has none to copy).
            assert patched["summary"] in (
                "ok",
                "NotImplementedError: Cannot copy out of meta tensor; no data!",
            ), row
            continue
        device = row["device"].replace("fake:", "")
        assert f"is on device {device}," in patched["summary"], row
    # The fused weights that XNNPACK's and Vulkan's BatchNorm fusion made on
    # the device.
    for path in ("xnnpack", "vulkan"):
        fused = [r for r in report["rows"] if r["path"] == path][1]
        assert "_fused_bn' is on device cuda:0," in fused["patched"]["summary"]


def test_the_vulkan_path_crashes_stock_and_errors_patched() -> None:
    """VulkanPartitioner lowers without a Vulkan runtime (a CPU-only machine
    is enough): its serializer reads each constant it takes from the host."""
    result = run_check("--paths", "vulkan", "--json", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    report = json.loads(result.stdout)
    cpu, fake = report["rows"]
    assert (cpu["path"], cpu["device"]) == ("vulkan", "cpu")
    assert cpu["stock"]["result"]["files"] == cpu["patched"]["result"]["files"]
    assert (fake["path"], fake["device"]) == ("vulkan", "fake:cuda:0")
    assert fake["reached"], fake
    assert fake["stock"]["summary"] == "SIGSEGV (exit 139)"
    assert re.search(CRASH_SITES["vulkan"], fake["stock"]["stderr"])
    assert fake["patched"]["summary"] == (
        "RuntimeError: Constant tensor data for '0.weight' is on device cuda:0, "
        "but the Vulkan delegate serializes constant data from CPU memory. Lower "
        "the model with its constants in CPU memory."
    )


def test_executorch_example_model_as_it_is() -> None:
    """ExecuTorch's own ResNet8 (EagerModelBase), through XNNPACK."""
    model = "executorch.examples.models.mlperf_tiny.resnet8:ResNet8Model"
    result = run_check("--model", model, "--paths", "xnnpack")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    lines = result.stdout.splitlines()
    cpu, device = lines[2].split(), lines[3].split()
    assert cpu[:2] + cpu[3:] == ["xnnpack", "cpu", "ok", "ok"]
    assert device[:2] + device[3:6] == [
        "xnnpack",
        "fake:cuda:0",
        "SIGSEGV",
        "(exit",
        "139)",
    ]
    assert int(cpu[2]) == int(device[2]) > 10  # ResNet8's convolutions and more
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


def test_the_import_hook_on_pythonpath_or_under_run_leaves_the_table_as_it_is():
    """Each column runs its own emitter in every process, whatever the
    environment turns on: ``run``'s bootstrap on PYTHONPATH, or ``run --
    executorch-device-guard check`` itself. The table is a plain check's,
    stock failures in the stock column, and OK."""
    bootstrap = REPO / "executorch_device_guard" / "bootstrap"
    args = ["--paths", "emitter", "--devices", "cpu", "fake:cuda:0"]
    plain = run_check(*args)
    hooked = run_check(*args, env={"PYTHONPATH": f"{bootstrap}{os.pathsep}{REPO}"})
    tool = [sys.executable, "-m", "executorch_device_guard"]
    under_run = subprocess.run(
        [*tool, "run", "--", *tool, "check", *args],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "SIGSEGV (exit 139)" in plain.stdout
    assert (hooked.returncode, hooked.stdout) == (0, plain.stdout), hooked.stderr
    assert (under_run.returncode, under_run.stdout) == (0, plain.stdout), (
        under_run.stderr
    )


def test_after_apply_the_stock_column_is_a_plain_checks(tmp_path: Path) -> None:
    """apply turns the hook on at every start of the environment's Python,
    check's own processes included: its stock side still runs ExecuTorch as
    installed, and the table is the one check gave before apply."""
    site = venv_with_installed_executorch(tmp_path / "venv", REPO)
    python = str(site.parents[2] / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    def tool(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [python, "-m", "executorch_device_guard", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )

    args = ["check", "--paths", "emitter", "--devices", "cpu", "fake:cuda:0"]
    plain = tool(*args)
    assert plain.returncode == 0, plain.stdout + plain.stderr[-3000:]
    assert "SIGSEGV (exit 139)" in plain.stdout
    assert tool("apply").returncode == 0
    applied = tool(*args)
    assert (applied.returncode, applied.stdout) == (0, plain.stdout), applied.stderr


def test_a_target_imported_before_the_hook_is_a_tool_error(tmp_path: Path) -> None:
    """A .pth file that imports the emitter at start-up runs before the
    bootstrap turns the hook on: the patched side then ran stock code. No
    verdict (exit 3) names the module and why, never a FAIL of the patch."""
    site = venv_over_this_environment(tmp_path / "venv", REPO)
    (site / "c_early.pth").write_text(
        "import os; os.environ.get('EXECUTORCH_DEVICE_GUARD_CHECK') and "
        "__import__('executorch.exir.emit._emitter')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [str(site.parents[2] / "bin" / "python"), "-m", "executorch_device_guard"]
        + ["check", "--paths", "emitter", "--devices", "cpu", "fake:cuda:0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert "FAIL" not in result.stdout
    assert (
        "executorch.exir.emit._emitter was loaded in a patched process without "
        "the import hook, so it ran without the fix: imported before the hook "
        "turned on (a .pth file that imports ExecuTorch at start-up?)"
        in result.stdout + result.stderr
    ), result.stdout


# What torch keeps in TMPDIR for itself (its compiled kernels' cache).
TORCH_CACHES = re.compile(r"torchinductor_.*")


def test_check_writes_no_executorch_file_in_tmpdir(tmp_path: Path) -> None:
    """The default check and a model's, each with a TMPDIR of its own, empty:
    both sides import the installed ExecuTorch, so no file of ExecuTorch's
    is in TMPDIR while they run, and nothing of check's is left there after
    (torch keeps caches of its own there)."""
    runs = {}
    for name, args in (
        ("default", []),
        ("model", ["--model", "test/models/decoder.py:make"]),
    ):
        tmpdir = tmp_path / name
        tmpdir.mkdir()
        env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmpdir))
        proc = subprocess.Popen(
            [sys.executable, "-m", "executorch_device_guard", "check", *args],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        runs[name] = (proc, tmpdir)
    seen: Dict[str, Set[str]] = {name: set() for name in runs}
    looks = dict.fromkeys(runs, 0)  # looks that found check's folder
    deadline = time.monotonic() + 900
    try:
        while any(proc.poll() is None for proc, _ in runs.values()):
            assert time.monotonic() < deadline
            for name, (_, tmpdir) in runs.items():
                files = [
                    os.path.relpath(os.path.join(folder, f), tmpdir)
                    for folder, _, names in os.walk(tmpdir)
                    for f in names
                ]
                looks[name] += bool(leftovers(tmpdir))
                seen[name].update(f for f in files if f.endswith((".py", ".pyc")))
            time.sleep(0.05)
        outputs = {name: proc.communicate() for name, (proc, _) in runs.items()}
    finally:
        for proc, _ in runs.values():
            if proc.poll() is None:
                proc.kill()
    for name, (proc, tmpdir) in runs.items():
        out, err = outputs[name]
        assert proc.returncode == 0, (name, out + err[-3000:])
        assert looks[name] > 10, name
        assert not seen[name], (name, len(seen[name]), sorted(seen[name])[:3])
        left = [f for f in os.listdir(tmpdir) if not TORCH_CACHES.fullmatch(f)]
        assert left == [], (name, left)


@pytest.mark.parametrize(
    "side,served,error",
    [
        ("stock", None, None),
        ("stock", {}, "the import hook was on in a stock process"),
        ("patched", None, "the import hook was off in a patched process"),
        ("patched", {"executorch.exir.emit._emitter": "changed"}, None),
        ("patched", {"executorch.exir.emit._emitter": "patched"}, None),
        (
            "patched",
            {"executorch.exir.emit._emitter": "loaded without the import hook"},
            "executorch.exir.emit._emitter was loaded in a patched process "
            "without the import hook",
        ),
        (
            "patched",
            {"executorch.exir.emit._emitter": "unknown"},
            "the import hook served executorch.exir.emit._emitter without the "
            "fix (unknown)",
        ),
    ],
)
def test_a_side_is_what_its_children_say_the_hook_served(side, served, error):
    from executorch_device_guard.check.runner import _served_wrong

    found = _served_wrong(side, served)
    if error is None:
        assert found is None, found
    else:
        assert found is not None and found.startswith(error), found


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
        "import torch\n"
        "not_a_model = 42\n"
        "module_only = torch.nn.Linear(2, 2)\n"
        "def tensor_inputs():\n"
        "    return torch.nn.Linear(2, 2), torch.ones(1, 2)\n"
        "def swapped():\n"
        "    return (torch.ones(1, 2),), torch.nn.Linear(2, 2)\n"
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
        ["--fresh", "--model", "executorch.examples.models.lstm"],
        ["--fresh", "--model", f"{here}:tensor_inputs"],
        ["--fresh", "--model", f"{here}:swapped"],
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
        results[3],
        f"--model {here}:not_a_model: its attribute 'not_a_model' is a value of "
        "type int, not a model; give ",
        "",
    )
    assert_refused(
        results[4],
        f"--model {here}:module_only: its attribute 'module_only' is a "
        "torch.nn.Module without example inputs; give ",
        "",
    )
    assert_refused(
        results[5],
        "--model executorch.examples.models.lstm: its attribute 'model' (the "
        "default when no ':attr' is given) is a module, not a model; model "
        "classes in executorch.examples.models.lstm: LSTMModel (give --model "
        "executorch.examples.models.lstm:LSTMModel)",
    )
    assert_refused(
        results[6],
        f"--model {here}:tensor_inputs: tensor_inputs() returned a tuple "
        "(Linear, Tensor): its example inputs are a Tensor, not a tuple; return "
        "(module, (inputs,)), the inputs in a tuple",
    )
    assert_refused(
        results[7],
        f"--model {here}:swapped: swapped() returned a tuple (tuple, Linear): "
        "the module comes second; return (module, example_inputs), the module "
        "first",
    )


# --------------------------------------------------------------------------
# What no export can check is never OK, and what is not the patch's fault is
# never blamed on it.

NO_CONSTANTS_MODEL = "import torch\nmodel = (torch.nn.ReLU(), (torch.ones(2, 4),))\n"

KWARGS_MODEL = """
import torch


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, scale):
        return self.linear(x) * scale


class Model:
    def get_eager_model(self):
        return Scaled()

    def get_example_inputs(self):
        return (torch.ones(2, 4),)

    def get_example_kwarg_inputs(self):
        return {"scale": torch.tensor(2.0)}
"""

DATA_DEPENDENT_MODEL = """
import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:
            return y
        return -y


def model():
    return Branchy().eval(), (torch.ones(2, 4),)
"""

# Built off CPU: what a factory returning model.cuda() does, on a machine
# without CUDA.
META_MODEL = """
import torch


def model():
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).to("meta")
    return module.eval(), (torch.ones(2, 4, device="meta"),)
"""

Ok = Outcome(0, CPU_OK, "")


def export_error(message: str, stage: str = "device", type_: str = "InternalError"):
    return {"outcome": "error", "type": type_, "message": message, "stage": stage}


def test_a_device_row_where_both_succeed_checks_nothing() -> None:
    """No constant reached the read: no verdict, never OK."""
    for device in ("meta", "fake:cuda:0", "cuda"):
        row = Row("emitter", device, {"stock": Ok, "patched": Ok})
        assert row.problems == [] and row.tool_errors == []
        assert "no constant data reached" in row.unchecked
        assert not row.reached
    rows = [Row("emitter", "fake:cuda:0", {"stock": Ok, "patched": Ok})]
    assert matrix.judge(rows).exit_code == 3
    n_a = Outcome(0, {"outcome": "n/a", "message": "kwargs"}, "")
    rows = [Row("bundled", d, {"stock": n_a, "patched": n_a}) for d in ("cpu", "meta")]
    assert matrix.judge(rows).exit_code == 3
    # One row that reached the read is a verdict.
    reached = Row(
        "emitter",
        "fake:cuda:0",
        {"stock": Outcome(-11, None, ""), "patched": Outcome(1, NAMED, "")},
    )
    assert reached.reached
    assert matrix.judge(rows + [reached]).exit_code == 0


def test_the_patch_is_judged_only_where_it_acts() -> None:
    named = Outcome(1, NAMED, "")
    # Patched refuses where stock succeeds: the guard is wrong.
    row = Row("emitter", "fake:cuda:0", {"stock": Ok, "patched": named})
    assert "refuses where stock" in " ".join(row.problems)
    # Patched exports where stock crashed reading device memory.
    row = Row(
        "emitter", "fake:cuda:0", {"stock": Outcome(-11, None, ""), "patched": Ok}
    )
    assert "exports where stock" in " ".join(row.problems)
    # The model does not export on stock either: CPU, or before any device move.
    fails = Outcome(1, export_error("data-dependent", "export", "UserError"), "")
    for device in ("cpu", "fake:cuda:0", "meta"):
        row = Row("emitter", device, {"stock": fails, "patched": fails})
        assert row.problems == [] and row.tool_errors == [], device
        assert "does not export this model with stock ExecuTorch either" in row.unchecked
    assert matrix.judge([row]).exit_code == 3
    # After the move, failing alike on a fake device is the tool's fault.
    after = Outcome(1, export_error("no attribute 'x'"), "")
    row = Row("emitter", "fake:cuda:0", {"stock": after, "patched": after})
    assert "did not reach" in " ".join(row.tool_errors)
    # A child that imported another ExecuTorch than the installed one.
    wrong = Outcome(1, NAMED, "", tool_error="it imported ExecuTorch from /x")
    row = Row(
        "emitter", "fake:cuda:0", {"stock": Outcome(-11, None, ""), "patched": wrong}
    )
    assert "imported ExecuTorch from /x" in " ".join(row.tool_errors)
    assert row.problems == []


def test_a_crash_alike_before_the_device_is_not_blamed_on_the_patch() -> None:
    """Each child records how far it got, so a crash says where it happened."""

    def crash(stage, signum=signal.SIGSEGV):
        return Outcome(-signum, None, "", stage=stage)

    for device in ("cpu", "fake:cuda:0", "meta"):
        row = Row(
            "emitter", device, {"stock": crash("export"), "patched": crash("export")}
        )
        assert row.problems == [] and row.tool_errors == [], device
        assert "does not export this model with stock ExecuTorch either" in row.unchecked
        assert "SIGSEGV" in row.unchecked
    assert matrix.judge([row]).exit_code == 3
    # On CPU the whole export is before any device.
    row = Row("emitter", "cpu", {"stock": crash(None), "patched": crash(None)})
    assert row.problems == [] and "crash with SIGSEGV" in row.unchecked
    # At the guarded read (after the move), a patched crash is the patch's.
    for stock in (crash("device"), crash("export")):
        outcomes = {"stock": stock, "patched": crash("device")}
        row = Row("emitter", "fake:cuda:0", outcomes)
        assert "patched emitter crashed" in " ".join(row.problems)
    # A patched crash where stock did not crash, or crashed otherwise.
    for stock in (Ok, Outcome(1, export_error("x", "export"), ""), crash("export", 7)):
        row = Row("emitter", "cpu", {"stock": stock, "patched": crash("export")})
        assert "patched emitter crashed" in " ".join(row.problems)
        assert matrix.judge([row]).exit_code == 1


SEGFAULTING_FORWARD = """
import ctypes

import torch


class Crashes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        ctypes.string_at(0)  # a segfault while torch.export traces it
        return self.linear(x)


model = (Crashes().eval(), (torch.ones(2, 4),))
"""


def test_a_model_that_crashes_in_export_is_not_blamed_on_the_patch(
    tmp_path: Path,
) -> None:
    crashes = write_model(tmp_path, SEGFAULTING_FORWARD, "crashes.py")
    args = ["--model", f"{crashes}:model", "--paths", "emitter"]
    result = run_check(*args, "--devices", "cpu", "fake:cuda:0")
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert re.fullmatch(
        r"NO VERDICT: the model does not export with stock or patched "
        r"ExecuTorch: torch\.export crashes with SIGSEGV \(exit 139\), before "
        r"anything is on a device, so check stopped there \(2 of 4 exports left "
        r"out; --verbose shows each child's stderr\)\.\n",
        result.stdout,
    ), result.stdout


NUMPY_AND_RANDOM_WEIGHTS = """
import random

import numpy as np
import torch


def model():
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    with torch.no_grad():
        weight = np.random.randn(3, 4).astype("float32")
        module[0].weight.copy_(torch.from_numpy(weight))
        module[0].bias.copy_(torch.tensor([random.gauss(0, 1) for _ in range(3)]))
    return module, (torch.ones(2, 4),)
"""


def test_numpy_and_random_are_seeded_alike_in_every_child(tmp_path: Path) -> None:
    """Stock and patched children build the same weights from numpy's and
    Python's random generators, as from torch's."""
    seeded = write_model(tmp_path, NUMPY_AND_RANDOM_WEIGHTS, "np_random.py")
    args = ["--model", f"{seeded}:model", "--paths", "emitter"]
    result = run_check(*args, "--devices", "cpu", "fake:cuda:0")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "bytes differ" not in result.stdout


def test_readers_that_go_away_change_no_exit_code() -> None:
    """``check 2>/closed-pipe`` and ``check 2>&1 | head -1``: the progress
    lines are dropped, and the run ends with its verdict's exit code."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "executorch_device_guard", "check"]
    cmd += ["--paths", "emitter", "--devices", "cpu", "fake:cuda:0"]
    no_stderr = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    no_stderr.stderr.close()  # gone before anything is written
    out = no_stderr.stdout.read()
    assert no_stderr.wait(600) == 0, out
    assert "OK: patched ExecuTorch crashes nowhere" in out
    head = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert head.stdout.readline().startswith("running 4 exports")
    head.stdout.close()
    assert head.wait(600) == 0


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_log_that_cannot_be_written_keeps_the_verdict(
    tmp_path: Path, as_json: bool
) -> None:
    """A full disk under --log-dir once the exports ran: the table (or the
    JSON report) and the verdict are printed, then one line naming the log;
    exit 4 (as for any output lost), not 2, which says no export ran. The
    JSON report's exit code is the process's."""
    logs = tmp_path / "logs"
    result = run_check(
        "--paths",
        "emitter",
        "--devices",
        "cpu",
        "fake:cuda:0",
        "--log-dir",
        str(logs),
        *(["--json"] if as_json else []),
        env={"EXECUTORCH_DEVICE_GUARD_TEST_FAULT": "step:2:error"},
    )
    assert result.returncode == 4, result.stdout + result.stderr[-3000:]
    if as_json:
        report = json.loads(result.stdout)
        assert report["ok"] is True and report["exit_code"] == 4, report
    else:
        assert "OK: patched ExecuTorch crashes nowhere" in result.stdout
        assert "emitter  fake:cuda:0" in result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [
        f"executorch-device-guard: error: --log-dir {logs}: could not write "
        f"{logs / 'emitter_cpu_patched.log'} (No space left on device (test "
        "fault)); it and the logs after it are missing"
    ], result.stderr
    assert sorted(p.name for p in logs.iterdir()) == ["emitter_cpu_stock.log"]


LAUNCHER = """
import sys

from executorch_device_guard.cli import main

sys.exit(main())
"""


def shadowed_folder(tmp_path: Path) -> Path:
    """A folder holding an ``executorch`` package of its own (an empty one)."""
    here = tmp_path / "here"
    (here / "executorch").mkdir(parents=True)
    (here / "executorch" / "__init__.py").write_text("")
    return here


def launcher(tmp_path: Path) -> Path:
    """The tool as its console script runs it: ``python -m`` would put the
    current folder on the tool's own path, which it refuses up front."""
    path = tmp_path / "edg.py"
    path.write_text(LAUNCHER)
    return path


def test_an_executorch_folder_here_changes_no_result(tmp_path: Path) -> None:
    """Warm and fresh children import the installed ExecuTorch, whatever the
    current folder holds, and give the same results."""
    here, tool = shadowed_folder(tmp_path), launcher(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for mode in ([], ["--fresh"]):
        cmd = [sys.executable, str(tool), "check", *mode, "--paths", "emitter"]
        cmd += ["--devices", "cpu", "fake:cuda:0"]
        result = subprocess.run(
            cmd, cwd=here, env=env, capture_output=True, text=True, timeout=900
        )
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        assert "OK: patched ExecuTorch crashes nowhere" in result.stdout


def test_paths_and_devices_given_twice_run_once() -> None:
    pairs = matrix.select(["emitter", "emitter"], ["cpu", "cpu", "meta"], False)
    assert pairs == [("emitter", "cpu"), ("emitter", "meta")]


def write_model(tmp_path: Path, text: str, name: str = "user_model.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nothing_checked_is_no_verdict(tmp_path: Path) -> None:
    relu = write_model(tmp_path, NO_CONSTANTS_MODEL, "relu.py")
    kwargs = write_model(tmp_path, KWARGS_MODEL, "kwargs_model.py")
    results = run_checks(
        [
            "--model",
            f"{relu}:model",
            "--paths",
            "emitter",
            "--devices",
            "meta",
            "fake:cuda:0",
            "fake:mps:0",
        ],
        ["--model", f"{kwargs}:Model", "--paths", "bundled"],
    )
    for result in results:
        assert result.returncode == 3, result.stdout + result.stderr[-3000:]
        assert "OK" not in result.stdout
        assert "NO VERDICT" in result.stdout
        assert "Traceback" not in result.stderr
    assert "no constant data reached the host read" in results[0].stdout
    assert "n/a (bundled test cases take positional inputs only)" in results[1].stdout


def test_a_model_that_stock_cannot_export_is_not_blamed_on_the_patch(
    tmp_path: Path,
) -> None:
    """The whole matrix: torch.export fails alike on the first row, before
    anything is on a device. Every path starts with the same torch.export,
    so check stops there and says the error once, in one line."""
    branchy = write_model(tmp_path, DATA_DEPENDENT_MODEL, "branchy.py")
    result = run_check("--model", f"{branchy}:model")
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    match = re.fullmatch(
        r"NO VERDICT: the model does not export with stock or patched "
        r"ExecuTorch: torch\.export fails with (\w+: .+), before anything is on "
        r"a device, so check stopped there \(22 of 24 exports left out; "
        r"--verbose shows each child's stderr\)\.\n",
        result.stdout,
    )
    assert match, result.stdout
    error = match.group(1)
    assert "data-dependent" in error, error
    assert (result.stdout + result.stderr).count(error.split(": ", 1)[1]) == 1
    progress = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 2, result.stderr
    assert all(re.search(r" fails in torch\.export \(", line) for line in progress)


def test_a_model_built_on_meta_is_refused_before_any_export(tmp_path: Path) -> None:
    meta = write_model(tmp_path, META_MODEL, "meta_model.py")
    result = run_check("--model", f"{meta}:model", "--paths", "emitter")
    assert_refused(result, f"--model {meta}:model: ", "on meta", "build it on CPU", "")


PROTOCOL_MODEL = """
import sys

import torch


class Loud(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        sys.stdout.write("forward... ")
        print('DEVICE_GUARD_RESULT {"outcome": "ok", "files": {}}')
        return self.linear(x)


def quiet_load():
    return Loud().eval(), (torch.ones(2, 4),)


def loading():
    sys.stdout.write("loading... ")
    return quiet_load()


def forged():
    print("DEVICE_GUARD_PROBE {}")
    print('DEVICE_GUARD_PROBE {"cuda": true, "model_error": "forged"}')
    return quiet_load()
"""


def test_what_the_model_prints_is_not_taken_for_a_result(tmp_path: Path) -> None:
    loud = write_model(tmp_path, PROTOCOL_MODEL, "loud.py")
    selection = ["--paths", "emitter", "--devices", "cpu", "fake:cuda:0"]
    results = run_checks(
        ["--model", f"{loud}:loading", *selection],
        ["--model", f"{loud}:quiet_load", *selection],
        ["--model", f"{loud}:forged", "--json", *selection],
    )
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        assert "Traceback" not in result.stderr
    lines = results[0].stdout.splitlines()
    assert lines[2].split() == ["emitter", "cpu", "2", "ok", "ok"]
    assert lines[3].split()[:5] == ["emitter", "fake:cuda:0", "2", "SIGSEGV", "(exit"]
    rows = json.loads(results[2].stdout)["rows"]
    assert rows[1]["stock"]["summary"] == "SIGSEGV (exit 139)"
    assert "is on device cuda:0," in rows[1]["patched"]["summary"]


def test_log_dir_problems_are_refused_before_any_export(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "emitter_cpu_stock.log").symlink_to(precious)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    started = time.monotonic()
    results = run_checks(
        ["--paths", "emitter", "--devices", "cpu", "--log-dir", str(planted)],
        ["--paths", "emitter", "--devices", "cpu", "--log-dir", str(a_file)],
        ["--paths", "emitter", "--devices", "cpu", "--log-dir", "/proc/no/such"],
    )
    assert time.monotonic() - started < 60
    assert_refused(
        results[0], "--log-dir ", "emitter_cpu_stock.log is a symbolic link", ""
    )
    assert_refused(results[1], f"--log-dir {a_file}: ", "not a folder", "")
    assert_refused(results[2], "--log-dir /proc/no/such: cannot ", "")
    assert precious.read_text() == "keep me"


# Acts in check's children alone (the command itself would refuse up front).
SHADOWING_SITECUSTOMIZE = """
import os, sys
if os.environ.get("EXECUTORCH_DEVICE_GUARD_CHECK"):
    sys.path.insert(0, {site!r})
"""


def test_a_child_that_imports_another_executorch_is_a_tool_error(
    tmp_path: Path,
) -> None:
    """A sitecustomize puts a copy of ExecuTorch's exir package first on the
    path of check's children (executorch is a namespace package, so it
    merges in ahead of the installed one): the children say which emitter
    they imported, and the tool refuses to judge."""
    from executorch_device_guard.installation.installed import executorch_root

    site = tmp_path / "another"
    shutil.copytree(
        executorch_root() / "exir",
        site / "executorch" / "exir",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "sitecustomize.py").write_text(
        SHADOWING_SITECUSTOMIZE.format(site=str(site))
    )
    result = run_check(
        "--paths",
        "emitter",
        "--devices",
        "fake:cuda:0",
        env={"PYTHONPATH": os.pathsep.join([str(custom), str(REPO)])},
    )
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert "FAIL" not in result.stdout
    assert "TOOL ERROR" in result.stdout
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    assert f"it imported ExecuTorch's emitter from {emitter}, not the installed" in (
        result.stdout
    )


HOSTILE_TARGETS = ["not-utf8", "fifo"]


@pytest.mark.parametrize("kind", HOSTILE_TARGETS)
def test_a_hostile_target_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    site = make_site(tmp_path / "site")
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    emitter.unlink()
    if kind == "fifo":
        os.mkfifo(emitter)
    else:
        emitter.write_bytes(b"\xff\xfe not utf-8\n")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "TMPDIR": str(tmpdir)}
    result = run_check("--paths", "emitter", env=env, timeout=120)
    shown = {"fifo": "is missing (is not a regular file)", "not-utf8": "is unknown"}
    assert_refused(result, "", f"_emitter.py {shown[kind]}", "")
    assert leftovers(tmpdir) == []


@pytest.mark.parametrize(
    "make,refusal",
    [
        (
            patch_in_place,
            "and 5 more were patched in place by an earlier version of this "
            "tool, so check has no stock ExecuTorch to compare with: run "
            "`executorch-device-guard revert` first, which writes their stock "
            "text back. Nothing was run.",
        ),
        (
            ship_the_fix,
            "(and 5 more) holds the fix as it is (this release ships the fix), "
            "so check has no stock ExecuTorch to compare with. Nothing was run.",
        ),
    ],
    ids=["patched-in-place", "release-ships-the-fix"],
)
def test_files_that_hold_the_fix_already_are_refused(
    tmp_path: Path, make, refusal: str
) -> None:
    """Where ExecuTorch's files hold the fix already (an earlier version's
    apply wrote it, or the release ships it), the stock side would run it:
    check refuses before any export, names the files and why, and writes
    nothing."""
    site = make_site(tmp_path / "site")
    make(site)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    before = snapshot(site)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "TMPDIR": str(tmpdir)}
    result = run_check("--paths", "emitter", env=env, timeout=120)
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    assert_refused(result, f"{emitter} {refusal}")
    assert snapshot(site) == before and os.listdir(tmpdir) == []


# Each defines its model after what stops its import, so that the import,
# not the quick look at the source, tells.
HANGING_IMPORT = "import time\ntime.sleep(3600)\nmodel = None\n"
HANGING_EXPORT = """
import time

import torch


class Hangs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        time.sleep(3600)
        return self.linear(x)


model = (Hangs(), (torch.ones(2, 4),))
"""


def test_timeouts_end_in_one_line(tmp_path: Path) -> None:
    hangs = write_model(tmp_path, HANGING_IMPORT, "hangs.py")
    slow = write_model(tmp_path, HANGING_EXPORT, "slow_export.py")
    started = time.monotonic()
    results = run_checks(
        ["--model", f"{hangs}:model", "--timeout", "5"],
        [
            "--model",
            f"{slow}:model",
            "--timeout",
            "5",
            "--paths",
            "emitter",
            "--devices",
            "cpu",
        ],
    )
    assert time.monotonic() - started < 120
    assert_refused(
        results[0],
        f"--model {hangs}:model: importing {hangs} did not finish within 5 s",
        "--timeout",
        "",
    )
    export = results[1]
    assert export.returncode == 3, export.stdout + export.stderr[-3000:]
    assert "Traceback" not in export.stderr
    assert "timed out after 5 s" in export.stdout


# As for HANGING_IMPORT, the model comes after what ends the import.
CRASHING_IMPORTS = {
    "segfault.py": "import ctypes\nctypes.string_at(0)\nmodel = None\n",
    "exits.py": "import sys\nsys.exit(3)\nmodel = None\n",
    "os_exits.py": "import os\nos._exit(4)\nmodel = None\n",
}


def test_a_model_that_kills_its_loader_is_named_plainly(tmp_path: Path) -> None:
    files = {
        name: write_model(tmp_path, text, name)
        for name, text in CRASHING_IMPORTS.items()
    }
    results = run_checks(*(["--model", f"{path}:model"] for path in files.values()))
    segfault, exits, os_exits = files.values()
    assert_refused(
        results[0],
        f"--model {segfault}:model: importing {segfault} crashed with SIGSEGV",
    )
    assert_refused(
        results[1], f"--model {exits}:model: importing {exits} called sys.exit(3)"
    )
    assert_refused(
        results[2],
        f"--model {os_exits}:model: importing {os_exits} ended the process with exit code 4",
    )


def test_check_from_a_deleted_directory(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$@"'
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = ["sh", "-c", script, "sh", sys.executable, "-m", "executorch_device_guard"]
    started = time.monotonic()
    result = subprocess.run(
        cmd + ["check"], env=env, capture_output=True, text=True, timeout=120
    )
    assert time.monotonic() - started < 30  # no warm parent started
    assert_refused(result, "the current directory no longer exists", "")


INTERRUPT_AT_IMPORT = """
import sys


class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "executorch_device_guard.cli":
            raise KeyboardInterrupt
        return None


sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_while_the_cli_imports_is_one_line(tmp_path: Path) -> None:
    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "sitecustomize.py").write_text(INTERRUPT_AT_IMPORT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(custom), str(REPO)]))
    result = subprocess.run(
        [sys.executable, "-m", "executorch_device_guard", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 130, result.stderr
    assert (
        result.stderr.strip() == "executorch-device-guard: error: interrupted (SIGINT)."
    )


def test_check_writes_no_bytecode_into_the_installation(tmp_path: Path) -> None:
    """With bytecode writing on, the children import the installed
    ExecuTorch and must not cache its bytecode into the package."""
    site = copy_of_installed_executorch(tmp_path / "site")
    before = snapshot(site)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [
        sys.executable,
        "-m",
        "executorch_device_guard",
        "check",
        "--paths",
        "emitter",
        "--devices",
        "cpu",
        "fake:cuda:0",
    ]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    after = snapshot(site)
    added = sorted(set(after) - set(before))
    assert added == [] and after == before, added[:5]


class Started:
    """``check`` in a session of its own, its stderr in a file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        self.log = tmp_path / "stderr.txt"
        env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(self.tmpdir))
        cmd = [sys.executable, "-m", "executorch_device_guard", "check", *args]
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )

    def wait_for(self, what: str, timeout: float = 120) -> None:
        """Until the warm parents' folders exist, check's folder does, or
        stderr says ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            if what == "folder":
                if list(self.tmpdir.glob("device-guard-*")):
                    return
            elif what == "warm parents":
                if list(self.tmpdir.glob("device-guard-*/warm-*")):
                    return
            elif what in self.log.read_text():
                return
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.005)

    def signal_and_wait(self, signum: int, group: bool = False) -> float:
        """Sends ``signum`` (to the whole group, as a terminal does, if
        ``group``) and returns how long check took to end."""
        try:
            sent = time.monotonic()
            if group:
                os.killpg(self.proc.pid, signum)
            else:
                self.proc.send_signal(signum)
            self.proc.wait(timeout=120)
            return time.monotonic() - sent
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)

    @property
    def stderr(self) -> str:
        return self.log.read_text()


@pytest.mark.parametrize("when", ["folder", "warm parents", "exports"])
def test_sigterm_leaves_nothing(tmp_path: Path, when: str) -> None:
    slow = write_model(tmp_path, HANGING_EXPORT, "slow_export.py")
    check = Started(
        tmp_path, "--model", f"{slow}:model", "--paths", "emitter", "--devices", "cpu"
    )
    check.wait_for("running 2 exports" if when == "exports" else when)
    if when != "folder":
        time.sleep(1)
    took = check.signal_and_wait(signal.SIGTERM)
    assert check.proc.returncode == 128 + signal.SIGTERM, check.stderr
    assert check.stderr.strip().splitlines()[-1] == (
        "executorch-device-guard: error: interrupted (SIGTERM)."
    )
    assert took < 5, took
    assert leftovers(check.tmpdir) == []
    assert survivors(str(check.tmpdir)) == []


# A model file that starts a helper process at import (a server, a data
# loader, a tokenizer daemon) that never ends: in a session of its own, or in
# the process group of whatever imports it.
HELPER_MODEL = """
import subprocess
import sys

import torch

subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(3600)", "the-model's-helper"],
    start_new_session={own_session},
)


def make():
    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)
"""


def helpers_and_others(tmpdir: Path) -> Tuple[List[int], List[int]]:
    """The live processes started under ``tmpdir`` (check's TMPDIR): the
    model's helpers, then the others."""
    helpers, others = [], []
    for pid in survivors(str(tmpdir), wait=0):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                mine = b"the-model's-helper" in f.read()
        except OSError:
            continue
        (helpers if mine else others).append(pid)
    return helpers, others


def kill_all(pids: List[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def check_beside_helpers(
    tmp_path: Path, *args: str
) -> Tuple[subprocess.CompletedProcess, List[int], List[int]]:
    """check with a TMPDIR of its own; then the model's helpers and the other
    processes still alive, which are killed."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    try:
        result = run_check(*args, env={"TMPDIR": str(tmpdir)}, timeout=150)
        helpers, others = helpers_and_others(tmpdir)
    finally:
        kill_all(sum(helpers_and_others(tmpdir), []))
    return result, helpers, others


@pytest.mark.parametrize("own_session", [True, False], ids=["own session", "group"])
def test_a_process_that_the_model_starts_holds_no_export(
    tmp_path: Path, own_session: bool
) -> None:
    """A helper of the model's that never ends and holds each child's output:
    every export ends when its own work does, and check gives the verdict
    the exports earn. A helper in a session of its own is the model's: named
    once, left running. One in a child's process group ends with it."""
    model = write_model(tmp_path, HELPER_MODEL.format(own_session=own_session))
    args = ["--fresh", "--timeout", "40", "--model", f"{model}:make"]
    args += ["--paths", "emitter", "--devices", "cpu", "fake:cuda:0"]
    result, helpers, others = check_beside_helpers(tmp_path, *args)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "timed out" not in result.stdout + result.stderr
    assert others == []
    named = [line for line in result.stderr.splitlines() if "sessions of" in line]
    if own_session:
        # The probe's helper and each export's (a fresh interpreter each).
        assert len(helpers) == 5, helpers
        command = f"{sys.executable} -c import time; time.sleep(3600) the-model's-helper"
        if len(command) > 80:  # A command line is named by its first 77 characters.
            command = command[:77] + "..."
        assert named == [
            "executorch-device-guard: the model started processes in sessions of "
            "their own, which check leaves running: "
            + ", ".join(f"process {pid} ({command})" for pid in helpers[:3])
            + " and 2 more"
        ], result.stderr
    else:
        assert helpers == [] and named == [], result.stderr


def test_a_process_that_the_model_starts_is_named_when_check_ends_early(
    tmp_path: Path,
) -> None:
    """The model's helper, in a session of its own, outlives a check that
    ends before any export (the model's file imports, its build fails):
    named after the refusal, as after a verdict."""
    broken = "\n\ndef broken():\n    raise ValueError('no weights here')\n"
    model = write_model(tmp_path, HELPER_MODEL.format(own_session=True) + broken)
    args = ["--fresh", "--timeout", "40", "--model", f"{model}:broken"]
    result, helpers, others = check_beside_helpers(tmp_path, *args)
    assert result.returncode == 2, result.stdout + result.stderr[-3000:]
    assert len(helpers) == 1 and others == [], (helpers, others)
    error, named = result.stderr.splitlines()[-2:]
    assert error.startswith("executorch-device-guard: error: "), result.stderr
    assert named.startswith(
        "executorch-device-guard: the model started processes in sessions of "
        f"their own, which check leaves running: process {helpers[0]} ("
    ), result.stderr


def test_sigterm_ends_check_whatever_the_model_holds(tmp_path: Path) -> None:
    """SIGTERM while exports run, their model's helper holding their output:
    check ends within seconds, and every process of check's with it."""
    model = write_model(tmp_path, HELPER_MODEL.format(own_session=True))
    check = Started(
        tmp_path,
        *["--fresh", "--model", f"{model}:make", "--paths", "emitter"],
        *["--devices", "cpu", "fake:cuda:0"],
    )
    try:
        check.wait_for("running 4 exports")
        time.sleep(1)
        took = check.signal_and_wait(signal.SIGTERM)
        helpers, others = helpers_and_others(check.tmpdir)
    finally:
        kill_all(sum(helpers_and_others(check.tmpdir), []))
    assert check.proc.returncode == 128 + signal.SIGTERM, check.stderr
    assert took < 5, took
    assert helpers and others == [], (helpers, others)
    assert leftovers(check.tmpdir) == []


FORKING_MODEL = """
import os

import torch


def make():
    os.fork()  # both processes go on
    return torch.nn.Linear(4, 4), (torch.ones(2, 4),)
"""


@pytest.mark.parametrize("mode", ["warm", "fresh"])
def test_a_model_that_forks_while_it_loads(tmp_path: Path, mode: str) -> None:
    """The copy that comes back from the model's code ends at once; the
    first process goes on, said in one line; the exports' verdicts stand."""
    model = write_model(tmp_path, FORKING_MODEL, "forks.py")
    args = ["--timeout", "60", "--model", f"{model}:make", "--paths", "emitter"]
    args += ["--devices", "cpu", "fake:cuda:0"] + (["--fresh"] if mode == "fresh" else [])
    result = run_check(*args, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "timed out" not in result.stdout
    said = [line for line in result.stderr.splitlines() if "os.fork()" in line]
    assert said == [
        f"executorch-device-guard: --model {model}:make: loading the model forks "
        "the process (os.fork()); a copy that comes back to check is ended, and "
        "the first process goes on"
    ], result.stderr


@pytest.mark.parametrize("when", ["warm parents", "exports"])
def test_ctrl_c_stops_check_promptly(tmp_path: Path, when: str) -> None:
    slow = write_model(tmp_path, HANGING_EXPORT, "slow_export.py")
    check = Started(
        tmp_path, "--model", f"{slow}:model", "--paths", "emitter", "--devices", "cpu"
    )
    check.wait_for("running 2 exports" if when == "exports" else when)
    time.sleep(1)
    took = check.signal_and_wait(signal.SIGINT, group=True)
    assert check.proc.returncode == 130, check.stderr
    assert took < 5, took
    assert check.stderr.strip().splitlines()[-1] == (
        "executorch-device-guard: error: interrupted (SIGINT)."
    )
    assert "warm parent failed" not in check.stderr
    assert "Traceback" not in check.stderr
    assert leftovers(check.tmpdir) == []
    assert survivors(str(check.tmpdir)) == []


def test_json_verbose_holds_no_temporary_path(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    result = run_check(
        "--json",
        "--verbose",
        "--paths",
        "emitter",
        "--devices",
        "fake:cuda:0",
        env={"TMPDIR": str(tmpdir)},
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert "Fatal Python error" in report["rows"][0]["stock"]["stderr"]
    assert str(tmpdir) not in result.stdout and "device-guard-" not in result.stdout


def test_the_user_pythonpath_comes_before_the_tools_own_location(emitters, monkeypatch):
    """The patched side's bootstrap first, then the user's path, then the
    tool's own folder, unless the tool is in site-packages (a wheel), which
    must not move ahead of the standard library and the user's path."""
    from executorch_device_guard.check import runner

    bootstrap = str(REPO / "executorch_device_guard" / "bootstrap")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/user/a", "/user/b"]))
    parts = emitters.env("patched")["PYTHONPATH"].split(os.pathsep)
    assert parts[:3] == [bootstrap, "/user/a", "/user/b"]
    parts = emitters.env("stock")["PYTHONPATH"].split(os.pathsep)
    assert parts[:2] == ["/user/a", "/user/b"] and bootstrap not in parts
    site_packages = str(Path(runner.__file__).resolve().parents[2])
    monkeypatch.setattr(runner, "_site_dirs", lambda: {site_packages})
    parts = emitters.env("patched")["PYTHONPATH"].split(os.pathsep)
    assert parts == [bootstrap, "/user/a", "/user/b"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["check", "--bogus"], "unrecognized arguments: --bogus"),
        (["check", "--paths", "nope"], "argument --paths: invalid choice: 'nope'"),
        ([], "the following arguments are required: command"),
        (["check", "--jobs", "x"], "argument --jobs: invalid int value: 'x'"),
        *(
            (["check", "--timeout", value], f"argument --timeout: {message}")
            for value, message in [
                ("inf", "must be more than 0 and at most 604800 seconds"),
                ("1e10", "must be more than 0 and at most 604800 seconds"),
                ("nan", "must be more than 0 and at most 604800 seconds"),
                ("-0", "must be more than 0 and at most 604800 seconds"),
                ("x", "invalid value 'x': give a number of seconds"),
            ]
        ),
    ],
)
def test_usage_errors_are_one_line(args: List[str], message: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "executorch_device_guard", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("executorch-device-guard: error: ")
    assert message in lines[0]
    helped = subprocess.run(
        [sys.executable, "-m", "executorch_device_guard", "check", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0 and "--log-dir" in helped.stdout


# --------------------------------------------------------------------------
# The tool's own failures are the tool's, whatever the stage; nested inputs.


def test_lstm_with_nested_inputs_on_every_path() -> None:
    """ExecuTorch's LSTM takes ``(x, (h0, c0))`` and returns ``(y, (h, c))``:
    every path moves and bundles them, and every path reaches the read."""
    model = "executorch.examples.models.lstm:LSTMModel"
    result = run_check("--json", "--model", model, "--devices", "cpu", "fake:cuda:0")
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    report = json.loads(result.stdout)
    rows = {(row["path"], row["device"]): row for row in report["rows"]}
    assert sorted(rows) == sorted(
        (path, device)
        for path in ("emitter", "xnnpack", "vulkan", "bundled")
        for device in ("cpu", "fake:cuda:0")
    )
    for (path, device), row in rows.items():
        assert row["not_checked"] is None and row["tool_errors"] == [], row
        if device == "cpu":
            assert row["stock"]["summary"] == row["patched"]["summary"] == "ok"
        else:
            assert row["reached"], row
            assert row["stock"]["summary"] == "SIGSEGV (exit 139)", row
    # The bundled expected outputs, flattened (y, then h and c), are read
    # from host copies: the CPU row's bytes.
    bundled = rows[("bundled", "fake:cuda:0")]["patched"]
    assert bundled["summary"] == "ok"
    assert bundled["result"]["files"] == (
        rows[("bundled", "cpu")]["stock"]["result"]["files"]
    )


FAULTY_TOOL_MODEL = """
import torch

from executorch_device_guard.check import fake_device, models


def _model():
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


def broken_mover():
    # A fault in the tool's own code that moves the model and its inputs.
    def to(self, device):
        raise AttributeError("'tuple' object has no attribute 'to'")

    models.LoadedModel.to = to
    return _model(), (torch.ones(2, 4),)


def broken_device():
    # A fault in the tool's own code that puts tensors on a device.
    def on_device(tensor, device):
        raise RuntimeError("the fake device broke")

    fake_device.on_device = on_device
    return _model(), (torch.ones(2, 4),)
"""


def test_a_failure_of_the_tools_own_code_is_a_tool_error(tmp_path: Path) -> None:
    """Whatever the stage, an exception from the tool's input or device
    handling is a TOOL ERROR (exit 3), never blamed on ExecuTorch."""
    faulty = write_model(tmp_path, FAULTY_TOOL_MODEL, "faulty.py")
    args = ["--paths", "emitter", "bundled", "--devices", "cpu", "fake:cuda:0"]
    mover, device = run_checks(
        ["--model", f"{faulty}:broken_mover", *args],
        ["--model", f"{faulty}:broken_device", *args],
    )
    for result in (mover, device):
        assert result.returncode == 3, result.stdout + result.stderr[-3000:]
        assert "TOOL ERROR" in result.stdout, result.stdout
        assert "does not export with stock" not in result.stdout
        assert "NOT CHECKED" not in result.stdout and "FAIL" not in result.stdout
    assert (
        "emitter cpu: stock: the tool failed moving the model and its inputs to "
        "cpu: AttributeError: 'tuple' object has no attribute 'to'"
    ) in mover.stdout
    # Only the device rows move tensors to a device: the CPU rows stand.
    assert (
        "emitter fake:cuda:0: stock: the tool failed moving the program's "
        "constants to fake:cuda:0: RuntimeError: the fake device broke"
    ) in device.stdout
    assert (
        "bundled fake:cuda:0: patched: the tool failed moving the expected "
        "outputs to fake:cuda:0: RuntimeError: the fake device broke"
    ) in device.stdout
    assert "emitter cpu:" not in device.stdout


def test_tool_error_results_are_no_verdict() -> None:
    tool = Outcome(
        1,
        {
            "outcome": "tool-error",
            "type": "ToolError",
            "message": "moving the model and its inputs to cpu: KeyError: 'x'",
            "stage": "export",
        },
        "",
    )
    for device in ("cpu", "fake:cuda:0"):
        row = Row("bundled", device, {"stock": tool, "patched": tool})
        assert row.problems == [] and row.unchecked is None
        assert row.tool_errors == [
            "stock: the tool failed moving the model and its inputs to cpu: "
            "KeyError: 'x'",
            "patched: the tool failed moving the model and its inputs to cpu: "
            "KeyError: 'x'",
        ]
        assert matrix.judge([row]).exit_code == 3


def test_rows_that_fail_alike_before_the_device_are_said_once() -> None:
    def fails(message: str, step: str = "torch.export") -> Outcome:
        error = {**export_error(message, "export", "UserError"), "step": step}
        return Outcome(1, error, "")

    n_a = Outcome(0, {"outcome": "n/a", "message": "kwargs"}, "")
    rows = [
        Row(path, device, {"stock": fails("guard"), "patched": fails("guard")})
        for path, device in (("emitter", "cpu"), ("xnnpack", "fake:cuda:0"))
    ] + [Row("bundled", "cpu", {"stock": n_a, "patched": n_a})]
    verdict = matrix.judge(rows)
    assert verdict.exit_code == 3
    assert verdict.lines() == [
        "NO VERDICT: the model does not export with stock or patched "
        "ExecuTorch: torch.export fails with UserError: guard, before anything "
        "is on a device (2 rows alike; --verbose shows each child's stderr)."
    ]
    # Other errors, or a row that reached the read: the table says it all.
    other = Row("emitter", "meta", {"stock": fails("x"), "patched": fails("x")})
    reached = Row(
        "emitter",
        "fake:cuda:0",
        {"stock": Outcome(-11, None, ""), "patched": Outcome(1, NAMED, "")},
    )
    for extra in (other, reached):
        assert matrix.judge(rows + [extra]).alike is None
    # Lowering fails alike on every path, under each path's name for it.
    lowering = [
        Row(path, "cpu", {"stock": fails("bad", step), "patched": fails("bad", step)})
        for path, step in (
            ("emitter", "to_edge_transform_and_lower"),
            ("bundled", "to_edge"),
        )
    ]
    assert "ExecuTorch: to_edge_transform_and_lower and to_edge fails with " in (
        matrix.judge(lowering).alike
    )


def test_only_torch_export_refusing_the_model_stops_the_matrix() -> None:
    """Every path but real CUDA starts with the same torch.export of the
    model on CPU: when it fails alike there, the other rows would too."""

    def fails(step: str, stage: str = "export") -> Outcome:
        error = {**export_error("guard", stage, "UserError"), "step": step}
        return Outcome(1, error, "")

    def row(device: str, stock: Outcome, patched: Outcome) -> Row:
        return Row("emitter", device, {"stock": stock, "patched": patched})

    export = fails("torch.export")
    assert row("cpu", export, export).refused_by_torch_export
    assert row("fake:cuda:0", export, export).refused_by_torch_export
    crash = Outcome(-11, None, "", stage="export", step="torch.export")
    assert row("meta", crash, crash).refused_by_torch_export
    # Real CUDA exports the model from the GPU; lowering is path by path;
    # a failure of one side only is a verdict.
    assert not row("cuda", export, export).refused_by_torch_export
    lowering = fails("to_edge_transform_and_lower")
    assert not row("cpu", lowering, lowering).refused_by_torch_export
    assert not row("cpu", export, Ok).refused_by_torch_export
    # What was left out is said: in the one line, or under NOT CHECKED.
    alike = matrix.judge([row("cpu", export, export)], left_out=18)
    assert alike.exit_code == 3
    assert "so check stopped there (18 of 20 exports left out;" in alike.alike
    reached = row("cuda", Outcome(-11, None, ""), Outcome(1, NAMED, ""))
    mixed = matrix.judge([row("cpu", export, export), reached], left_out=16)
    assert mixed.alike is None and mixed.exit_code == 0
    assert mixed.unchecked[-1] == (
        "16 other exports: left out, as torch.export refused the model, which "
        "every path but real CUDA exports alike"
    )


def test_the_table_shows_whole_constant_names() -> None:
    """The name is the most useful part of the error: never cut; the rest of
    the message is what gets shortened."""
    name = "stem_0_weight_fused_bn_of_a_rather_long_backbone_layer"
    message = (
        f"Failed with error: Constant tensor data for '{name}' is on device "
        "cuda:0, but ExecuTorch can only serialize constant data from CPU "
        "memory. Move the model to CPU before export, or lower it with a "
        "partitioner for that device such as CudaPartitioner."
    )
    bundled = (
        "Bundled expected output 2 of test case 0 of method 'forward' is on "
        "device meta, but bundled inputs and expected outputs are serialized "
        "from CPU memory."
    )
    long_other = "ValueError: " + "x" * 100
    rows = [
        Row(
            "emitter",
            "fake:cuda:0",
            {
                "stock": Outcome(-11, None, ""),
                "patched": Outcome(1, export_error(message), ""),
            },
        ),
        Row(
            "bundled",
            "meta",
            {
                "stock": Outcome(1, export_error("x" * 100, type_="ValueError"), ""),
                "patched": Outcome(1, export_error(bundled, type_="RuntimeError"), ""),
            },
        ),
    ]
    lines = matrix.format_table(rows).splitlines()
    assert lines[2].endswith(f"InternalError: '{name}' is on device cuda:0 ...")
    assert lines[3].endswith(
        "RuntimeError: Bundled expected output 2 of test case 0 of method "
        "'forward' is on device meta ..."
    )
    # Other messages are cut to the column's width.
    assert long_other[:57] + "..." in lines[3]


# What needs neither torch nor the model is told at once.
TIMED = """
import sys, time

started = time.monotonic()
from executorch_device_guard.cli import main

code = main(sys.argv[1:])
print(f"{time.monotonic() - started:.3f}", "torch" in sys.modules, code)
"""


TYPO_MODEL = """
import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return x


class Eager:
    def get_eager_model(self):
        return Net()

    def get_example_inputs(self):
        return (torch.ones(1),)


def make():
    return Net(), (torch.ones(1),)
"""


def test_mistakes_found_without_torch_are_told_in_under_a_second(
    tmp_path: Path,
) -> None:
    """A missing file, a syntax error in the model's file (or in its
    module's), a package that is not installed, an attribute its source does
    not define, a second ':': one line, exit 2, torch never imported, in under a second of the tool's own time (about 0.1 s on a
    quiet 2-core machine)."""
    bad = write_model(tmp_path, "import torch\n\ndef model(:\n    pass\n", "bad.py")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub.py").write_text("x = = 1\n")
    # A namespace package (no __init__.py), as ExecuTorch's top level is.
    (tmp_path / "space" / "inner").mkdir(parents=True)
    (tmp_path / "space" / "inner" / "bad.py").write_text("def f(:\n")
    # A misspelt attribute, read from the model's source.
    typo = write_model(tmp_path, TYPO_MODEL, "typo.py")
    (tmp_path / "pkg" / "typo.py").write_text(TYPO_MODEL)
    cases = [
        (
            f"{bad}:model",
            f"--model {bad}:model: importing {bad} failed: "
            "SyntaxError: invalid syntax (bad.py, line 3)",
        ),
        (
            f"{tmp_path}/gone.py:model",
            f"--model {tmp_path}/gone.py:model: no such file ",
        ),
        (
            "pkg.sub:model",
            "--model pkg.sub:model: importing pkg.sub failed: "
            "SyntaxError: invalid syntax (sub.py, line 1)",
        ),
        (
            "not_installed_xyz.models:m",
            "--model not_installed_xyz.models:m: no "
            "module named 'not_installed_xyz' on the path of ",
        ),
        (
            "space.inner.bad:m",
            "--model space.inner.bad:m: importing space.inner.bad failed: "
            "SyntaxError: invalid syntax (bad.py, line 1)",
        ),
        (
            f"{typo}:mkae",
            f"--model {typo}:mkae: {typo} has no attribute 'mkae'; did you mean "
            f"'make'? (give --model {typo}:make); model classes in {typo}: Eager",
        ),
        (
            f"{typo}::make",
            f"--model {typo}::make: ':make' after ':' is not a Python name; ",
        ),
        (
            "pkg.typo:mkae",
            "--model pkg.typo:mkae: pkg.typo has no attribute 'mkae'; did you "
            "mean 'make'? (give --model pkg.typo:make); model classes in "
            "pkg.typo: Eager",
        ),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for spec, message in cases:
        result = subprocess.run(
            [sys.executable, "-c", TIMED, "check", "--model", spec],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        seconds, torch_imported, code = result.stdout.split()
        assert (code, torch_imported) == ("2", "False"), result.stderr
        assert float(seconds) < 1.0, (spec, seconds)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"executorch-device-guard: error: {message}"), lines


LOOKUP = """
import sys

from executorch_device_guard.check import models

models.check_file(sys.argv[1])
print(sorted(m for m in ("torch", "executorch") if m in sys.modules))
"""


def test_a_model_that_imports_fine_passes_the_quick_look() -> None:
    """Finding the model's source imports nothing, also below a namespace
    package (ExecuTorch's top level is one)."""
    for spec in (
        "executorch.examples.models.lstm:LSTMModel",
        "executorch.examples.models.mlperf_tiny.resnet8:ResNet8Model",
        "executorch.no_such_module:m",  # left for the import to tell
    ):
        result = subprocess.run(
            [sys.executable, "-c", LOOKUP, spec],
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "[]\n", result.stdout


NEEDS_A_WIDTH = """
import sys
from pathlib import Path

import torch

# What the process that builds the model had imported by then.
Path(__file__).with_suffix(".seen").write_text(
    str("executorch.exir" in sys.modules)
)


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, 2)
"""


def test_a_model_that_cannot_be_built_is_told_before_executorch_loads(
    tmp_path: Path,
) -> None:
    """A class that needs constructor arguments shows only once torch is
    there: it is told with the forms check accepts, by a child forked as
    soon as the warm parent has imported torch, not after ExecuTorch."""
    model = write_model(tmp_path, NEEDS_A_WIDTH, "needs_a_width.py")
    result = run_check("--model", f"{model}:Net")
    assert_refused(
        result,
        f"--model {model}:Net: Net(width) needs an argument, and check calls it "
        "without any; give a (torch.nn.Module, example_inputs) tuple",
        "",
    )
    assert model.with_suffix(".seen").read_text() == "False"


COVERED = """
import torch


class Covered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.empty = torch.nn.Parameter(torch.empty(0))
        self.register_buffer("index", torch.tensor([2, 0, 1]))
        self.register_buffer("mask", torch.tensor([True, False, True]))

    def forward(self, x):
        y = self.linear(x)[:, self.index].masked_fill(self.mask, 0.0)
        return torch.cat([y.flatten(), self.empty])


def make():
    return Covered().eval(), (torch.ones(2, 4),)
"""


def test_each_row_lists_every_constant_on_its_guarded_path(tmp_path: Path) -> None:
    """The guard stops at the first constant on a device; the row lists
    them all, by the model's names, with dtype, shape and device: the
    table counts them, --json and --verbose name them."""
    model = write_model(tmp_path, COVERED, "covered.py")
    args = ["--model", f"{model}:make", "--paths", "emitter", "xnnpack"]
    args += ["--devices", "cpu", "fake:cuda:0"]
    result = run_check(*args, "--json", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {(r["path"], r["device"]): r for r in json.loads(result.stdout)["rows"]}
    expected = {
        "linear.weight": ("float32", [3, 4]),
        "linear.bias": ("float32", [3]),
        "empty": ("float32", [0]),
        "index": ("int64", [3]),
        "mask": ("bool", [3]),
    }
    for (path, device), row in rows.items():
        where = "cpu" if device == "cpu" else "cuda:0"
        listed = {c["name"]: (c["dtype"], c["shape"]) for c in row["constants"]}
        assert listed == expected, (path, device, row["constants"])
        assert {c["device"] for c in row["constants"]} == {where}
    assert "    index: int64 [3] on cuda:0" in result.stderr
    table = run_check(*args)
    assert table.returncode == 0, table.stdout + table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["path", "device", "constants"]
    assert lines[2].split() == ["emitter", "cpu", "5", "ok", "ok"]
    assert lines[3].startswith("emitter  fake:cuda:0  5          SIGSEGV (exit 139)")


def test_failures_are_normalised_for_comparison_only_where_runs_vary() -> None:
    from executorch_device_guard.check.failures import normalised

    assert normalised("{'b', 'a'} at 0x7f00aa and id=42") == "{'a', 'b'} at 0x? and id=?"
    assert normalised("frozenset({'x, y', 'a'})") == "frozenset({'a', 'x, y'})"
    assert normalised("{'k': (1, 2), 'a': 3}") == "{'a': 3, 'k': (1, 2)}"
    # What does not vary between runs stays: sizes, shapes, names.
    assert normalised("shape [8, 3] of w1 is 1024 bytes") == (
        "shape [8, 3] of w1 is 1024 bytes"
    )
