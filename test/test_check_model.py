# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check --model`` on real model kinds (issue 33): one right verdict per
model, every run, at the cost of the model.

- A path that does not take the model on CPU either, stock and patched
  alike, is NOT CHECKED on every row where it fails the same way, said
  once, with what the user can do: never TOOL ERROR (a device row is
  compared with its path's cpu row).
- Stock and patched are compared by what is stable: one string-hash seed
  for both, and messages with sets, addresses and ids normalised.
- Each side loads the model once (its warm parent), not once per export.

The check runs use the tool that this process imported (its folder first on
PYTHONPATH), so the same file runs against an earlier form of the tool
(docs/evidence/check-model/failing-first.txt).
"""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import executorch_device_guard
from executorch_device_guard.check import matrix
from executorch_device_guard.check.matrix import Row
from executorch_device_guard.check.runner import Outcome

MODELS = Path(__file__).resolve().parent / "models"
# The tool under test: the one this process imported.
TOOL = Path(executorch_device_guard.__file__).resolve().parent.parent


def run_check(*args: str, cwd: Path = MODELS) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(TOOL))
    env.pop("PYTHONHASHSEED", None)  # each process its own, unless check says
    cmd = [sys.executable, "-m", "executorch_device_guard", "check", *args]
    return subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900
    )


def error(message: str, step: str, stage: str, kind: str = "RuntimeError") -> Dict:
    return {
        "outcome": "error",
        "type": kind,
        "message": message,
        "stage": stage,
        "step": step,
    }


def alike(result: Dict) -> Dict[str, Outcome]:
    return {"stock": Outcome(1, result, ""), "patched": Outcome(1, dict(result), "")}


MISSING = "Missing out variants: {'q::quantize_per_tensor', 'q::dequantize_per_tensor'}"
SWAPPED = "Missing out variants: {'q::dequantize_per_tensor', 'q::quantize_per_tensor'}"


def test_a_device_row_that_fails_as_its_paths_cpu_row_is_not_checked() -> None:
    """Root cause 1: the emitter fails in to_executorch on CPU (an int8
    model whose quantized kernels are not registered); on a fake device it
    fails there alike, after the tool moved the constants. That is the
    path's own failure, not the tool's, said once for the path."""
    cpu = error(MISSING, "to_executorch", "export")
    fake = error(MISSING, "to_executorch", "device")
    rows = [
        Row("emitter", "cpu", alike(cpu)),
        Row("emitter", "meta", alike(fake)),
        Row("emitter", "fake:cuda:0", alike(fake)),
        Row("emitter", "fake:mps:0", alike(fake)),
    ]
    verdict = matrix.judge(rows)
    assert verdict.tool_errors == [] and verdict.problems == []
    assert verdict.exit_code == 3
    assert len(verdict.unchecked) == 1, verdict.unchecked
    line = verdict.unchecked[0]
    assert line.startswith("emitter cpu, meta, fake:cuda:0, fake:mps:0: ")
    assert "in to_executorch" in line and "RuntimeError" in line


def test_a_fake_row_that_fails_where_its_cpu_row_does_not_stays_a_tool_error() -> None:
    """A fake device that fails alike in a step where the cpu row exported
    did not reach the read: check's own limit, told as such."""
    cpu_ok = Outcome(0, {"outcome": "ok", "files": {"program.pte": "ab"}}, "")
    fake = error("boom", "to_executorch", "device")
    rows = [
        Row("vulkan", "cpu", {"stock": cpu_ok, "patched": cpu_ok}),
        Row("vulkan", "fake:cuda:0", alike(fake)),
    ]
    verdict = matrix.judge(rows)
    assert len(verdict.tool_errors) == 1 and verdict.exit_code == 3
    # Another step or another type than on cpu: not the cpu row's failure.
    rows[0] = Row("vulkan", "cpu", alike(error("boom", "torch.export", "export")))
    assert matrix.judge(rows).tool_errors != []


def test_messages_that_differ_only_in_set_order_or_addresses_are_alike() -> None:
    """Root cause 2: the same error, printed by two processes, with a set
    in another order or another object's address, is the same error."""
    rows = [
        Row(
            "emitter",
            "cpu",
            {
                "stock": Outcome(1, error(MISSING, "to_executorch", "export"), ""),
                "patched": Outcome(1, error(SWAPPED, "to_executorch", "export"), ""),
            },
        ),
        Row(
            "vulkan",
            "cpu",
            {
                "stock": Outcome(
                    1, error("mode <F object at 0x7f7d38da6e10>", "lower", "export"), ""
                ),
                "patched": Outcome(
                    1, error("mode <F object at 0x7f0a11d2e990>", "lower", "export"), ""
                ),
            },
        ),
    ]
    verdict = matrix.judge(rows)
    assert verdict.problems == [], verdict.problems
    assert verdict.exit_code == 3
    # Another step or another type is another failure.
    other = error(SWAPPED, "to_edge_transform_and_lower", "export")
    rows[0].outcomes["patched"] = Outcome(1, other, "")
    assert matrix.judge(rows).problems != []


HASH_MODEL = """
import torch


class Hashes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x):
        # The same message in every process that shares a string-hash seed.
        raise RuntimeError(f"unsupported {hash('layout')}")


def make():
    return Hashes(), (torch.ones(1, 2),)
"""


def test_stock_and_patched_share_one_hash_seed(tmp_path: Path) -> None:
    """Root cause 2, end to end: a model whose error prints a string's
    hash fails alike only when both sides hash alike."""
    model = tmp_path / "hashes.py"
    model.write_text(HASH_MODEL)
    result = run_check("--model", f"{model}:make", "--paths", "emitter")
    out = result.stdout + result.stderr[-3000:]
    assert result.returncode == 3, out
    assert "FAIL" not in result.stdout, out
    assert "NO VERDICT: the model does not export" in result.stdout, out


def test_an_int8_model_without_its_kernels_is_not_checked_on_the_emitter() -> None:
    """An int8 PT2E CNN whose file does not import executorch.kernels.quantized:
    the emitter fails alike on every device, as on cpu. No TOOL ERROR, no
    FAIL, and the line says what to add."""
    result = run_check(
        "--model",
        "int8_cnn.py:make",
        "--paths",
        "emitter",
        "--devices",
        "cpu",
        "fake:cuda:0",
        "fake:mps:0",
    )
    out = result.stdout + result.stderr[-3000:]
    assert result.returncode == 3, out
    assert "TOOL ERROR" not in result.stdout and "FAIL" not in result.stdout, out
    assert "emitter cpu, fake:cuda:0, fake:mps:0: " in result.stdout, out
    assert "import executorch.kernels.quantized" in result.stdout, out
    assert "Traceback" not in result.stderr


def test_an_int8_model_with_its_kernels_names_its_constants_as_the_model_does() -> (
    None
):
    result = run_check(
        "--model",
        "int8_cnn.py:make_with_kernels",
        "--paths",
        "emitter",
        "xnnpack",
        "--devices",
        "cpu",
        "fake:cuda:0",
        "--verbose",
    )
    out = result.stdout + result.stderr[-3000:]
    assert result.returncode == 0, out
    assert "OK:" in result.stdout, out
    # The quantized weights that PT2E froze, by the model's names.
    assert "stem.0.weight: int8 [8, 3, 3, 3] on cuda:0 (exported as _frozen_param0)" in (
        result.stderr
    ), result.stderr[-6000:]


def test_a_transformers_encoder_that_vulkan_cannot_lower_is_not_checked() -> None:
    """T5's encoder: Vulkan's lowering fails in FuseBatchNormPass on cpu,
    stock and patched alike; the fake row fails there too. Said once, with
    the cause that the pass manager's wrapper hides."""
    result = run_check("--model", "encoder.py:make", "--paths", "vulkan")
    out = result.stdout + result.stderr[-3000:]
    assert result.returncode == 3, out
    assert "TOOL ERROR" not in result.stdout and "FAIL" not in result.stdout, out
    lines = [line for line in result.stdout.splitlines() if "vulkan cpu, " in line]
    assert len(lines) == 1, out
    assert "FuseBatchNormPass" in lines[0] and "caused by AssertionError" in lines[0]
    assert not re.search(r"0x[0-9a-f]{4}", lines[0]), lines[0]


COUNTING_MODEL = """
import os
import torch

with open(os.environ["BUILDS"], "a") as f:
    f.write("import\\n")


def make():
    with open(os.environ["BUILDS"], "a") as f:
        f.write("build\\n")
    return torch.nn.Sequential(torch.nn.Linear(4, 3)).eval(), (torch.ones(2, 4),)
"""


def test_each_side_loads_the_model_once(tmp_path: Path) -> None:
    """Root cause 3: the model is imported and built by the probe and by
    each warm parent, not by each of the 10 exports."""
    model = tmp_path / "counting.py"
    model.write_text(COUNTING_MODEL)
    builds = tmp_path / "builds.txt"
    os.environ["BUILDS"] = str(builds)
    try:
        result = run_check("--model", f"{model}:make", "--paths", "emitter")
    finally:
        del os.environ["BUILDS"]
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines: List[str] = builds.read_text().splitlines()
    assert lines.count("build") == 3, lines  # the probe, stock's, patched's
    assert lines.count("import") == 3, lines


def test_what_the_warm_parent_prepares_gives_a_fresh_exports_bytes() -> None:
    """The emitter's and the bundled program's first steps, made once in
    each warm parent, give the bytes that an export doing them itself
    gives (--fresh: nothing is prepared)."""
    import json

    args = ["--model", "int8_cnn.py:make_with_kernels", "--paths", "emitter"]
    args += ["bundled", "--devices", "cpu", "--json"]
    files = []
    for extra in ([], ["--fresh"]):
        result = run_check(*args, *extra)
        assert result.returncode == 3, result.stdout + result.stderr[-3000:]
        rows = json.loads(result.stdout)["rows"]
        files.append({r["path"]: r["patched"]["result"]["files"] for r in rows})
    assert files[0] == files[1]
