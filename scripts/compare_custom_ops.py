# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The custom ops library built stock and changed (scripts/build_custom_ops.sh),
each loaded in place of the wheel's in a throwaway copy of the installed
ExecuTorch, side by side with the wheel's own library where it loads:

- the custom-ops commit's test (extension/llm/custom_ops/test_cpu_kernels.py),
  and ExecuTorch's own tests of the custom ops that the wheel ships, each
  module a pytest process of its own;
- every op of the library called on CPU (the sha256 of its outputs), on
  ``meta``, under FakeTensorMode, and with ``--device cuda`` on CUDA, each
  build's calls in a process that is restarted after a crash
  (gpu/custom_ops_probe.py); ExecuTorch's Llama with the custom SDPA and KV
  cache run on CPU and exported through XNNPACK (the program's sha256).

    python scripts/compare_custom_ops.py BUILD OUT [--device cuda] [--jobs N] [--quick]

Run it with the Python the libraries were built against. The installed
ExecuTorch is only read. Writes OUT/table.txt, OUT/summary.json and
OUT/logs/BUILD-NAME/*.txt; exits 0 when the comparison holds (see ``verdict``),
1 when it does not.
"""

import argparse
import concurrent.futures
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
PROBE = REPO / "gpu" / "custom_ops_probe.py"
NEW_TEST = "extension/llm/custom_ops/test_cpu_kernels.py"
LIBRARY = "extension/llm/custom_ops/libcustom_ops_aot_lib.so"
# ExecuTorch's tests of the library's ops, as the wheel ships them (pytest.ini
# leaves out test_preprocess_custom_ops.py, which defines the preprocess
# namespace in Python); then the others that the wheel ships beside them and
# those of the code that puts the ops in a model and exports it. --quick keeps
# the first group.
OWN_TESTS = [
    "extension/llm/custom_ops/test_gated_delta.py",
    "extension/llm/custom_ops/test_quantized_moe.py",
    "extension/llm/custom_ops/test_quantized_sdpa.py",
    "extension/llm/custom_ops/test_sdpa_with_kv_cache.py",
    "extension/llm/custom_ops/test_update_cache.py",
]
USER_TESTS = [
    # Of executorch::update_cross_attn_cache, a Python op beside the library.
    "extension/llm/custom_ops/test_update_cross_attn_cache.py",
    "extension/llm/export/test_export_passes.py",
    "examples/models/llama/source_transformation/test_attention_sink.py",
    "examples/models/llama/source_transformation/test_quantized_kv_cache.py",
    "examples/models/llama/source_transformation/test_quantized_sdpa.py",
    "examples/models/llama/source_transformation/test_sdpa_with_quantized_kv_cache.py",
    "examples/models/llama/tests/test_replace_kv_cache.py",
    "examples/models/llama3_2_vision/preprocess/test_preprocess.py",
]
OUTCOME = re.compile(
    r"^\S+?\.py::(\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", re.M
)


def installed_executorch() -> Path:
    spec = importlib.util.find_spec("executorch")
    return Path(spec.submodule_search_locations[0])


TIMEOUT = 1800  # seconds per process; --timeout
DEADLINE = float("inf")  # time.monotonic() after which nothing starts; --deadline
NOT_RUN = "not run: past the deadline"


def run(cmd: List[str], env: Dict[str, str], cwd: Path):
    start = time.monotonic()
    timeout = min(TIMEOUT, DEADLINE - start)
    if timeout < 1:
        return None, "", NOT_RUN, 0
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = 124, str(e.stdout or ""), f"timeout after {timeout:.0f} s"
    return code, out, err, round(time.monotonic() - start, 1)


def make_site(top: Path, name: str, library: Optional[Path], preload: bool) -> Path:
    """A copy of the installed ExecuTorch under top/name, with ``library`` in
    place of the wheel's, and the commit's test among the wheel's tests."""
    installed = installed_executorch()
    site = top / name
    shutil.copytree(
        installed, site / "executorch", ignore=shutil.ignore_patterns("__pycache__")
    )
    for dist in installed.parent.glob("executorch-*.dist-info"):
        shutil.copytree(dist, site / dist.name)
    if library is not None:
        shutil.copyfile(library, site / "executorch" / LIBRARY)
    shutil.copyfile(REPO / NEW_TEST, site / "executorch" / NEW_TEST)
    if preload:
        # The wheel's pybindings do not load with this torch, and custom_ops.py
        # imports them when the ops are not registered yet: register them first.
        (site / "sitecustomize.py").write_text(
            "import torch\n"
            f"torch.ops.load_library({str(site / 'executorch' / LIBRARY)!r})\n"
        )
    return site


def outcomes(text: str) -> Dict[str, str]:
    """Class::test -> outcome, from pytest's -v lines."""
    return dict(OUTCOME.findall(text))


def counts(result: Dict) -> str:
    if result["exit"] is None:
        return "not run"
    if result["exit"] not in (0, 1):
        return f"exit {result['exit']}"
    tally: Dict[str, int] = {}
    for outcome in result["outcomes"].values():
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{n} {o.lower()}" for o, n in sorted(tally.items())) or "none"


def pytest_module(site: Path, module: str, env: Dict[str, str], logs: Path) -> Dict:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-v",
        "-p",
        "no:cacheprovider",
        "--tb=line",
        "-c",
        os.devnull,
        "--rootdir",
        str(site),
        str(site / "executorch" / module),
    ]
    code, out, err, seconds = run(cmd, env, site)
    log = logs / (module.replace("/", "__") + ".txt")
    log.write_text(f"$ {' '.join(cmd[2:])}\n(exit {code}, {seconds} s)\n{out}{err}")
    return {"exit": code, "seconds": seconds, "outcomes": outcomes(out), "log": log}


def probe(
    site: Path, device: str, cases: List[str], env: Dict[str, str], log: Path
) -> Dict[str, str]:
    """CASE -> 'OK <sha256>', 'ERROR <error>' or 'CRASH <signal>', the calls
    made in one process, restarted after the case that crashes it."""
    results: Dict[str, str] = {}
    transcript = []
    remaining = list(cases)
    while remaining:
        cmd = [sys.executable, "-X", "faulthandler", str(PROBE), "many", device]
        code, out, err, _ = run(cmd + remaining, env, site)
        transcript.append(f"$ probe many {device} ...\n(exit {code})\n{out}{err}")
        if code is None:
            results.update({case: NOT_RUN for case in remaining})
            break
        started = None
        for line in out.splitlines():
            if line.startswith("START "):
                started = line.split(" ", 1)[1]
            elif line.startswith("RESULT "):
                case, verdict = line[len("RESULT ") :].split(" ", 1)
                results[case] = verdict
                started = None
        if started is not None and code == 124:
            results[started] = f"TIMEOUT {err}"
        elif started is not None:
            results[started] = (
                f"CRASH exit {code}" if code >= 0 else f"CRASH signal {-code}"
            )
        elif code != 0 and not results:
            for case in remaining:
                results[case] = f"CRASH exit {code}"
        left = [case for case in remaining if case not in results]
        if len(left) == len(remaining):  # no progress: give up on the rest
            results.update({case: f"CRASH exit {code}" for case in left})
            left = []
        remaining = left
    log.write_text("\n".join(transcript))
    return results


def library_loads(library: Path, env: Dict[str, str]) -> bool:
    code = "import sys, torch; torch.ops.load_library(sys.argv[1])"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(library)], env=env, capture_output=True
    )
    return proc.returncode == 0


def pybindings_load(env: Dict[str, str]) -> bool:
    code = "import executorch.extension.pybindings.portable_lib"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    return proc.returncode == 0


def short(verdict: str) -> str:
    if verdict.startswith("OK "):
        return "ok " + verdict[3:15]
    return verdict[:70]


def main() -> int:
    global TIMEOUT, DEADLINE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default=None, help="also call the ops on it")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--timeout", type=int, default=TIMEOUT, help="per process")
    parser.add_argument(
        "--deadline", type=int, help="seconds after which no process starts"
    )
    args = parser.parse_args()
    start = time.monotonic()
    TIMEOUT = args.timeout
    if args.deadline:
        DEADLINE = start + args.deadline

    import torch  # only for its version: everything else runs in children

    base_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    base_env.pop("PYTHONPATH", None)
    preload = not pybindings_load(dict(os.environ))
    top = Path(tempfile.mkdtemp(prefix="custom-ops-sites-"))
    builds: Dict[str, Optional[Path]] = {}
    wheel_library = installed_executorch() / LIBRARY
    if library_loads(wheel_library, dict(os.environ)):
        builds["wheel"] = None
    for name in ("stock", "changed"):
        builds[name] = args.build / name / "libcustom_ops_aot_lib.so"
    sites = {name: make_site(top, name, lib, preload) for name, lib in builds.items()}
    envs = {
        name: dict(
            base_env,
            PYTHONPATH=os.pathsep.join(
                [str(site), *filter(None, [os.environ.get("PYTHONPATH", "")])]
            ),
        )
        for name, site in sites.items()
    }
    args.out.mkdir(parents=True, exist_ok=True)
    logs = {name: args.out / "logs" / name for name in builds}
    for folder in logs.values():
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)

    modules = [NEW_TEST, *OWN_TESTS, *([] if args.quick else USER_TESTS)]
    listed = subprocess.run(
        [sys.executable, str(PROBE), "list"],
        env=envs["changed"],
        cwd=sites["changed"],
        capture_output=True,
        text=True,
    )
    ops = listed.stdout.split()
    devices = ["cpu", "meta", "fake", *([args.device] if args.device else [])]

    def probes(device: str) -> List[Tuple]:
        cases = list(ops)
        if device == "cpu":
            cases += ["llama", "export-llama"]
        elif device == args.device:
            cases += ["llama"]
        # Where stock crashes at every call, a process per call.
        chunks = [[c] for c in cases] if device == args.device else [cases]
        return [
            (
                ("probe", name, device, i),
                probe,
                (
                    sites[name],
                    device,
                    chunk,
                    envs[name],
                    logs[name] / f"probe-{device}-{i}.txt",
                ),
            )
            for name in builds
            for i, chunk in enumerate(chunks)
        ]

    def tests(group: List[str]) -> List[Tuple]:
        return [
            (
                ("pytest", name, module),
                pytest_module,
                (sites[name], module, envs[name], logs[name]),
            )
            for module in group
            for name in builds
        ]

    # What matters most first, should the deadline come: the device's calls,
    # the commit's test, CPU outputs, the ops' own tests, then the rest.
    work = [
        *(probes(args.device) if args.device else []),
        *tests([NEW_TEST]),
        *probes("cpu"),
        *tests(OWN_TESTS),
        *probes("meta"),
        *probes("fake"),
        *tests(modules[1 + len(OWN_TESTS) :]),
    ]
    jobs: Dict[Tuple, concurrent.futures.Future] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for key, function, arguments in work:
            jobs[key] = pool.submit(function, *arguments)
        results = {key: future.result() for key, future in jobs.items()}
    shutil.rmtree(top)
    for key in [k for k in results if k[0] == "probe"]:
        merged = results.setdefault(key[:3], {})
        merged.update(results.pop(key))

    names = list(builds)
    summary = {
        "torch": torch.__version__,
        "executorch": str(installed_executorch()),
        "builds": {n: (str(p) if p else "wheel") for n, p in builds.items()},
        "library_sha256": {
            n: hashlib.sha256(
                (p or installed_executorch() / LIBRARY).read_bytes()
            ).hexdigest()
            for n, p in builds.items()
        },
        "preloaded": preload,
        "ops": ops,
        "devices": devices,
        "tests": {
            f"{n} {m}": {
                k: v for k, v in results[("pytest", n, m)].items() if k != "log"
            }
            for n in names
            for m in modules
        },
        "calls": {
            f"{case} {device}": {
                n: results[("probe", n, device)].get(case, "-") for n in names
            }
            for device in devices
            for case in sorted(results[("probe", "stock", device)])
        },
        "seconds": round(time.monotonic() - start),
        "jobs": args.jobs,
    }
    table, summary["verdict"] = render(summary, args.device)
    (args.out / "table.txt").write_text(table)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(table)
    return 0 if all(summary["verdict"].values()) else 1


def render(summary: Dict, device: Optional[str]) -> Tuple[str, Dict[str, bool]]:
    """The table of a run, and its verdict: the commit's test fails on the
    stock build and passes on the changed one; every other test module gives
    the changed build the stock build's outcome, test by test; every call on
    CPU gives both the same result; and with ``device``, the changed build
    refuses every op of the library there with PyTorch's error. Where the
    wheel's own library differs from the stock build, the table says so."""
    names = list(summary["builds"])
    tests = summary["tests"]
    modules = list(dict.fromkeys(key.split(" ", 1)[1] for key in tests))
    lines = [
        f"torch {summary['torch']}, ExecuTorch's Python from {summary['executorch']}; "
        "libraries: "
        + ", ".join(
            f"{n} ({'its own' if p == 'wheel' else 'built'})"
            for n, p in summary["builds"].items()
        )
        + (
            "; preloaded (the pybindings do not load here)"
            if summary["preloaded"]
            else ""
        ),
        "",
        f"{'test module':70} " + " | ".join(f"{n:24}" for n in names),
    ]

    def differences(a: Dict, b: Dict) -> str:
        keys = sorted(set(a["outcomes"]) | set(b["outcomes"]))
        return (
            ", ".join(
                f"{k}: {a['outcomes'].get(k)} -> {b['outcomes'].get(k)}"
                for k in keys
                if a["outcomes"].get(k) != b["outcomes"].get(k)
            )
            or f"exit {a['exit']} -> {b['exit']}"
        )

    same_tests = True
    for module in modules:
        row = {n: tests[f"{n} {module}"] for n in names}
        lines.append(
            f"{module:70} " + " | ".join(f"{counts(row[n]):24}" for n in names)
        )
        if module == NEW_TEST:
            continue
        stock, changed = row["stock"], row["changed"]
        if (stock["outcomes"], stock["exit"]) != (changed["outcomes"], changed["exit"]):
            same_tests = False
            lines.append(
                "    changed differs from stock: " + differences(stock, changed)
            )
        wheel = row.get("wheel")
        if wheel and (wheel["outcomes"], wheel["exit"]) != (
            stock["outcomes"],
            stock["exit"],
        ):
            lines.append(
                "    stock differs from the wheel's: " + differences(wheel, stock)
            )
    new = {n: tests[f"{n} {NEW_TEST}"] for n in names}
    new_ok = (
        new["stock"]["exit"] == 1
        and "FAILED" in new["stock"]["outcomes"].values()
        and new["changed"]["exit"] == 0
        and "FAILED" not in new["changed"]["outcomes"].values()
    )

    lines += [
        "",
        f"{'op / case':42} {'device':6} " + " | ".join(f"{n:22}" for n in names),
    ]
    same_cpu = refused = True
    for key, verdicts in summary["calls"].items():
        case, where = key.rsplit(" ", 1)
        lines.append(
            f"{case:42} {where:6} "
            + " | ".join(f"{short(verdicts[n]):22}" for n in names)
        )
        if where == "cpu" and len(set(verdicts.values())) != 1:
            same_cpu = False
        if where == device and case in summary["ops"]:
            refused &= verdicts["changed"].startswith(
                "ERROR NotImplementedError: Could not run "
            )
    complete = all(r["exit"] not in (None, 124) for r in tests.values()) and all(
        v != NOT_RUN and not v.startswith("TIMEOUT")
        for calls in summary["calls"].values()
        for v in calls.values()
    )
    verdict = {
        "everything_ran": complete,
        "new_test_fails_on_stock_passes_changed": new_ok,
        "other_tests_same_stock_and_changed": same_tests,
        "cpu_results_same": same_cpu,
    }
    if device:
        verdict[f"changed_refuses_every_op_on_{device}"] = refused
    lines += ["", *(f"{k}: {v}" for k, v in verdict.items())]
    if "seconds" in summary:
        lines.append(f"({summary['seconds']} s, {summary['jobs']} jobs)")
    return "\n".join(lines) + "\n", verdict


if __name__ == "__main__":
    sys.exit(main())
