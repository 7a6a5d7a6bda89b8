# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Every guard fails first: on stock ExecuTorch, tests fail and reads crash.

Everything runs in child processes against two overlays of the installed
ExecuTorch (see executorch_device_guard.overlay): stock as installed, and
patched with patches/ applied. The installation itself is never touched.

- The series' upstream tests, run with plain ``python -m pytest``: on stock,
  every device case fails as a test (their device memory is readable, so an
  unguarded read does not crash) and the run exits 1 without a fatal error;
  patched, every case passes. Each case first checks its premise, that the
  tensor it hands over reports the device: a stand-in that lost its device
  makes the case fail, never pass.
- test/crash_probes.py reaches each guarded read with data in no-access memory,
  as a GPU's is from the host: on stock the process dies with SIGSEGV at that
  read; patched, it exits 1 with an error naming the device.
- CPU programs are byte-identical with and without the series.
"""

import concurrent.futures
import re
import signal
import subprocess
from pathlib import Path
from typing import Dict, Tuple

import pytest

from conftest import REPO
from executorch_device_guard.installed import executorch_root
from executorch_device_guard.patchset import read_series
from executorch_device_guard.runner import Emitters
from executorch_device_guard.series_files import upstream_tests, write_tree

# The new upstream test modules whose backend the installed ExecuTorch ships
# (1.5.1 ships no MPS backend: test/test_releases.py runs that one on 1.4.1).
NEW_FILES = [f for entry in read_series(REPO) for f in entry.new_files]
NEW_MODULES = [
    f for f in NEW_FILES if (executorch_root() / Path(f).parent.parent).is_dir()
]
# The test the series adds to upstream's existing CUDA test module. It needs a
# GPU, and on stock kills its process, as the reproducer does: gpu/
# runs it there. Here its module is only laid out and linted.
CUDA_TEST = (
    "backends/cuda/tests/test_cuda_export.py::TestCudaExport::"
    "test_export_without_partitioner_raises"
)

# A pytest plugin that makes the tests' stand-in for device memory lose its
# device, as it would if torch stopped keeping a storage's Python object.
LOST_DEVICE_PLUGIN = """
import torch

def pytest_collection_modifyitems(items):
    for item in items:
        stand_in = getattr(item.module, "_DeviceStorage", None)
        if stand_in is not None:
            stand_in.device = property(lambda self: torch.device("cpu"))
