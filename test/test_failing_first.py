# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Every guard fails first: on stock ExecuTorch, tests fail and reads crash.

Everything runs in child processes on the installed ExecuTorch: stock with
the import hook off, and patched with it on, serving the series (or one
commit's) as its pull requests land (``Emitters(upstream=True)``). The
installation itself is never touched, and no copy of it is made.

- Each commit of the series alone, as its pull request lands: a series of
  that commit only (its patch and the files it adds), its test modules (the
  ones it adds, and the ones it edits, as it edits them) under plain
  ``python -m pytest``. Patched with that commit alone, every test passes;
  on stock, every case that needs the commit fails as a test (the tests'
  device memory is readable, so an unguarded read does not crash) and the
  run exits 1 without a fatal error. Each case first checks its premise,
  that the storage it hands over reports the device: a stand-in that lost
  its device makes the case fail, never pass. The tests of a commit that
  edits C++ pass only against a library built from it
  (scripts/build_custom_ops.sh, whose runs docs/custom-ops-build.md
  records): here they run on stock, where each of their device cases fails
  as a test.
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
from executorch_device_guard.installation.installed import executorch_root
from executorch_device_guard.patchset import read_series
from executorch_device_guard.check.runner import Emitters
from executorch_device_guard.check.series_files import (
    build_test_modules,
    pytest_outcomes,
    series_test_modules,
    upstream_tests,
    write_commit_root,
    write_tree,
)

SERIES = read_series(REPO)
NEW_FILES = [f for entry in SERIES for f in entry.new_files]
# The new test modules of the commits that edit C++: they need its build.
BUILD_MODULES = build_test_modules(REPO)
# The series' test modules, new and edited, that run on CPU here.
MODULES = series_test_modules(REPO, executorch_root())
# The series' CUDA tests, in upstream's GPU test folder. They need a GPU, and
# on stock kill their process, as the reproducer does: gpu/ runs them
# there. Here their modules are only laid out and linted.
GPU_MODULES = series_test_modules(REPO, executorch_root(), gpu=True)

# A pytest plugin that makes the tests' stand-in for device memory lose its
# device, as it would if torch stopped keeping a storage's Python object.
LOST_DEVICE_PLUGIN = """
def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item.module, "on_cuda_storage"):
            item.module.on_cuda_storage = lambda tensor: tensor
"""

EMITTER_FILE = "exir/emit/_emitter.py"
EMITTER_MODULE = "executorch.exir.emit._emitter"
EMIT = "exir/emit/test/test_emit.py::TestEmit::"
BUNDLE = "devtools/bundled_program/test/test_bundle_data.py::TestBundle::"
XNNPACK = (
    "backends/xnnpack/test/test_xnnpack_device_constants.py::"
    "TestXnnpackDeviceConstants::"
)
VULKAN = (
    "backends/vulkan/test/test_vulkan_device_constants.py::"
    "TestVulkanDeviceConstants::"
)
CUSTOM_OPS = "extension/llm/custom_ops/test_cpu_kernels.py::CpuKernelsTest::"
PROPAGATE = "exir/tests/test_propagate_device_pass.py::TestPropagateDevicePass::"
# Per commit that has tests on CPU: the cases that need it, which fail on stock.
STOCK_FAILURES = {
    "0001": {
        EMIT + "test_emit_constant_not_in_cpu_memory_raises",
        EMIT + "test_emit_constant_method_not_in_cpu_memory_raises",
    },
    "0002": {BUNDLE + "test_bundle_tensors_on_device"},
    "0003": {
        XNNPACK + "test_model_on_meta_raises",
        XNNPACK + "test_weight_in_meta_storage_raises",
    },
    "0004": {
        VULKAN + "test_model_on_meta_raises",
        VULKAN + "test_weight_in_meta_storage_raises",
    },
    "0005": {
        PROPAGATE + "test_e2e_copy_of_constant_is_planned",
        PROPAGATE + "test_e2e_skip_h2d_keeps_the_copy_of_a_constant",
    },
}
COMMITS = list(STOCK_FAILURES)
# The cases whose storage is the tests' stand-in for accelerator memory (the
# others use meta or fake tensors), among them one that passes on stock too:
# it pins what must not change, and fails if the stand-in loses its device.
STAND_IN_CASES = {
    "0001": {
        EMIT + "test_emit_constant_not_in_cpu_memory_raises",
        EMIT + "test_emit_constant_method_not_in_cpu_memory_raises",
        EMIT + "test_emit_empty_constant_not_in_cpu_memory",
    },
    "0002": {BUNDLE + "test_bundle_tensors_on_device"},
}
# test_emit.py's own skips, stock and patched.
SKIPPED = {EMIT + "test_nested_return", EMIT + "test_emit_multiple_out"}
# The case of BUILD_MODULES, which stock fails.
BUILD_STOCK_FAILURES = {CUSTOM_OPS + "test_kernels_are_registered_for_cpu_only"}
# What stock does where a case expects the guard: nothing at all, the bare
# error of the unguarded read, or, for the device copy of a constant, the
# emitter's look for data it does not have, no copy under
# skip_h2d_for_method_inputs (an error for a constant with two users).
STOCK_OUTCOMES = (
    r"AssertionError: \w+Error not raised",
    r"(ValueError: |Failed with error: )NULL pointer access",
    r"AttributeError: 'NoneType' object has no attribute 'nbytes'",
    r"ValueError: not enough values to unpack \(expected 1, got 0\)",
    r"RuntimeError: skip_h2d_for_method_inputs=True requires placeholder 'p_weight' ",
)

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
# The probes whose read, patched, is of a host copy, which succeeds.
COPIED = {"bundled_expected_output"}


def _run_all(
    start, jobs: Dict[Tuple[str, str], list], cwd=REPO
) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """(emitter, what) -> ``start(emitter, args)`` in ``cwd``, two at a time."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            key: pool.submit(start, key[0], args, cwd=cwd) for key, args in jobs.items()
        }
        return {key: future.result() for key, future in futures.items()}


def _commit(number: str):
    (entry,) = [e for e in SERIES if e.patch_path.name.startswith(number + "-")]
    return entry


def _pytest(*args: str) -> list:
    return ["-m", "pytest", "-v", "-p", "no:cacheprovider", *args]


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """(commit, run) -> its test modules under pytest, in a fresh interpreter:
    on stock, patched with that commit alone, and patched with the stand-in
    for device memory reporting CPU. Nothing of another commit is there."""
    results = {}
    for number in COMMITS:
        root = write_commit_root(
            REPO, _commit(number), tmp_path_factory.mktemp(f"commit-{number}")
        )
        tree = write_tree(upstream_tests(root, executorch_root()), root / "tree")
        (tree / "lost_device.py").write_text(LOST_DEVICE_PLUGIN)
        modules = series_test_modules(root, executorch_root())
        jobs = {(e, "tests"): _pytest(*modules) for e in ("stock", "patched")}
        if number in STAND_IN_CASES:
            jobs[("patched", "lost device")] = _pytest("-p", "lost_device", *modules)
        with Emitters(root, warm=False, upstream=True) as emitters:
            for (emitter, run), proc in _run_all(emitters.run, jobs, tree).items():
                results[(number, emitter if run == "tests" else run)] = proc
    return results


@pytest.fixture(scope="module")
def build_run(emitters: Emitters, tmp_path_factory) -> subprocess.CompletedProcess:
    """The C++ commit's test modules, on stock (the released library)."""
    tree = write_tree(
        upstream_tests(REPO, executorch_root()), tmp_path_factory.mktemp("upstream")
    )
    return emitters.run("stock", _pytest(*BUILD_MODULES), cwd=tree)


@pytest.fixture(scope="module")
def probes(emitters: Emitters) -> Dict[Tuple[str, str], subprocess.CompletedProcess]:
    """Each crash probe on each side, forked from the side's warm parent."""
    return _run_all(
        emitters.fork,
        {
            (emitter, probe): ["-X", "faulthandler", "test/crash_probes.py", probe]
            for probe in CRASH_SITES
            for emitter in ("stock", "patched")
        },
    )


def test_upstream_tests_are_the_series_tests(tmp_path) -> None:
    assert NEW_FILES == [
        "backends/cuda/tests/test_cuda_bundled_program.py",
        "backends/xnnpack/test/test_xnnpack_device_constants.py",
        "backends/vulkan/test/test_vulkan_device_constants.py",
        "extension/llm/custom_ops/test_cpu_kernels.py",
    ]
    assert MODULES == [
        "exir/emit/test/test_emit.py",
        "devtools/bundled_program/test/test_bundle_data.py",
        "exir/tests/test_propagate_device_pass.py",
        "backends/xnnpack/test/test_xnnpack_device_constants.py",
        "backends/vulkan/test/test_vulkan_device_constants.py",
    ]
    assert BUILD_MODULES == ["extension/llm/custom_ops/test_cpu_kernels.py"]
    assert GPU_MODULES == [
        "backends/cuda/tests/test_cuda_export.py",
        "backends/cuda/tests/test_cuda_bundled_program.py",
    ]
    tree = write_tree(upstream_tests(REPO, executorch_root()), tmp_path)
    modules = {p.relative_to(tree).as_posix() for p in tree.rglob("test_*.py")}
    assert modules == {*MODULES, *BUILD_MODULES, *GPU_MODULES}
    cuda_export = (tree / GPU_MODULES[0]).read_text()
    assert "def test_export_without_partitioner_raises(self):" in cuda_export
    assert "def test_export_with_partitioner_from_cuda(self):" in cuda_export


def test_each_commit_holds_its_own_tests(tmp_path) -> None:
    """A commit's tests import nothing another commit adds or changes: its
    series alone lays out exactly its own test modules, and no test helper."""
    owned = []
    for number in COMMITS:
        root = write_commit_root(REPO, _commit(number), tmp_path / number)
        files = upstream_tests(root, executorch_root())
        modules = series_test_modules(root, executorch_root())
        assert set(modules) <= set(files), number
        owned += modules
        assert all(Path(rel).name.startswith("test_") for rel in files), number
    assert sorted(owned) == sorted(MODULES)


@pytest.mark.parametrize("number", COMMITS)
def test_each_commit_alone_passes_its_tests(alone, number: str) -> None:
    run = alone[(number, "patched")]
    assert run.returncode == 0, run.stdout + run.stderr
    patched = pytest_outcomes(run.stdout)
    assert STOCK_FAILURES[number] <= set(patched)
    assert set(patched) == set(pytest_outcomes(alone[(number, "stock")].stdout))
    for node, outcome in patched.items():
        assert outcome == ("SKIPPED" if node in SKIPPED else "PASSED"), node


@pytest.mark.parametrize("number", COMMITS)
def test_stock_fails_each_commits_cases_as_tests(alone, number: str) -> None:
    run = alone[(number, "stock")]
    output = run.stdout + run.stderr
    assert "Fatal Python error" not in output
    assert run.returncode == 1, output
    stock = pytest_outcomes(run.stdout)
    assert {node for node, o in stock.items() if o == "FAILED"} == (
        STOCK_FAILURES[number]
    )
    others = {n: o for n, o in stock.items() if n not in STOCK_FAILURES[number]}
    for node, outcome in others.items():
        assert outcome == ("SKIPPED" if node in SKIPPED else "PASSED"), node
    # Each failure: no error at all, or the bare one the stock read gives.
    # One section a failed test, or a failed subtest: "_ Name (pipeline=...) _".
    sections = re.split(r"^_+ (\S+)(?: \(.*\))? _+$", run.stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    assert {f.split(".")[-1] for f in failures} == {
        case.split("::")[-1] for case in STOCK_FAILURES[number]
    }
    for name, text in failures.items():
        assert any(re.search(o, text) for o in STOCK_OUTCOMES), name


@pytest.mark.parametrize("number", list(STAND_IN_CASES))
def test_a_stand_in_that_lost_its_device_fails_every_case_it_serves(
    alone, number: str
) -> None:
    run = alone[(number, "lost device")]
    outcome = pytest_outcomes(run.stdout)
    assert STAND_IN_CASES[number] <= set(outcome)
    for node in outcome:
        expected = "FAILED" if node in STAND_IN_CASES[number] else "PASSED"
        assert outcome[node] == ("SKIPPED" if node in SKIPPED else expected), node


def test_stock_fails_the_build_modules_device_cases_as_tests(build_run) -> None:
    """The C++ commit's test on the released library, which registers its
    kernels for every device: it fails at the check that no kernel would run
    for CUDA, which names the library's ops."""
    run = build_run
    output = run.stdout + run.stderr
    assert "Fatal Python error" not in output
    assert run.returncode == 1, output
    stock = pytest_outcomes(run.stdout)
    assert {node for node, o in stock.items() if o == "FAILED"} == (
        BUILD_STOCK_FAILURES
    )
    assert re.search(r"AssertionError: Lists differ: \['llama::\w+', ", run.stdout)


@pytest.mark.parametrize("probe", list(CRASH_SITES))
def test_guarded_read_crashes_stock_and_raises_patched(probes, probe: str) -> None:
    stock, patched = probes[("stock", probe)], probes[("patched", probe)]
    assert stock.returncode == -signal.SIGSEGV, stock.stdout + stock.stderr
    assert "Fatal Python error: Segmentation fault" in stock.stderr
    assert re.search(CRASH_SITES[probe], stock.stderr), stock.stderr
    if probe in COPIED:
        # Test data is the caller's: it is read from a host copy.
        assert patched.returncode == 0, patched.stdout + patched.stderr
        assert "those of a CPU copy" in patched.stdout
        return
    assert patched.returncode == 1, patched.stdout + patched.stderr
    assert "Fatal Python error" not in patched.stderr
    assert re.search(
        r"^\S*(InternalError|ExportError|RuntimeError|ValueError): "
        r".*is on device cuda:0, but ",
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
        assert outcome.result["emitter"] == str(executorch_root() / EMITTER_FILE)
        # What the import hook served: nothing on stock; patched, every
        # target module it met changed, the emitter among them.
        served = outcome.result["served"]
        if emitter == "stock":
            assert served is None
        else:
            assert served[EMITTER_MODULE] == "changed"
            assert set(served.values()) == {"changed"}, served
    stock, patched = (results[e].result["files"] for e in ("stock", "patched"))
    assert stock == patched
    assert ("_default_external_constant" in stock) == external_constants


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_failed_subtest_is_a_failed_test(tmp_path, ci: str) -> None:
    """pytest -v reports a test whose subtest failed as PASSED, and adds a
    SUBFAILED line; under CI (the CI variable set) that line carries the
    message too. Either way the test is FAILED."""
    import os
    import sys

    (tmp_path / "test_sub.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_a(self):\n"
        "        for x in (1, 2):\n"
        "            with self.subTest(x=x):\n"
        "                self.assertEqual(x, 1)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    env.update({"CI": ci} if ci else {})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_sub.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert pytest_outcomes(run.stdout) == {"test_sub.py::T::test_a": "FAILED"}, (
        run.stdout
    )
