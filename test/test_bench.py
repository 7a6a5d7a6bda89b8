# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``bench/bench_run.py``: run against plain python on the README's example,
in one run, with the installed ExecuTorch unchanged."""

import re
import subprocess
import sys

from conftest import REPO


def one_round(script: str, *args: str) -> subprocess.CompletedProcess:
    """``bench/SCRIPT --rounds 1 ARGS``, which must exit 0."""
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--rounds", "1", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_bench_run_gives_a_ratio_and_changes_nothing() -> None:
    result = one_round("bench_run.py")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("warm-up: plain ")
    assert lines[1].startswith("round 1 (plain then run): plain ")
    assert re.fullmatch(
        r"ratio: \d+\.\d{3} \((within|OVER) the target of at most 1\.1\)", lines[-2]
    ), lines
    assert re.fullmatch(
        r"the installed ExecuTorch is unchanged: \d+ files and folders", lines[-1]
    ), lines


def test_bench_guard_times_the_patched_emitters_own_check() -> None:
    """The guard's own cost, which bounds what it adds to ``to_executorch()``,
    is timed by calling the patched emitter's check as the emitter does."""
    code = (
        "import sys, torch; sys.path.insert(0, 'bench'); import bench_guard; "
        "from executorch.exir import to_edge; "
        "m = torch.nn.Linear(2, 2); "
        "edge = to_edge(torch.export.export(m, (torch.ones(1, 2),))); "
        "bench_guard.load_emitter_copy(patched=True); "
        "cost = bench_guard.guard_seconds_per_constant(edge); "
        "print(0 < cost < 1e-3)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "True\n", result.stdout


def test_bench_check_splits_the_time_and_gives_the_ratios() -> None:
    """``bench/bench_check.py``: the import, one warm parent's preload and
    check, side by side in one run, with check's phases and its ratio."""
    result = one_round(
        "bench_check.py", "--", "--paths", "emitter", "--devices", "cpu", "fake:cuda:0"
    )
    lines = result.stdout.splitlines()
    assert re.fullmatch(
        r"round 1 \(.*\): import \d+\.\d s \(CPU \d+\.\d s\), preload .*, "
        r"check \d+\.\d s \(CPU \d+\.\d s\); load \d+\.\d\d -> \d+\.\d\d",
        lines[0],
    ), lines
    assert re.fullmatch(
        r"check: \d+\.\d s, CPU \d+\.\d s \(start \d+\.\d s, matrix \d+\.\d s, "
        r"end \d+\.\d s, work \d+\.\d s\); \d+\.\d\d x import, CPU \d+\.\d\d x "
        r"\((within|OVER) 2\.5\)",
        lines[-1],
    ), lines


def test_bench_startup_gives_each_figure_with_and_without_the_fix_on() -> None:
    result = one_round("bench_startup.py")
    ms = r"\d+\.\d\d ms"
    assert re.fullmatch(
        rf"Python \S+, 1 interleaved rounds, medians\n"
        rf"python -c pass: -X importtime top-level imports {ms} without the "
        rf"bootstrap, {ms} with it \(\+-?{ms}\); wall \d+\.\d ms and \d+\.\d ms "
        rf"\(\+-?\d+\.\d ms\)\n"
        rf"executorch.exir.emit._emitter, its own import time: {ms} from its "
        rf"stock .pyc without the bootstrap, {ms} changed with it \(\+-?{ms}\)\n"
        rf"python -c pass in a venv: -X importtime top-level imports {ms} "
        rf"without apply's startup files, {ms} with them \(\+-?{ms}\); wall "
        rf"\d+\.\d ms and \d+\.\d ms \(\+-?\d+\.\d ms\)\n",
        result.stdout,
    ), result.stdout
