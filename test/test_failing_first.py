# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream tests crash or fail on stock ExecuTorch and pass patched.

Every upstream test module of the series runs in child processes against two
overlays of the installed ExecuTorch (see executorch_device_guard.overlay): the
stock one as installed, the patched one with patches/ applied. The installation
itself is never touched. On stock, each fake-device case must die with SIGSEGV
at the host read it guards; each meta case must fail without naming the device;
every other case must pass. On patched, the whole module must pass.
"""

import concurrent.futures
import dataclasses
import re
import signal
import subprocess
from typing import Dict, List, Tuple

import pytest

from conftest import REPO
from executorch_device_guard.runner import Emitters

FAKE = ["cuda:0", "mps:0"]
EMIT_RAISING = [
    "test_constant_on_device_raises",
    "test_external_constant_on_device_raises",
    "test_initialized_mutable_buffer_on_device_raises",
    "test_constant_method_on_device_raises",
]


@dataclasses.dataclass
class Module:
    path: str
    # test id -> where stock ExecuTorch's faulthandler traceback must point
    crashes: Dict[str, str]
    # test ids that fail on stock, with the stock error that names no device
    failures: Dict[str, str]
    patched_summary: str


NULL_ACCESS = (
    r"Actual message: 'Failed with error: NULL pointer access\\n"
    r"|^E +ValueError: NULL pointer access$"
)

MODULES = [
    Module(
        "exir/emit/test/test_emit_device_constants.py",
        # Line 460 as in the issue: 1.5.1 and main have the same emitter.
        {
            f"{test}[{d}]": r'emit/_emitter\.py", line 460 in _tensor_spec_to_evalue'
            for test in EMIT_RAISING
            for d in FAKE
        },
        {f"{test}[meta]": NULL_ACCESS for test in EMIT_RAISING},
        "19 passed, 1 skipped",
    ),
    Module(
        "devtools/bundled_program/test/test_bundle_device_tensors.py",
        {
            f"test_device_tensor_raises_before_any_read[{d}]": (
                r'bundled_program/core\.py", line \d+ in _emit_bundled_tensor'
            )
            for d in FAKE
        },
        {
            "test_meta_expected_output_raises": NULL_ACCESS,
            "test_meta_input_raises": NULL_ACCESS,
        },
        "5 passed, 1 skipped",
    ),
    Module(
        "backends/xnnpack/test/test_xnnpack_device_constants.py",
        {
            f"test_weight_on_device_raises[{d}]": (
                r'operators/node_visitor\.py", line \d+ in get_serialized_buffer_index'
            )
            for d in FAKE
        },
        {},
        "3 passed, 1 skipped",
    ),
    Module(
        "backends/vulkan/test/test_vulkan_device_constants.py",
        {
            **{
                f"test_weight_on_device_raises[{d}]": (
                    r'vulkan_graph_builder\.py", line \d+ in maybe_add_constant_tensor'
                )
                for d in FAKE
            },
            **{
                f"test_serialize_vulkan_graph_raises[{d}]": (
                    r'vulkan_graph_serialize\.py", line \d+ in serialize_constant_tensors'
                )
                for d in FAKE
            },
        },
        {},
        "5 passed",
    ),
]
MODULE_IDS = [m.path.rsplit("/", 1)[1][: -len(".py")] for m in MODULES]


def run_pytest(
    emitters: Emitters, emitter: str, *args: str
) -> subprocess.CompletedProcess:
    script = (
        "import sys, pytest, executorch.exir.emit._emitter as e; "
        "print('EMITTER', e.__file__, flush=True); "
        "sys.exit(pytest.main(sys.argv[1:]))"
    )
    cmd = ["-X", "faulthandler", "-c", script, "-p", "no:cacheprovider", "-rA"]
    proc = emitters.run(emitter, [*cmd, *args], cwd=REPO)
    # Prove which ExecuTorch the child imported.
    assert (
        f"EMITTER {emitters.paths[emitter]}/executorch/exir/emit/_emitter.py"
        in proc.stdout
    )
    return proc


def outcomes(stdout: str) -> Dict[str, str]:
    """'PASSED path::test[id]' summary lines (from -rA), by test id."""
    found = re.findall(r"^(PASSED|FAILED|SKIPPED|ERROR) \S*::(\S+)", stdout, re.M)
    return {test: outcome for outcome, test in found}


@pytest.fixture(scope="module")
def runs(emitters: Emitters) -> Dict[Tuple[str, str, str], subprocess.CompletedProcess]:
    """Every child this file needs, two at a time: (emitter, module, what) -> run.

    Each stock crash case needs a child of its own; the rest of a module runs in
    one child per emitter.
    """
    jobs: List[Tuple[str, str, str, List[str]]] = []
    for m in MODULES:
        path = m.path  # node ids are relative to the rootdir, REPO
        jobs.append(("patched", m.path, "all", [path]))
        deselect = [arg for t in m.crashes for arg in ("--deselect", f"{path}::{t}")]
        jobs.append(("stock", m.path, "rest", [path, *deselect]))
        jobs += [("stock", m.path, t, [f"{path}::{t}"]) for t in m.crashes]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            job[:3]: pool.submit(run_pytest, emitters, job[0], *job[3]) for job in jobs
        }
        return {key: future.result() for key, future in futures.items()}


@pytest.mark.parametrize("module", MODULES, ids=MODULE_IDS)
def test_patched_passes_the_whole_module(runs, module: Module) -> None:
    run = runs[("patched", module.path, "all")]
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(rf"\b{module.patched_summary}\b", run.stdout), run.stdout
    assert "Fatal Python error" not in run.stderr


@pytest.mark.parametrize("module", MODULES, ids=MODULE_IDS)
def test_fake_device_cases_crash_stock_and_pass_patched(runs, module: Module) -> None:
    patched = outcomes(runs[("patched", module.path, "all")].stdout)
    for test_id, crash_site in module.crashes.items():
        stock = runs[("stock", module.path, test_id)]
        assert stock.returncode == -signal.SIGSEGV, (
            test_id,
            stock.stdout + stock.stderr,
        )
        assert "Fatal Python error: Segmentation fault" in stock.stderr, test_id
        assert re.search(crash_site, stock.stderr), (test_id, stock.stderr)
        assert patched[test_id] == "PASSED", test_id


@pytest.mark.parametrize("module", MODULES, ids=MODULE_IDS)
def test_other_cases_fail_stock_only_where_expected(runs, module: Module) -> None:
    stock = runs[("stock", module.path, "rest")]
    patched = outcomes(runs[("patched", module.path, "all")].stdout)
    stock_outcomes = outcomes(stock.stdout)
    assert stock.returncode == (1 if module.failures else 0), (
        stock.stdout + stock.stderr
    )
    assert {t for t, o in stock_outcomes.items() if o == "FAILED"} == set(
        module.failures
    )
    # Each stock failure is an error that names no device.
    sections = re.split(r"^_{3,} (\S+) _{3,}$", stock.stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    for test_id, stock_error in module.failures.items():
        assert re.search(stock_error, failures[test_id], re.M), (
            test_id,
            failures[test_id],
        )
        assert not re.search(r"Actual message: '[^']*on device meta", failures[test_id])
    for test_id, outcome in stock_outcomes.items():
        if outcome == "PASSED":
            assert patched[test_id] == "PASSED", test_id


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
