# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How much the guard costs to_executorch(): interleaved A/B, one process.

    .venv/bin/python bench/bench_guard.py [--rounds 9]

A is the installed (stock) emitter; A' is the same file loaded again as a
second module; B is that file with patches/ applied, loaded the same way.
emit_program() is pointed at one of them for each run, so all time the same
process, model and memory state. B / A' is the cost of the guard itself; A' / A
shows what loading a second copy alone does. Each round runs all three,
rotating their order. Only to_executorch() is timed (wall and CPU time, torch
on one thread); the deep copy of the edge program that each run needs is not.
The guard's own check is also timed directly, which bounds its cost however
noisy the machine is.
"""

import argparse
import copy
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executorch_device_guard import data_root  # noqa: E402
from executorch_device_guard.installation.installed import (  # noqa: E402
    executorch_root,
)
from executorch_device_guard.patchset import (  # noqa: E402
    classify,
    FileState,
    patched_files,
)

EMITTER = "exir/emit/_emitter.py"


def load_emitter_copy(patched: bool):
    """The installed _emitter.py, stock or patched, loaded as a second module."""
    with open(executorch_root() / EMITTER, encoding="utf-8", newline="") as f:
        text = f.read()
    state, patched_text = classify(text, patched_files(data_root())[EMITTER])
    if state is not FileState.STOCK:
        sys.exit(f"the installed {EMITTER} is {state.value}; the benchmark needs stock")
    source = patched_text if patched else text
    assert ("but ExecuTorch can only " in source) == patched
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "_emitter.py"
        path.write_text(source)
        name = f"executorch.exir.emit._emitter_{'patched' if patched else 'copy'}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


class ManyConstants(torch.nn.Module):
    """500 Linear(224, 224) layers: 1,000 constant tensors, 100.4 MB of fp32."""

    def __init__(self, layers: int = 500, width: int = 224) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            torch.nn.Linear(width, width) for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def guard_seconds_per_constant(edge) -> float:
    """Times the guard on real specs: the check that 0001 puts in the
    patched emitter's ``_tensor_spec_to_evalue``, as it runs for a CPU
    constant (it reads the storage once and falls through)."""
    import typing

    from executorch.exir.tensor import TensorSpec

    state_dict = edge.exported_program().state_dict
    specs = [TensorSpec.from_tensor(t, const=True) for t in state_dict.values()]
    start = time.perf_counter()
    rounds = 50
    for _ in range(rounds):
        for spec in specs:
            storage = typing.cast(torch.UntypedStorage, spec.storage)
            if spec.allocated_memory != 0 and storage.device.type != "cpu":
                raise AssertionError("a CPU constant took the guard's branch")
    return (time.perf_counter() - start) / (rounds * len(specs))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    from executorch.exir import to_edge
    from executorch.exir.emit import _emit_program
    from executorch.exir.emit import _emitter as stock

    # A' is stock loaded exactly as B is, so B / A' isolates the guard itself.
    emitters = {
        "A  stock": stock,
        "A' stock copy": load_emitter_copy(patched=False),
        "B  patched": load_emitter_copy(patched=True),
    }
    torch.set_num_threads(1)

    torch.manual_seed(0)
    model = ManyConstants().eval()
    params = list(model.parameters())
    nbytes = sum(p.numel() * p.element_size() for p in params)
    print(f"model: {len(params)} constant tensors, {nbytes / 1e6:.1f} MB", flush=True)
    start = time.perf_counter()
    edge = to_edge(torch.export.export(model, (torch.ones(1, 224),)))
    print(f"export + to_edge: {time.perf_counter() - start:.1f} s", flush=True)

    def timed(name: str) -> Tuple[float, float]:
        _emit_program._TopLevelEmitter = emitters[name]._TopLevelEmitter
        work = copy.deepcopy(edge)
        gc.collect()
        gc.disable()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            program = work.to_executorch()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            gc.enable()
        assert len(program.buffer) > nbytes
        return wall, cpu

    names = list(emitters)
    timed(names[0])  # warm-up, untimed
    times: Dict[str, List[Tuple[float, float]]] = {name: [] for name in names}
    for i in range(args.rounds):
        order = names[i % 3 :] + names[: i % 3]  # each variant in each slot in turn
        for name in order:
            times[name].append(timed(name))
        print(
            f"round {i + 1:2}: "
            + ", ".join(f"{n} {times[n][-1][0]:.3f} s" for n in names),
            flush=True,
        )
    _emit_program._TopLevelEmitter = stock._TopLevelEmitter

    guard_cost = guard_seconds_per_constant(edge)
    print(
        f"the guard's own check: {guard_cost * 1e9:.0f} ns per constant, "
        f"{guard_cost * len(params) * 1e3:.3f} ms for {len(params)} constants"
    )
    for clock, k in (("wall", 0), ("CPU", 1)):
        best = {n: min(t[k] for t in times[n]) for n in names}
        median = {n: statistics.median(t[k] for t in times[n]) for n in names}
        print(
            f"{clock:4} best:   "
            + ", ".join(f"{n} {best[n]:.3f} s" for n in names)
            + f"; B / A' = {best[names[2]] / best[names[1]]:.4f}"
            + f", B / A = {best[names[2]] / best[names[0]]:.4f}"
            + f", A' / A = {best[names[1]] / best[names[0]]:.4f}"
        )
        print(
            f"{clock:4} median: "
            + ", ".join(f"{n} {median[n]:.3f} s" for n in names)
            + f"; B / A' = {median[names[2]] / median[names[1]]:.4f}"
            + f", B / A = {median[names[2]] / median[names[0]]:.4f}"
            + f", A' / A = {median[names[1]] / median[names[0]]:.4f}"
        )
    stock_best = min(t[0] for t in times[names[0]])
    print(
        "bound from the guard's own cost: 1 + guard time / stock time = "
        f"{1 + guard_cost * len(params) / stock_best:.5f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
