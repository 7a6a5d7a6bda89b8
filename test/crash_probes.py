# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Reach one guarded host read with data that faults on any read.

    python -X faulthandler test/crash_probes.py SITE

The upstream tests stand in device memory with readable host memory, so that
an unguarded read fails as a test. Here the data pointer points at no-access
memory (see executorch_device_guard.check.fake_device), as a GPU's does from the
host: an unguarded read kills the process with SIGSEGV exactly as on a real
GPU, and a guarded one raises an error naming the device (exit code 1).
"""

import ctypes
import math
import sys
from typing import Callable, Dict

import torch
from executorch_device_guard.check.fake_device import (
    keep_device_claims,
    NoAccessMemory,
    on_device,
)
from torch.export import export
from torch.utils._mode_utils import no_dispatch

DEVICE = "cuda:0"


def on_storage(tensor: torch.Tensor) -> torch.Tensor:
    """A plain tensor whose storage reports DEVICE and whose data faults. The
    tensor itself reports cpu: each guard must check the storage it reads."""
    return on_device(tensor, DEVICE)


def linear_relu() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.arange(4, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(x)
        return self.count + 0


def _emit(model: torch.nn.Module, x: torch.Tensor, fqn: str, config=None) -> None:
    from executorch.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(export(model, (x,)))
    state_dict = edge.exported_program().state_dict
    state_dict[fqn] = on_storage(state_dict[fqn])
    edge.to_executorch(config)


def emitter_constant() -> None:
    _emit(linear_relu(), torch.ones(2, 4), "0.weight")


def emitter_external_constant() -> None:
    from executorch.exir import ExecutorchBackendConfig

    config = ExecutorchBackendConfig(external_constants=True)
    _emit(linear_relu(), torch.ones(2, 4), "0.weight", config)


def emitter_initialized_mutable_buffer() -> None:
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["count"])])
    _emit(Counter().eval(), torch.ones(4), "count", config)


def emitter_constant_method() -> None:
    from executorch.exir import to_edge

    methods = {"get_scale": on_storage(torch.ones(3))}
    program = export(linear_relu(), (torch.ones(2, 4),))
    to_edge(program, constant_methods=methods).to_executorch()


def bundled_expected_output() -> None:
    from executorch.devtools.bundled_program.config import (
        MethodTestCase,
        MethodTestSuite,
    )
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )
    from executorch.exir import to_edge

    model, x = linear_relu(), torch.ones(2, 4)
    program = to_edge(export(model, (x,))).to_executorch()
    with torch.no_grad():
        y = model(x)

    def bundle(output: torch.Tensor) -> bytes:
        case = MethodTestCase(inputs=[x], expected_outputs=[output])
        bundled = BundledProgram(program, [MethodTestSuite("forward", [case])])
        return serialize_from_bundled_program_to_flatbuffer(bundled)

    # Test data on a device is read from a host copy: the probe passes when
    # its bundle is that of the CPU tensor.
    data = bundle(on_storage(y))
    assert data == bundle(y)
    print(f"bundled {len(data)} bytes, those of a CPU copy")


def _lower(partitioner: object) -> None:
    from executorch.exir import to_edge_transform_and_lower

    # Before lowering, which reads the weights; lowering copies the program,
    # and keep_device_claims() keeps the copies on the device.
    program = export(linear_relu(), (torch.ones(2, 4),))
    program.state_dict["0.weight"] = on_storage(program.state_dict["0.weight"])
    with keep_device_claims():
        to_edge_transform_and_lower(program, partitioner=[partitioner])


def xnnpack_weight() -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )

    _lower(XnnpackPartitioner())


def vulkan_weight() -> None:
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
        VulkanPartitioner,
    )

    _lower(VulkanPartitioner())


def mps_weight() -> None:
    # Without fp16 conversion, which would read the data first, in half().
    from executorch.backends.apple.mps.partition import MPSPartitioner
    from executorch.exir.backend.backend_details import CompileSpec

    _lower(MPSPartitioner([CompileSpec("use_fp16", bytes([False]))]))


class _DispatchesOnDevice(torch.Tensor):
    """A tensor that dispatches as DEVICE: an operator without a kernel for
    DEVICE runs its CompositeExplicitAutograd kernel on the tensor's memory."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.prim.device.default:
            return torch.device(DEVICE)
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def on_device_memory(*size: int) -> torch.Tensor:
    """A float tensor that dispatches as DEVICE, its data in no-access memory."""
    nbytes = math.prod(size) * 4
    memory = NoAccessMemory(nbytes + 4096)
    host = torch.frombuffer(
        (ctypes.c_char * nbytes).from_address(memory.address), dtype=torch.float32
    ).view(size)
    tensor = torch.Tensor._make_subclass(
        _DispatchesOnDevice,
        host,
        False,
        dispatch_device=True,
        device_for_backend_keys=torch.device(DEVICE),
    )
    tensor.memory = memory
    return tensor


def custom_op_update_cache() -> None:
    # The other custom ops allocate with their inputs' device on the way (no
    # CUDA kernels here): gpu/ shows their reads on a GPU.
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    value, cache = on_device_memory(1, 1, 8, 4), on_device_memory(1, 10, 8, 4)
    torch.ops.llama.update_cache(value, cache, 0)


PROBES: Dict[str, Callable[[], None]] = {
    f.__name__: f
    for f in (
        emitter_constant,
        emitter_external_constant,
        emitter_initialized_mutable_buffer,
        emitter_constant_method,
        bundled_expected_output,
        xnnpack_weight,
        vulkan_weight,
        mps_weight,
        custom_op_update_cache,
    )
}

if __name__ == "__main__":
    PROBES[sys.argv[1]]()
