# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check --model`` on each model kind of test/models/, several runs each:
the same exit code and the same verdict on every row, every run (issue 33).

    .venv/bin/python bench/check_models.py [--runs 3] [--out docs/evidence/check-model]

Each run is ``python -m executorch_device_guard check --model KIND --json``
from test/models/, every path and device (the default). Writes OUT/matrix.md:
per kind and run, the exit code, the seconds, and each row's verdict; then,
for each kind, its first run's table as check prints it; and whether every
run of a kind agreed. Exits 1 if any kind's runs disagree.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "test" / "models"
KINDS = {
    "transformers decoder (Qwen2)": "decoder.py:make",
    "transformers encoder (T5)": "encoder.py:make",
    "int8 CNN, PT2E + XNNPACKQuantizer": "int8_cnn.py:make",
    "the same, with executorch.kernels.quantized": "int8_cnn.py:make_with_kernels",
    "GRU in fp16": "gru_fp16.py:make",
}


def verdict(row: Dict) -> str:
    if row["problems"]:
        return "FAIL"
    if row["tool_errors"]:
        return "TOOL ERROR"
    if row["not_checked"]:
        return "not checked"
    if row["reached"]:
        return "reached"
    return "same bytes" if row["device"] == "cpu" else "ok"


def one(spec: str) -> Dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "executorch_device_guard", "check"]
    start = time.monotonic()
    proc = subprocess.run(
        cmd + ["--model", spec, "--json"],
        env=env,
        cwd=MODELS,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - start
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"rows": []}
    rows = {f"{r['path']} {r['device']}": verdict(r) for r in report["rows"]}
    return {
        "exit": proc.returncode,
        "seconds": seconds,
        "rows": rows,
        "report": report,
        "stderr": proc.stderr if proc.returncode not in (0, 1, 3) else "",
    }


def cut(text: str, width: int = 70) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def details(report: Dict) -> List[str]:
    """Run 1's rows as check's table has them, and why a row is not checked."""
    lines = ["| row | constants | stock | patched |", "|---|---|---|---|"]
    for r in report["rows"]:
        count = "-" if r["constants"] is None else len(r["constants"])
        lines.append(
            f"| {r['path']} {r['device']} | {count} | "
            f"{cut(r['stock']['summary'])} | {cut(r['patched']['summary'])} |"
        )
    why = [
        f"- {r['path']} {r['device']}: {r['not_checked'] or ''}"
        f"{' '.join(r['tool_errors'] + r['problems'])}"
        for r in report["rows"]
        if r["not_checked"] or r["tool_errors"] or r["problems"]
    ]
    return lines + ([""] + why if why else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "docs/evidence/check-model")
    parser.add_argument("--kinds", nargs="*", help="model specs (default: all)")
    args = parser.parse_args()
    kinds = {k: v for k, v in KINDS.items() if not args.kinds or v in args.kinds}
    results: Dict[str, List[Dict]] = {}
    for number in range(1, args.runs + 1):
        for name, spec in kinds.items():
            found = one(spec)
            results.setdefault(name, []).append(found)
            print(
                f"run {number} {spec}: exit {found['exit']}, "
                f"{found['seconds']:.1f} s",
                flush=True,
            )
    lines = [
        "# `check --model` on each model kind, "
        f"{args.runs} runs each",
        "",
        f"`bench/check_models.py --runs {args.runs}`, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; each run the "
        "whole default matrix. Verdicts: `reached` (the guard acted), `same "
        "bytes` (a cpu row, stock's bytes), `not checked`, `TOOL ERROR`, `FAIL`.",
        "",
        "| model | spec | exit codes | seconds | same every run |",
        "|---|---|---|---|---|",
    ]
    agree = True
    for name, runs in results.items():
        same = all(r["exit"] == runs[0]["exit"] and r["rows"] == runs[0]["rows"] for r in runs)
        agree = agree and same
        lines.append(
            f"| {name} | `{kinds[name]}` | "
            f"{', '.join(str(r['exit']) for r in runs)} | "
            f"{', '.join('%.0f' % r['seconds'] for r in runs)} | "
            f"{'yes' if same else 'NO'} |"
        )
    for name, runs in results.items():
        lines += ["", f"## {name}: each row's verdict, runs 1 to {len(runs)}", ""]
        lines += ["| row | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |"]
        lines += ["|---|" + "---|" * len(runs)]
        for row in runs[0]["rows"]:
            lines.append(
                f"| {row} | " + " | ".join(r["rows"].get(row, "-") for r in runs) + " |"
            )
        lines += ["", "Run 1's rows:", ""] + details(runs[0]["report"])
        if runs[0]["stderr"]:
            lines += ["", "```", runs[0]["stderr"][-3000:].rstrip(), "```"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matrix.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'matrix.md'}; every kind the same every run: {agree}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
