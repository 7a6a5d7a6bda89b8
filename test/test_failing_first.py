# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The upstream tests fail on the stock emitter and pass on the patched one.

Every case runs in a child process against an overlay of the installed
ExecuTorch (see executorch_device_guard.overlay): the stock one as installed,
the patched one with patches/ applied. The installation itself is never touched.
"""

import re
import signal
import subprocess
from typing import Dict

import pytest

from conftest import REPO
from executorch_device_guard.runner import Emitters

UPSTREAM = "exir/emit/test/test_emit_device_constants.py"
FAKE_DEVICES = ["cuda:0", "mps:0"]
RAISING_TESTS = [
    "test_constant_on_device_raises",
    "test_external_constant_on_device_raises",
    "test_initialized_mutable_buffer_on_device_raises",
    "test_constant_method_on_device_raises",
]
# The stock emitter's own line for the host read, in 1.5.1 and main.
STOCK_CRASH = re.compile(r'_emitter\.py", line 460 in _tensor_spec_to_evalue')


def run_pytest(
    emitters: Emitters, emitter: str, *args: str
) -> subprocess.CompletedProcess:
    script = (
        "import sys, pytest, executorch.exir.emit._emitter as e; "
        "print('EMITTER', e.__file__, flush=True); "
        "sys.exit(pytest.main(sys.argv[1:]))"
    )
    cmd = ["-X", "faulthandler", "-c", script, "-p", "no:cacheprovider", "-rA"]
    proc = emitters.run(emitter, [*cmd, *args])
    # Prove which emitter the child imported.
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
def patched_run(emitters: Emitters) -> subprocess.CompletedProcess:
    return run_pytest(emitters, "patched", str(REPO / UPSTREAM))


def test_patched_emitter_passes_the_whole_upstream_module(patched_run) -> None:
    assert patched_run.returncode == 0, patched_run.stdout + patched_run.stderr
    assert re.search(
        r"\b19 passed, 1 skipped\b", patched_run.stdout
    ), patched_run.stdout
    assert "Fatal Python error" not in patched_run.stderr


@pytest.mark.parametrize("device", FAKE_DEVICES)
@pytest.mark.parametrize("test", RAISING_TESTS)
def test_fake_device_case_crashes_stock_and_passes_patched(
    emitters: Emitters, patched_run, test: str, device: str
) -> None:
    test_id = f"{test}[{device}]"
    stock = run_pytest(emitters, "stock", f"{REPO / UPSTREAM}::{test_id}")
    assert stock.returncode == -signal.SIGSEGV, stock.stdout + stock.stderr
    assert "Fatal Python error: Segmentation fault" in stock.stderr
    assert STOCK_CRASH.search(stock.stderr), stock.stderr
    assert outcomes(patched_run.stdout)[test_id] == "PASSED"


def test_meta_cases_fail_stock_without_naming_the_device(
    emitters: Emitters, patched_run
) -> None:
    stock = run_pytest(emitters, "stock", str(REPO / UPSTREAM), "-k", "raises and meta")
    assert stock.returncode == 1, stock.stdout + stock.stderr
    meta_ids = [f"{test}[meta]" for test in RAISING_TESTS]
    assert {t: outcomes(stock.stdout).get(t) for t in meta_ids} == dict.fromkeys(
        meta_ids, "FAILED"
    )
    # Each stock failure is a NULL pointer access that names no device: an
    # InternalError from the graph's nodes, a bare ValueError from
    # constant_methods.
    sections = re.split(r"^_{3,} (\S+) _{3,}$", stock.stdout, flags=re.M)
    failures = dict(zip(sections[1::2], sections[2::2]))
    assert sorted(failures) == sorted(meta_ids)
    for test_id, text in failures.items():
        raised = re.search(
            r"Actual message: 'Failed with error: NULL pointer access\\n"
            r"|^E +ValueError: NULL pointer access$",
            text,
            re.M,
        )
        assert raised, (test_id, text)
        assert not re.search(r"Actual message: '[^']*on device meta", text)
    for test_id in meta_ids:
        assert outcomes(patched_run.stdout)[test_id] == "PASSED"


def test_cases_that_must_keep_working_pass_on_both(
    emitters: Emitters, patched_run
) -> None:
    stock = run_pytest(emitters, "stock", str(REPO / UPSTREAM), "-k", "not raises")
    assert stock.returncode == 0, stock.stdout + stock.stderr
    kept = {t: o for t, o in outcomes(stock.stdout).items() if o == "PASSED"}
    assert len(kept) == 7, stock.stdout
    for test_id in kept:
        assert outcomes(patched_run.stdout)[test_id] == "PASSED"


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
