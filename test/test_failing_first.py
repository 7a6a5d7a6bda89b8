# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Every guard fails first: on stock ExecuTorch, tests fail and reads crash.

Everything runs in child processes against two overlays of the installed
ExecuTorch (see executorch_device_guard.overlay): stock as installed, and
patched with patches/ applied. The installation itself is never touched.

- The upstream test modules, run with plain ``python -m pytest``: on stock,
  every device case fails as a test (their device memory is readable, so an
  unguarded read does not crash) and the run exits 1 without a fatal error;
  patched, every case passes.
- test/crash_probes.py reaches each guarded read with data in no-access memory,
  as a GPU's is from the host: on stock the process dies with SIGSEGV at that
  read; patched, it exits 1 with an error naming the device.
- CPU programs are byte-identical with and without the series.
"""

import concurrent.futures
import functools
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

import pytest

from conftest import REPO
from executorch_device_guard.installed import executorch_root
from executorch_device_guard.patchset import read_series
from executorch_device_guard.runner import Emitters

# The new upstream test modules whose code the installed ExecuTorch ships
# (1.5.1 ships no MPS backend: test/test_releases.py runs that one on 1.4.1).
UPSTREAM_MODULES = [
    f
    for entry in read_series(REPO)
    for f in entry.new_files
    if (executorch_root() / Path(f).parent.parent).is_dir()
]
CUDA_TEST = (
    "backends/cuda/tests/test_cuda_device_constants.py::TestCudaDeviceConstants::"
    "test_export_without_partitioner_raises"
)


def _parametrized(module: str, cls: str, tests: Tuple[str, ...], devices) -> list:
    return [
        f"{module}::{cls}::{test}_{i}_{device}"
        for test in tests
        for i, device in enumerate(devices)
    ]


# The cases that put a tensor on a device: each must fail on stock.
DEVICE_CASES = {
    *_parametrized(
        "exir/emit/test/test_emit_device_constants.py",
        "TestEmitDeviceConstants",
        (
            "test_constant_on_device_raises",
            "test_external_constant_on_device_raises",
            "test_initialized_mutable_buffer_on_device_raises",
            "test_constant_method_on_device_raises",
        ),
        ("cuda", "mps", "meta"),
    ),
    *_parametrized(
        "devtools/bundled_program/test/test_bundle_device_tensors.py",
        "TestBundleDeviceTensors",
        ("test_expected_output_on_device_raises", "test_input_on_device_raises"),
        ("cuda", "mps", "meta"),
    ),
    "backends/xnnpack/test/test_xnnpack_device_constants.py::"
    "TestXnnpackDeviceConstants::test_model_on_meta_raises",
    "backends/vulkan/test/test_vulkan_device_constants.py::"
    "TestVulkanDeviceConstants::test_model_on_meta_raises",
    "backends/vulkan/test/test_vulkan_device_constants.py::"
    "TestVulkanDeviceConstants::test_serialize_constant_tensors_on_meta_raises",
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
    "vulkan_serialized_constant": (
        r'backends/vulkan/serialization/vulkan_graph_serialize\.py", line 220 in '
        r"serialize_constant_tensors"
    ),
}


def outcomes(stdout: str) -> Dict[str, str]:
    """Node id -> PASSED/FAILED/SKIPPED/ERROR, from pytest's -v lines."""
    found = re.findall(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", stdout, re.M)
    return {node: outcome for node, outcome in found}


def _run_all(
    start, jobs: Dict[Tuple[str, str], list]
) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """(emitter, what) -> ``start(emitter, args)``, two children at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            key: pool.submit(start, key[0], args, cwd=REPO)
            for key, args in jobs.items()
        }
        return {key: future.result() for key, future in futures.items()}


@pytest.fixture(scope="module")
def runs(emitters: Emitters) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """The upstream modules under plain pytest, in a fresh interpreter each."""
    args = ["-m", "pytest", "-v", "-p", "no:cacheprovider", *UPSTREAM_MODULES]
    jobs = {(e, "upstream"): args for e in ("stock", "patched")}
    return _run_all(emitters.run, jobs)


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


def test_upstream_modules_are_the_series_new_files() -> None:
    assert UPSTREAM_MODULES == [
        "backends/cuda/tests/test_cuda_device_constants.py",
        "exir/emit/test/test_emit_device_constants.py",
        "devtools/bundled_program/test/test_bundle_device_tensors.py",
        "backends/xnnpack/test/test_xnnpack_device_constants.py",
        "backends/vulkan/test/test_vulkan_device_constants.py",
    ]


def test_stock_fails_every_device_case_as_a_test(runs) -> None:
    run = runs[("stock", "upstream")]
    output = run.stdout + run.stderr
    assert "Fatal Python error" not in output
    assert run.returncode == 1, output
    stock = outcomes(run.stdout)
    assert {node for node, o in stock.items() if o == "FAILED"} == DEVICE_CASES
    others = {o for node, o in stock.items() if node not in DEVICE_CASES}
    assert others == {"PASSED", "SKIPPED"}
    assert stock[CUDA_TEST] == ("PASSED" if _has_cuda() else "SKIPPED")


def test_stock_fails_for_want_of_the_guard(runs) -> None:
    """Each failure: no error at all, or the bare one the stock read gives."""
    stdout = runs[("stock", "upstream")].stdout
    sections = re.split(r"^_+ (\S+) _+$", stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    assert len(failures) == len(DEVICE_CASES)
    for name, text in failures.items():
        if name.endswith(("cuda", "mps")):
            assert re.search(r"AssertionError: \w+Error not raised", text), name
        else:
            assert "NULL pointer access" in text, name


def test_patched_passes_every_case(runs) -> None:
    run = runs[("patched", "upstream")]
    assert run.returncode == 0, run.stdout + run.stderr
    patched = outcomes(run.stdout)
    assert set(patched) == set(outcomes(runs[("stock", "upstream")].stdout))
    for node, outcome in patched.items():
        expected = "SKIPPED" if node == CUDA_TEST and not _has_cuda() else "PASSED"
        assert outcome == expected, node


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


@functools.lru_cache(maxsize=None)
def _has_cuda() -> bool:
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", probe]).returncode == 0


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
