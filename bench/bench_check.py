# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What ``check`` costs against one import of torch and ExecuTorch, and where
its time goes.

    .venv/bin/python bench/bench_check.py [--rounds 5] [--before DIR] [--model SPEC] [-- CHECK ARGS...]

Measured side by side in one run, in interleaved rounds whose order rotates,
each command in a fresh process of this interpreter, so that other work on
the machine slows all of them alike:

- ``import``: ``python -c "import torch, executorch.exir"``;
- ``check``: ``python -m executorch_device_guard check`` (the default
  matrix, or CHECK ARGS);
- ``model``: ``check --model bench/user_model.py:make`` (a small user
  model: a 1-D convolution classifier), or ``--model SPEC`` (e.g. the tiny
  transformers decoder ``test/models/decoder.py:make``), unless CHECK ARGS
  are given; its median is also given as a ratio to the default check's
  (issue 33's target: at most 2).

- ``preload``: one warm parent's work before it forks, alone: check's
  preloads (torch, ExecuTorch, its backends) and the pattern graphs.

Each check's progress lines (stderr) are timestamped as they come, which
splits its time in three: ``start`` (until the first export ends: the warm
parents' imports and pattern graphs, the model probe, that export),
``matrix`` (until the last export ends) and ``end`` (the table, removing
check's folder). ``work`` is the sum of the other exports' own times over the jobs
that ran them: what the matrix would take with no waiting. Prints each round, the medians, the ratios to the import
(targets: at most 2.5 for the default check, 3 for the model) and the
1-minute load average before and after every round. CPU time (of the
command and every process it waited for) is printed beside each time:
other work on the machine changes it much less than the wall time. ``--before DIR`` times
the same checks with the tool of another checkout (an earlier commit) in
the same rounds.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
# One warm parent's work before it forks: check's preloads and pattern graphs.
PRELOAD = (
    "import importlib; from executorch_device_guard.check.runner import EXPORT_PRELOAD\n"
    "for name in EXPORT_PRELOAD:\n"
    "    module, _, function = name.rstrip('?').partition(':')\n"
    "    try:\n"
    "        imported = importlib.import_module(module)\n"
    "    except ImportError:\n"
    "        continue\n"
    "    if function:\n"
    "        getattr(imported, function)()\n"
)
TARGETS = {"check": 2.5, "model": 3.0}
MODEL_TO_CHECK = 2.0
_EXPORT_TIME = re.compile(r"^\[\s*\d+/\d+\] .* \((\d+\.\d+) s[;)]")
_JOBS = re.compile(r"^running \d+ exports, (\d+) at a time")


def env(tool: Path) -> Dict[str, str]:
    found = dict(os.environ)
    found["PYTHONPATH"] = os.pathsep.join(
        [str(tool)] + ([found["PYTHONPATH"]] if found.get("PYTHONPATH") else [])
    )
    return found


def _children_cpu() -> float:
    """CPU seconds of every finished child process (and those it waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: List[str], tool: Path = REPO) -> Dict[str, float]:
    """Runs ``cmd`` with the tool of ``tool`` first on the path; its total
    time, and for a check the phases above."""
    start = time.monotonic()
    cpu_before = _children_cpu()
    # From a folder of its own: the current folder comes first on the path
    # of ``python -m``, and must not bring another form of the tool.
    proc = subprocess.Popen(
        cmd,
        env=env(tool),
        cwd=tempfile.gettempdir(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = last = None
    work, jobs, lines = 0.0, 1, []
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.monotonic() - start
        lines.append(line)
        if _JOBS.match(line):
            jobs = int(_JOBS.match(line).group(1))
        found = _EXPORT_TIME.match(line.strip())
        if found:
            if first is None:
                first = now
            else:  # the first one waited for its warm parent's imports
                work += float(found.group(1))
            last = now
    stdout = proc.stdout.read() if proc.stdout else ""
    code = proc.wait()
    total = time.monotonic() - start
    cpu = _children_cpu() - cpu_before
    if code != 0:
        sys.exit(f"{' '.join(cmd)} exited {code}:\n{stdout}{''.join(lines)}")
    times = {"total": total, "cpu": cpu}
    if first is not None and last is not None:
        times.update(
            start=first, matrix=last - first, end=total - last, work=work / jobs
        )
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of an earlier form of the tool, whose checks join "
        "each round ('check-before', 'model-before')",
    )
    parser.add_argument(
        "--model",
        default=str(REPO / "bench/user_model.py:make"),
        help="the model of 'model' (default: bench/user_model.py:make); "
        "its time is also given as a ratio to the default check's",
    )
    parser.add_argument("check_args", nargs="*", help="after --: arguments for check")
    args = parser.parse_args()
    check = [sys.executable, "-m", "executorch_device_guard", "check"]
    commands = {
        "import": [sys.executable, "-c", "import torch, executorch.exir"],
        "preload": [sys.executable, "-c", PRELOAD],
        "check": check + args.check_args,
    }
    if not args.check_args:
        commands["model"] = check + ["--model", args.model]
    tools = {name: REPO for name in commands}
    if args.before:
        for name in [n for n in commands if n.startswith(("check", "model"))]:
            commands[f"{name}-before"] = commands[name]
            tools[f"{name}-before"] = args.before.resolve()
    names = list(commands)
    results: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
    for number in range(1, args.rounds + 1):
        order = names[number % len(names) :] + names[: number % len(names)]
        before = os.getloadavg()[0]
        for name in order:
            results[name].append(timed(commands[name], tools[name]))
        after = os.getloadavg()[0]
        print(
            f"round {number} ({', '.join(order)}): "
            + ", ".join(
                f"{n} {results[n][-1]['total']:.1f} s (CPU {results[n][-1]['cpu']:.1f} s)"
                for n in names
            )
            + f"; load {before:.2f} -> {after:.2f}",
            flush=True,
        )
    print(f"cores: {os.cpu_count()}; medians of {args.rounds} rounds:")
    base = statistics.median(r["total"] for r in results["import"])
    base_cpu = statistics.median(r["cpu"] for r in results["import"])
    for name in names:
        medians = {
            key: statistics.median(r[key] for r in results[name])
            for key in results[name][0]
        }
        parts = ", ".join(
            f"{k} {v:.1f} s" for k, v in medians.items() if k not in ("total", "cpu")
        )
        line = f"{name}: {medians['total']:.1f} s, CPU {medians['cpu']:.1f} s"
        line += f" ({parts})" if parts else ""
        if name.startswith(("check", "model")):
            ratio = medians["total"] / base
            line += f"; {ratio:.2f} x import, CPU {medians['cpu'] / base_cpu:.2f} x"
        if name in TARGETS:
            verdict = "within" if ratio <= TARGETS[name] else "OVER"
            line += f" ({verdict} {TARGETS[name]})"
        print(line)
    if "model" in results:
        # Issue 33: check --model at most twice the default check.
        model, default = (
            statistics.median(r["total"] for r in results[n]) for n in ("model", "check")
        )
        verdict = "within" if model / default <= MODEL_TO_CHECK else "OVER"
        print(
            f"model / check: {model / default:.2f} ({verdict} {MODEL_TO_CHECK}): "
            f"{args.model}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
