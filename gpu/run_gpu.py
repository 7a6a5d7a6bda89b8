# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Real-GPU evidence for ExecuTorch #21545, stock versus patched emitter.

Run on a machine with a CUDA GPU, from the repository root, with ExecuTorch
importable (see gpu/run.sh, which docs/gpu.md describes):

    python3 gpu/run_gpu.py OUT_DIR [--only STEP ...]

The whole run took about 11 minutes on an H200; --only runs some steps.

Every export runs in a child process on the installed ExecuTorch, stock (the
import hook off) or patched (the hook on, serving the series). Writes OUT_DIR/gpu-summary.json and prints a summary.
"""

import argparse
import concurrent.futures
import importlib.metadata
import importlib.util
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard.check import matrix  # noqa: E402
from executorch_device_guard.installation.installed import executorch_root  # noqa: E402
from executorch_device_guard.check.runner import Emitters, EMITTERS  # noqa: E402
from executorch_device_guard.check.series_files import (  # noqa: E402
    pytest_outcomes,
    series_test_modules,
    upstream_tests,
    write_tree,
)

# The series' test modules that run on CPU, and its CUDA tests in upstream's
# GPU folder, among them the one that kills stock: the issue's reproducer.
UPSTREAM_MODULES = series_test_modules(REPO, executorch_root())
CUDA_MODULES = series_test_modules(REPO, executorch_root(), gpu=True)
CUDA_TEST = (
    "backends/cuda/tests/test_cuda_export.py::TestCudaExport::"
    "test_export_without_partitioner_raises"
)
BUNDLED_TEST = "backends/cuda/tests/test_cuda_bundled_program.py"

# The reproducer of https://github.com/pytorch/executorch/issues/21545, verbatim.
REPRODUCER = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
example = torch.ones(2, 4).cuda()
program = to_edge_transform_and_lower(export(model, (example,))).to_executorch()
"""


def issue_reproducer() -> str:
    return REPRODUCER


def through_partitioner(module: str, partitioner: str) -> str:
    """The reproducer's model, lowered with a CPU backend's partitioner."""
    return (
        issue_reproducer()
        .replace(
            "export(model, (example,)))",
            f"export(model, (example,)), partitioner=[{partitioner}()])",
        )
        .replace(
            "from executorch.exir import",
            f"from {module} import {partitioner}\nfrom executorch.exir import",
        )
    )


PARTITIONERS = {
    "xnnpack": (
        "executorch.backends.xnnpack.partition.xnnpack_partitioner",
        "XnnpackPartitioner",
    ),
    "vulkan": (
        "executorch.backends.vulkan.partitioner.vulkan_partitioner",
        "VulkanPartitioner",
    ),
}


def crash_site(stderr: str) -> str:
    found = re.findall(r'File "[^"]*/executorch/([^"]+)", line (\d+) in (\w+)', stderr)
    return f"{found[0][0]}:{found[0][1]} in {found[0][2]}" if found else ""


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def named_data_store_evidence() -> Dict:
    """How _tensor_to_bytes treats real CUDA tensors (stock code, unchanged)."""
    import torch
    from executorch.exir._serialize._named_data_store import _tensor_to_bytes

    result = {}
    weight = torch.arange(64 * 3 * 3 * 3, dtype=torch.float32).reshape(64, 3, 3, 3)
    for layout in ("contiguous", "channels_last"):
        tensor = weight.cuda()
        if layout == "channels_last":
            tensor = tensor.to(memory_format=torch.channels_last)
        start = time.monotonic()
        try:
            data = _tensor_to_bytes(tensor)
            expected = bytes(tensor.cpu().untyped_storage())
            outcome = f"{len(data)} bytes, equal to the host copy: {data == expected}"
        except Exception as e:  # noqa: B902 - recorded as evidence
            outcome = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        result[layout] = {
            "outcome": outcome,
            "seconds": round(time.monotonic() - start, 3),
        }
    return result


STEPS = [
    "reproducer",
    "upstream",
    "cuda-export",
    "check",
    "cuda-partitioner",
    "named-data-store",
    "partitioners",
    "check-cuda-model",
]
DEFAULT_STEPS = ["reproducer", "upstream", "cuda-export", "check", "cuda-partitioner"]


