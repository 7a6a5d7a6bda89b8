# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""ExecuTorch's LLM custom ops, a Llama step and the runtime, given CUDA
tensors: stock, under ``run``, and after ``apply``; and the same calls on CPU.

    python3 gpu/run_custom_ops.py OUT_DIR [DEVICE]

DEVICE (default cuda) is what the device column gives the calls; a dry run
on a machine without one can give cpu.

Run on a CUDA machine with an ExecuTorch whose compiled libraries load with
its torch (1.2.0 on torch 2.11: gpu/run.sh installs it). Every call is a
process of its own (gpu/custom_ops_probe.py), so a crash kills only it.
``apply`` patches the installed ExecuTorch for the third column, and
``revert`` restores it; its files are hashed before and after. Writes
OUT_DIR/summary.json and OUT_DIR/table.txt.
"""

import concurrent.futures
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
PROBE = [
    sys.executable,
    "-X",
    "faulthandler",
    str(REPO / "gpu" / "custom_ops_probe.py"),
]
GUARD = [sys.executable, "-m", "executorch_device_guard"]
CASES_AFTER_OPS = ["llama", "runtime-forward", "runtime-execute", "quantized"]


def env() -> Dict[str, str]:
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, str(REPO)]))


def call(prefix: List[str], case: str, device: str) -> Dict:
    start = time.monotonic()
    proc = subprocess.run(
        [*prefix, *PROBE, case, device],
        capture_output=True,
        text=True,
        env=env(),
        cwd="/tmp",
        timeout=300,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    error = next(
        (
            line
            for line in reversed(lines)
            if re.match(r"^\w*(Error|Exception)\b", line)
        ),
        "",
    )
    site = re.findall(
        r'File "[^"]*/(executorch/[^"]+|torch/[^"]+)", line (\d+) in (\w+)', proc.stderr
    )
    return {
        "exit": proc.returncode if proc.returncode >= 0 else 128 - proc.returncode,
        "ok": proc.stdout.strip().splitlines()[-1] if "OK" in proc.stdout else "",
        "error": error[:400],
        "fatal_python_error": "Fatal Python error" in proc.stderr,
        "innermost": (
            ":".join(site[0]) if site and "Fatal Python error" in proc.stderr else ""
        ),
        "seconds": round(time.monotonic() - start, 1),
    }


def site_hashes(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def guard(*args: str) -> str:
    proc = subprocess.run(
        [*GUARD, *args], capture_output=True, text=True, env=env(), cwd="/tmp"
    )
    return f"$ executorch-device-guard {' '.join(args)}  (exit {proc.returncode})\n{proc.stdout}{proc.stderr}"


def main(out: Path, gpu: str) -> int:
    import torch

    sys.path.insert(0, str(REPO))
    from executorch_device_guard.installation.installed import executorch_root

    out.mkdir(parents=True, exist_ok=True)
    root = executorch_root()
    listed = subprocess.run(
        [*PROBE, "list"], capture_output=True, text=True, env=env(), cwd="/tmp"
    )
    ops = listed.stdout.split()
    cases = ops + CASES_AFTER_OPS
    summary: Dict = {
        "gpu": torch.cuda.get_device_name() if gpu == "cuda" else gpu,
        "torch": torch.__version__,
        "executorch": importlib.metadata.version("executorch"),
        "executorch_path": str(root),
        "library_ops": ops,
        "list_stderr_tail": listed.stderr[-2000:] if not ops else "",
    }
    log = [guard("status")]
    before = site_hashes(root)
    jobs = {
        (case, column, device): prefix
        for case in cases
        for device in (gpu, "cpu")
        for column, prefix in (("stock", []), ("run", [*GUARD, "run", "--"]))
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        futures = {
            key: pool.submit(call, prefix, *key[::2]) for key, prefix in jobs.items()
        }
        results = {key: f.result() for key, f in futures.items()}
    summary["run_wrote_nothing"] = site_hashes(root) == before
    log.append(guard("apply"))
    log.append(guard("status"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        futures = {
            (case, "apply", device): pool.submit(call, [], case, device)
            for case in cases
            for device in (gpu, "cpu")
        }
        results.update({key: f.result() for key, f in futures.items()})
    log.append(guard("revert"))
    summary["revert_byte_identical"] = site_hashes(root) == before
    summary["results"] = {"/".join(key): value for key, value in results.items()}
    (out / "guard-log.txt").write_text("\n".join(log))

    rows = []
    for case in cases:
        cuda = [results[(case, c, gpu)] for c in ("stock", "run", "apply")]
        cpu = [results[(case, c, "cpu")]["ok"] for c in ("stock", "run", "apply")]
        rows.append(
            f"{case:40} "
            + " | ".join(f"exit {r['exit']:3}" for r in cuda)
            + f" | CPU same: {len(set(cpu)) == 1 and bool(cpu[0])}"
        )
        for column, r in zip(("stock", "run", "apply"), cuda):
            if r["error"] or r["innermost"]:
                rows.append(f"    {column}: {r['innermost'] or r['error']}")
    header = f"{'case':40} {gpu}: stock | run | apply | CPU outputs"
    table = "\n".join([header, *rows])
    (out / "table.txt").write_text(table + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}, indent=1))
    print(table)
    print("\n".join(log))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cuda"))
