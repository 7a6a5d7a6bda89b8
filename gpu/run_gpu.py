# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Real-GPU evidence for ExecuTorch #21545, stock versus patched emitter.

Run on a machine with a CUDA GPU, from the repository root, with ExecuTorch
importable (see gpu/run.sh, which docs/gpu.md describes):

    python3 gpu/run_gpu.py OUT_DIR

Every export runs in a child process against a stock or a patched overlay of
the installed ExecuTorch. Writes OUT_DIR/gpu-summary.json and prints a summary.
"""

import importlib.metadata
import importlib.util
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Dict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard import check  # noqa: E402
from executorch_device_guard.installed import executorch_root  # noqa: E402
from executorch_device_guard.runner import Emitters, EMITTERS  # noqa: E402

UPSTREAM = REPO / "exir/emit/test/test_emit_device_constants.py"


def issue_reproducer() -> str:
    """The reproducer, verbatim, as the upstream test module holds it."""
    text = UPSTREAM.read_text()
    return re.search(r'_ISSUE_REPRODUCER = """(.*?)"""', text, re.S).group(1)


def crash_site(stderr: str) -> str:
    found = re.findall(r'File "[^"]*/(exir/[^"]+)", line (\d+) in (\w+)', stderr)
    return f"{found[0][0]}:{found[0][1]} in {found[0][2]}" if found else ""


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(out: Path) -> int:
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
    with Emitters(REPO) as emitters:
        summary["overlays"] = {e: str(p) for e, p in emitters.paths.items()}

        # 1. The issue's reproducer, verbatim.
        for emitter in EMITTERS:
            start = time.monotonic()
            proc = emitters.run(
                emitter, ["-X", "faulthandler", "-c", issue_reproducer()]
            )
            summary[f"reproducer_{emitter}"] = {
                "returncode": proc.returncode,
                "shell_exit": (
                    proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
                ),
                "fatal_python_error": "Fatal Python error" in proc.stderr,
                "crash_site": crash_site(proc.stderr),
                "last_stderr_line": last_line(proc.stderr),
                "seconds": round(time.monotonic() - start, 1),
            }
            print(emitter, "reproducer:", summary[f"reproducer_{emitter}"], flush=True)

        # 2. The upstream test module, whose CUDA case is not skipped here.
        for emitter in EMITTERS:
            proc = emitters.run(
                emitter,
                ["-m", "pytest", "-p", "no:cacheprovider", "-rA", str(UPSTREAM)],
            )
            (out / f"upstream-tests-{emitter}.txt").write_text(proc.stdout[-200000:])
            cuda_case = re.findall(
                r"^(PASSED|FAILED|SKIPPED)\S* \S*test_issue_reproducer_on_cuda_raises",
                proc.stdout,
                re.M,
            )
            summary[f"upstream_tests_{emitter}"] = {
                "returncode": proc.returncode,
                "summary": last_line(proc.stdout),
                "cuda_case": cuda_case[0] if cuda_case else "not reported",
            }
            print(
                emitter,
                "upstream tests:",
                summary[f"upstream_tests_{emitter}"],
                flush=True,
            )

        # 3. The check matrix, with the real CUDA row.
        rows = check.run_matrix(emitters, "issue", check.cases(cuda=True), jobs=4)
        table = check.format_table(rows)
        (out / "check-table.txt").write_text(table + "\n")
        summary["check"] = {
            "rows": [row.as_json() for row in rows],
            "problems": [p for row in rows for p in row.problems],
        }
        print(table, flush=True)

        # 4. The supported path: CudaPartitioner, same bytes with and without the guard.
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

    (out / "gpu-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-out")))