def main(out: Path, steps: List[str]) -> int:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    summary: Dict = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "executorch": importlib.metadata.version("executorch"),
        "executorch_path": str(executorch_root()),
        "python": platform.python_version(),
        "modules": {
            m: importlib.util.find_spec(m) is not None
            for m in ("torchao", "pandas", "triton", "flatbuffers", "tabulate")
        },
    }
    print(json.dumps(summary, indent=1), flush=True)
    with Emitters(REPO, upstream=True) as emitters:

        # 1. The issue's reproducer, verbatim; then its model through the CPU
        # backends' partitioners, which read the weights themselves.
        scripts = {"reproducer": issue_reproducer()} if "reproducer" in steps else {}
        if "partitioners" in steps:
            for backend, (module, partitioner) in PARTITIONERS.items():
                scripts[backend] = through_partitioner(module, partitioner)
        for (name, script), emitter in (
            (item, emitter) for item in scripts.items() for emitter in EMITTERS
        ):
            start = time.monotonic()
            proc = emitters.run(emitter, ["-X", "faulthandler", "-c", script])
            key = "reproducer" if name == "reproducer" else f"partitioner_{name}"
            summary[f"{key}_{emitter}"] = {
                "returncode": proc.returncode,
                "shell_exit": (
                    proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
                ),
                "fatal_python_error": "Fatal Python error" in proc.stderr,
                "crash_site": crash_site(proc.stderr),
                "last_stderr_line": last_line(proc.stderr),
                "error_line": next(
                    (
                        line[:400]
                        for line in proc.stderr.splitlines()
                        if re.match(
                            r"^\S*(InternalError|RuntimeError|ValueError):", line
                        )
                    ),
                    "",
                ),
                "seconds": round(time.monotonic() - start, 1),
            }
            print(emitter, name, summary[f"{key}_{emitter}"], flush=True)

        # 2. The upstream test modules with plain pytest, the CUDA test running.
        save(out, summary)
        summary["upstream_tests"] = {}
        for emitter in EMITTERS if "upstream" in steps else []:
            args = ["-m", "pytest", "-v", "-p", "no:cacheprovider", *UPSTREAM_MODULES]
            proc = emitters.run(emitter, args, cwd=REPO)
            (out / f"upstream-{emitter}.txt").write_text(proc.stdout[-200000:])
            summary["upstream_tests"][emitter] = {
                "returncode": proc.returncode,
                "summary": last_line(proc.stdout),
                "fatal_python_error": "Fatal Python error" in proc.stdout + proc.stderr,
                "outcomes": sorted(pytest_outcomes(proc.stdout).items()),
            }
            print("upstream", emitter, summary["upstream_tests"][emitter], flush=True)

        # 2b. Upstream's CUDA test module with the series' test in it: stock
        # without that test (it kills the run there), stock with it alone, and
        # patched whole. The two long runs go side by side.
        save(out, summary)
        if "cuda-export" in steps:
            summary["cuda_export"] = cuda_export(emitters, out)

        # 3. The check matrix, with the real CUDA row.
        save(out, summary)
        if "check" in steps:
            pairs = matrix.cases(devices=["cuda"], cuda=True)
            rows = matrix.run_matrix(emitters, "issue", pairs, jobs=4)
            table = matrix.format_table(rows)
            (out / "check-table.txt").write_text(table + "\n")
            summary["check"] = {
                "rows": [row.as_json() for row in rows],
                "problems": [p for row in rows for p in row.problems],
            }
            print(table, flush=True)

        # 4. The supported path: CudaPartitioner, same bytes with and without the guard.
        save(out, summary)
        if "cuda-partitioner" in steps:
            partitioned = {}
            for emitter in EMITTERS:
                start = time.monotonic()
                outcome = emitters.export(emitter, "cuda", flow="cuda-partitioner")
                partitioned[emitter] = {
                    "summary": outcome.describe(),
                    "files": (outcome.result or {}).get("files"),
                    "seconds": round(time.monotonic() - start, 1),
                    "stderr_tail": (
                        outcome.stderr[-3000:]
                        if outcome.crashed or outcome.returncode
                        else ""
                    ),
                }
            partitioned["identical"] = (
                partitioned["stock"]["files"] is not None
                and partitioned["stock"]["files"] == partitioned["patched"]["files"]
            )
            summary["cuda_partitioner"] = partitioned
            print("CudaPartitioner:", json.dumps(partitioned, indent=1), flush=True)

    # 5. check --model with a model built on CUDA: every row but cuda moves it
    # to CPU first.
    save(out, summary)
    if "check-cuda-model" in steps:
        command = [sys.executable, "-m", "executorch_device_guard", "check"]
        command += ["--model", "gpu/cuda_model.py:make", "--jobs", "8"]
        start = time.monotonic()
        proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        (out / "check-cuda-model.txt").write_text(proc.stderr + proc.stdout)
        summary["check_cuda_model"] = {
            "command": " ".join(command[1:]),
            "returncode": proc.returncode,
            "verdict": last_line(proc.stdout),
            "seconds": round(time.monotonic() - start, 1),
        }
        print(proc.stderr + proc.stdout, flush=True)

    # 6. The named data store reads tensors through torch, not a raw pointer.
    save(out, summary)
    if "named-data-store" in steps:
        summary["named_data_store"] = named_data_store_evidence()
        print("named data store:", summary["named_data_store"], flush=True)
    save(out, summary)
    return 0


