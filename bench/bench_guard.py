# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How much the guard costs to_executorch(): interleaved A/B, one process.

    .venv/bin/python bench/bench_guard.py [--pairs 8]

A is the installed (stock) emitter; B is the same file with patches/ applied,
loaded as a second module. emit_program() is pointed at one or the other for
each run, so both time the same process, model and memory state. Each pair
runs A then B or B then A, alternating, to cancel drift. Only to_executorch()
is timed; the deep copy of the edge program that each run needs is not.
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

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executorch_device_guard import data_root  # noqa: E402
from executorch_device_guard.installed import (  # noqa: E402
    classify,
    executorch_root,
    FileState,
    read_text,
)
from executorch_device_guard.patchset import patched_files  # noqa: E402

EMITTER = "exir/emit/_emitter.py"


def load_patched_emitter():
    text = read_text(executorch_root() / EMITTER)
    state, patched = classify(text, patched_files(data_root())[EMITTER])
    if state is not FileState.STOCK:
        sys.exit(f"the installed {EMITTER} is {state.value}; the benchmark needs stock")
    assert 'storage.device.type != "cpu"' in patched
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "_emitter.py"
        path.write_text(patched)
        name = "executorch.exir.emit._patched_emitter"
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
    """Times the guard's condition, as the patch writes it, on real specs."""
    from executorch.exir.tensor import TensorSpec

    state_dict = edge.exported_program().state_dict
    specs = [TensorSpec.from_tensor(t, const=True) for t in state_dict.values()]
    condition = compile(
        'spec.allocated_memory != 0 and storage.device.type != "cpu"', "guard", "eval"
    )
    start = time.perf_counter()
    rounds = 50
    for _ in range(rounds):
        for spec in specs:
            storage = spec.storage
            eval(condition, {}, {"spec": spec, "storage": storage})
    return (time.perf_counter() - start) / (rounds * len(specs))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()

    from executorch.exir import to_edge
    from executorch.exir.emit import _emit_program
    from executorch.exir.emit import _emitter as stock

    patched = load_patched_emitter()
    emitters = {"A stock": stock, "B patched": patched}

    torch.manual_seed(0)
    model = ManyConstants().eval()
    params = list(model.parameters())
    nbytes = sum(p.numel() * p.element_size() for p in params)
    print(f"model: {len(params)} constant tensors, {nbytes / 1e6:.1f} MB", flush=True)
    start = time.perf_counter()
    edge = to_edge(torch.export.export(model, (torch.ones(1, 224),)))
    print(f"export + to_edge: {time.perf_counter() - start:.1f} s", flush=True)

    def timed(name: str) -> float:
        _emit_program._TopLevelEmitter = emitters[name]._TopLevelEmitter
        work = copy.deepcopy(edge)
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            program = work.to_executorch()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        assert len(program.buffer) > nbytes
        return elapsed

    timed("A stock")  # warm-up, untimed
    times = {name: [] for name in emitters}
    for i in range(args.pairs):
        order = list(emitters) if i % 2 == 0 else list(reversed(emitters))
        for name in order:
            times[name].append(timed(name))
        print(
            f"pair {i + 1}: "
            + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in emitters),
            flush=True,
        )
    _emit_program._TopLevelEmitter = stock._TopLevelEmitter

    guard_cost = guard_seconds_per_constant(edge)
    print(
        f"the guard's own check: {guard_cost * 1e9:.0f} ns per constant, "
        f"{guard_cost * len(params) * 1e3:.3f} ms for {len(params)} constants"
    )
    median = {name: statistics.median(t) for name, t in times.items()}
    best = {name: min(t) for name, t in times.items()}
    print(
        f"best to_executorch(): stock {best['A stock']:.3f} s, patched {best['B patched']:.3f} s"
    )
    print(
        "guard cost bound: 1 + guard time / stock time = "
        f"{1 + guard_cost * len(params) / best['A stock']:.5f}"
    )
    ratios = [b / a for a, b in zip(times["A stock"], times["B patched"])]
    print(
        f"median to_executorch(): stock {median['A stock']:.3f} s, patched {median['B patched']:.3f} s"
    )
    print(
        f"ratio patched/stock: {median['B patched'] / median['A stock']:.4f} (of medians), "
        f"{statistics.median(ratios):.4f} (median of pairs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