"""


def _parametrized(prefix: str, test: str, *devices: str) -> list:
    """The node ids ``parameterized.expand`` gives ``test`` over ``devices``."""
    return [f"{prefix}{test}_{i}_{device}" for i, device in enumerate(devices)]


# The cases that put a tensor on a device: each must fail on stock.
EMIT = "exir/emit/test/test_emit_device_constants.py::TestEmitDeviceConstants::"
BUNDLE = (
    "devtools/bundled_program/test/test_bundle_device_tensors.py::"
    "TestBundleDeviceTensors::"
)
DEVICE_CASES = {
    *_parametrized(EMIT, "test_constant_on_device_raises", "cuda_0", "mps_0", "meta"),
    EMIT + "test_external_constant_on_device_raises",
    EMIT + "test_initialized_mutable_buffer_on_device_raises",
    *_parametrized(EMIT, "test_constant_method_on_device_raises", "cuda_0", "meta"),
    *_parametrized(
        BUNDLE, "test_expected_output_on_device_raises", "cuda_0", "mps_0", "meta"
    ),
    *_parametrized(BUNDLE, "test_input_on_device_raises", "cuda_0", "mps_0", "meta"),
    "backends/xnnpack/test/test_xnnpack_device_constants.py::"
    "TestXnnpackDeviceConstants::test_model_on_meta_raises",
    "backends/vulkan/test/test_vulkan_device_constants.py::"
    "TestVulkanDeviceConstants::test_model_on_meta_raises",
}
# The cases whose device is the tests' stand-in for accelerator memory (the
# others use meta), among them those that expect a program as on CPU.
STAND_IN_CASES = {
    *(case for case in DEVICE_CASES if case.endswith(("_cuda_0", "_mps_0"))),
    EMIT + "test_external_constant_on_device_raises",
    EMIT + "test_initialized_mutable_buffer_on_device_raises",
    *_parametrized(
        EMIT, "test_uninitialized_mutable_buffer_on_device_is_emitted", "cuda_0"
    ),
    *_parametrized(EMIT, "test_empty_constant_on_device_is_emitted", "cuda_0"),
    *_parametrized(EMIT, "test_empty_constant_method_on_device_is_emitted", "cuda_0"),
}

# Each probe of test/crash_probes.py, and where its read is in the
# faulthandler traceback of a stock crash.
CRASH_SITES = {
    "emitter_constant": r'exir/emit/_emitter\.py", line 460 in _tensor_spec_to_evalue',
    "emitter_external_constant": r'exir/emit/_emitter\.py", line 460 in _tensor_',
    "emitter_initialized_mutable_buffer": r'exir/emit/_emitter\.py", line 460 in _',
    "emitter_constant_method": r'exir/emit/_emitter\.py", line 460 in _tensor_spec',
    "bundled_expected_output": (
        r'devtools/bundled_program/core\.py", line 173 in _emit_bundled_tensor'
    ),
    "xnnpack_weight": (
        r'backends/xnnpack/operators/node_visitor\.py", line 630 in '
        r"get_serialized_buffer_index"
    ),
    "vulkan_weight": (
        r'backends/vulkan/serialization/vulkan_graph_builder\.py", line 174 in '
        r"maybe_add_constant_tensor"
    ),
}


def outcomes(stdout: str) -> Dict[str, str]:
    """Node id -> PASSED/FAILED/SKIPPED/ERROR, from pytest's -v lines."""
    found = re.findall(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", stdout, re.M)
    return {node: outcome for node, outcome in found}


def _run_all(
    start, jobs: Dict[Tuple[str, str], list], cwd=REPO
) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """(emitter, what) -> ``start(emitter, args)`` in ``cwd``, two at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            key: pool.submit(start, key[0], args, cwd=cwd) for key, args in jobs.items()
        }
        return {key: future.result() for key, future in futures.items()}


@pytest.fixture(scope="module")
def upstream_tree(tmp_path_factory):
    """The series' tests laid out as in ExecuTorch's source tree."""
    tree = write_tree(
        upstream_tests(REPO, executorch_root()), tmp_path_factory.mktemp("upstream")
    )
    (tree / "lost_device.py").write_text(LOST_DEVICE_PLUGIN)
    return tree


@pytest.fixture(scope="module")
def runs(
    emitters: Emitters, upstream_tree
) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """The upstream tests under plain pytest, in a fresh interpreter each; and
    patched, with the stand-in for device memory reporting CPU."""
    args = ["-m", "pytest", "-v", "-p", "no:cacheprovider", *NEW_MODULES]
    jobs = {(e, "upstream"): args for e in ("stock", "patched")}
    jobs[("patched", "lost device")] = ["-m", "pytest", "-p", "lost_device", *args[2:]]
    return _run_all(emitters.run, jobs, upstream_tree)


@pytest.fixture(scope="module")
def probes(emitters: Emitters) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """Each crash probe on each overlay, forked from the overlay's warm parent."""
    return _run_all(
        emitters.fork,
        {
            (emitter, probe): ["-X", "faulthandler", "test/crash_probes.py", probe]
            for probe in CRASH_SITES
            for emitter in ("stock", "patched")
        },
    )


def test_upstream_tests_are_the_series_tests(upstream_tree) -> None:
    assert NEW_FILES == [
        "exir/emit/test/test_emit_device_constants.py",
        "devtools/bundled_program/test/test_bundle_device_tensors.py",
        "backends/xnnpack/test/test_xnnpack_device_constants.py",
        "backends/vulkan/test/test_vulkan_device_constants.py",
        "backends/apple/mps/test/test_mps_device_constants.py",
    ]
    # 1.5.1 ships no MPS backend.
    assert NEW_MODULES == NEW_FILES[:4]
    modules = {
        p.relative_to(upstream_tree).as_posix()
        for p in upstream_tree.rglob("test_*.py")
    }
    assert modules == {*NEW_FILES, CUDA_TEST.split("::")[0]}
    assert (
        "def test_export_without_partitioner_raises(self):"
        in (upstream_tree / CUDA_TEST.split("::")[0]).read_text()
    )


def test_stock_fails_every_device_case_as_a_test(runs) -> None:
    run = runs[("stock", "upstream")]
    output = run.stdout + run.stderr
    assert "Fatal Python error" not in output
    assert run.returncode == 1, output
    stock = outcomes(run.stdout)
    assert {node for node, o in stock.items() if o == "FAILED"} == DEVICE_CASES
    others = {o for node, o in stock.items() if node not in DEVICE_CASES}
    assert others == {"PASSED"}


def test_stock_fails_for_want_of_the_guard(runs) -> None:
    """Each failure: no error at all, or the bare one the stock read gives."""
    stdout = runs[("stock", "upstream")].stdout
    sections = re.split(r"^_+ (\S+) _+$", stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    assert len(failures) == len(DEVICE_CASES)
    stand_in = {case.split("::")[-1] for case in STAND_IN_CASES}
    for name, text in failures.items():
        if name.split(".")[-1] in stand_in:
            assert re.search(r"AssertionError: \w+Error not raised", text), name
        else:
            assert "NULL pointer access" in text, name


def test_patched_passes_every_case(runs) -> None:
    run = runs[("patched", "upstream")]
    assert run.returncode == 0, run.stdout + run.stderr
    patched = outcomes(run.stdout)
    assert set(patched) == set(outcomes(runs[("stock", "upstream")].stdout))
    for node, outcome in patched.items():
        assert outcome == "PASSED", node


def test_a_stand_in_that_lost_its_device_fails_every_case_it_serves(runs) -> None:
    run = runs[("patched", "lost device")]
    outcome = outcomes(run.stdout)
    assert len(STAND_IN_CASES) == 12
    for node in outcome:
        expected = "FAILED" if node in STAND_IN_CASES else "PASSED"
        assert outcome[node] == expected, node
    assert STAND_IN_CASES <= set(outcome)
    assert re.search(r"AssertionError: 'cpu' != '(cuda|mps):0'", run.stdout)


@pytest.mark.parametrize("probe", list(CRASH_SITES))
def test_guarded_read_crashes_stock_and_raises_patched(probes, probe: str) -> None:
    stock, patched = probes[("stock", probe)], probes[("patched", probe)]
    assert stock.returncode == -signal.SIGSEGV, stock.stdout + stock.stderr
    assert "Fatal Python error: Segmentation fault" in stock.stderr
    assert re.search(CRASH_SITES[probe], stock.stderr), stock.stderr
    assert patched.returncode == 1, patched.stdout + patched.stderr
    assert "Fatal Python error" not in patched.stderr
    assert re.search(
        r"^\S*(InternalError|RuntimeError|ValueError): .*is on device cuda:0, but ",
        patched.stderr,
        re.M,
    ), patched.stderr


@pytest.mark.parametrize(
    "model,external_constants",
    [
        ("issue", False),
        ("buffers", False),
        ("channels_last_conv", False),
        ("issue", True),
    ],
)
def test_cpu_programs_are_byte_identical(
    emitters: Emitters, model: str, external_constants: bool
) -> None:
    results = {
        emitter: emitters.export(emitter, "cpu", model, external_constants)
        for emitter in ("stock", "patched")
    }
    for emitter, outcome in results.items():
        assert outcome.describe() == "ok", (emitter, outcome.stderr)
        assert outcome.result["emitter"].startswith(str(emitters.paths[emitter]))
    stock, patched = (results[e].result["files"] for e in ("stock", "patched"))
    assert stock == patched
    assert ("_default_external_constant" in stock) == external_constants