def pytest_summary(proc: subprocess.CompletedProcess, seconds: float) -> Dict:
    return {
        "returncode": proc.returncode,
        "summary": last_line(proc.stdout),
        "fatal_python_error": "Fatal Python error" in proc.stdout + proc.stderr,
        "crash_site": crash_site(proc.stderr),
        "seconds": round(seconds, 1),
        "outcomes": sorted(pytest_outcomes(proc.stdout).items()),
    }


PYTEST_WITH_CACHES = (
    "import os, sys, pytest; "
    "os.environ['TORCHINDUCTOR_CACHE_DIR'] = sys.argv[1] + '/inductor'; "
    "os.environ['TRITON_CACHE_DIR'] = sys.argv[1] + '/triton'; "
    "sys.exit(pytest.main(sys.argv[2:]))"
)


def cuda_export(emitters: Emitters, out: Path) -> Dict:
    tree = write_tree(upstream_tests(REPO, executorch_root()), Path(tempfile.mkdtemp()))
    # Stock without the tests that kill it, each of those alone, and patched
    # whole.
    runs = {
        "stock-others": (
            "stock",
            [*CUDA_MODULES, "--deselect", CUDA_TEST, "--deselect", BUNDLED_TEST],
        ),
        "patched-all": ("patched", CUDA_MODULES),
        "stock-new-test": ("stock", [CUDA_TEST]),
        "stock-bundled": ("stock", [BUNDLED_TEST]),
    }

    def one(name: str) -> Dict:
        emitter, tests = runs[name]
        # Runs side by side must not share Inductor's and Triton's caches.
        cache = tree / f"cache-{name}"
        args = ["-X", "faulthandler", "-c", PYTEST_WITH_CACHES, str(cache)]
        args += ["-v", "-p", "no:cacheprovider", *tests]
        start = time.monotonic()
        proc = emitters.run(emitter, args, cwd=tree, timeout=1800)
        (out / f"cuda-export-{name}.txt").write_text(
            f"$ python {' '.join(args)}\n"
            + proc.stdout[-100000:]
            + proc.stderr[-20000:]
        )
        result = pytest_summary(proc, time.monotonic() - start)
        print("cuda-export", name, {k: v for k, v in result.items() if k != "outcomes"})
        return result

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(runs)) as pool:
        futures = {name: pool.submit(one, name) for name in runs}
        return {name: future.result() for name, future in futures.items()}


def save(out: Path, summary: Dict) -> None:
    """Written after every step, so a run cut short keeps what it measured."""
    (out / "gpu-summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, nargs="?", default=Path("gpu-out"))
    parser.add_argument("--only", nargs="+", choices=STEPS, default=DEFAULT_STEPS)
    args = parser.parse_args()
    sys.exit(main(args.out, args.only))
