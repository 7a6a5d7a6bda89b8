# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import re
import unittest

import torch
from executorch.exir import (
    EdgeCompileConfig,
    EdgeProgramManager,
    ExecutorchBackendConfig,
    schema,
    to_edge,
)
from executorch.exir.backend.test.device_util import DeviceAwarePartitioner
from executorch.exir.error import InternalError
from parameterized import parameterized
from torch.export import export

CUDA_ADVICE = (
    "Move the model to CPU before export, or lower the ops that use it with "
    "CudaPartitioner."
)
META_ADVICE = "A meta tensor has no data: load or initialize it on CPU."

# cuda and xpu need no accelerator (see _DeviceStorage); meta is a real
# device without data. Each gets the advice that fits it.
DEVICES = [
    ("cuda:0", CUDA_ADVICE),
    ("xpu:0", "Move the model to CPU before export."),
    ("meta", META_ADVICE),
]


class _DeviceStorage(torch.UntypedStorage):
    """Readable host memory whose storage reports another device.

    The emitter must refuse a device's memory before reading it from the host.
    These bytes stay readable, so an emitter that reads them without checking
    the device serializes them, and the test fails instead of crashing.
    """

    claimed_device: torch.device

    @property
    def device(self) -> torch.device:
        return self.claimed_device


def _claim_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    if device == "meta":
        return tensor.to("meta")
    storage = _DeviceStorage(tensor.untyped_storage().nbytes())
    storage.claimed_device = torch.device(device)
    storage.copy_(tensor.untyped_storage())
    return torch.empty(0, dtype=tensor.dtype).set_(
        storage, tensor.storage_offset(), tensor.size(), tensor.stride()
    )


def _constant_error(fqn: str, device: str, advice: str) -> str:
    return (
        f"Constant tensor data for '{fqn}' is on device {device}, but ExecuTorch "
        f"can only serialize constant data from CPU memory. {advice}"
    )


class LinearReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Concat(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("empty", torch.ones(0))

    def forward(self, x):
        return torch.cat([x, self.empty])


class AddWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(4.0).reshape(2, 2))

    def forward(self, x):
        return torch.add(x, self.weight)


class TestEmitDeviceConstants(unittest.TestCase):
    def _edge(self, model: torch.nn.Module, *inputs) -> EdgeProgramManager:
        return to_edge(export(model.eval(), inputs, strict=True))

    def _on_device(self, tensor: torch.Tensor, device: str) -> torch.Tensor:
        moved = _claim_device(tensor, device)
        # Each case's premise: the emitter will read a storage on this device.
        self.assertEqual(str(moved.untyped_storage().device), device)
        return moved

    def _move_constant(self, edge: EdgeProgramManager, fqn: str, device: str):
        state_dict = edge.exported_program().state_dict
        state_dict[fqn] = self._on_device(state_dict[fqn], device)

    @parameterized.expand(DEVICES)
    def test_constant_on_device_raises(self, device, advice) -> None:
        edge = self._edge(LinearReLU(), torch.ones(2, 4))
        self._move_constant(edge, "linear.weight", device)
        with self.assertRaisesRegex(
            InternalError,
            re.escape(_constant_error("linear.weight", device, advice))
            + r"(.|\n)*--> %p_linear_weight",
        ):
            edge.to_executorch()

    def test_constant_method_on_device_raises(self) -> None:
        edge = to_edge(
            export(LinearReLU().eval(), (torch.ones(2, 4),), strict=True),
            constant_methods={"get_scale": self._on_device(torch.ones(3), "cuda:0")},
        )
        # The value belongs to no graph: the message has no node dump.
        with self.assertRaisesRegex(
            InternalError,
            "^"
            + re.escape(
                _constant_error(
                    "get_scale", "cuda:0", "Pass a CPU tensor in constant_methods."
                )
            )
            + "$",
        ):
            edge.to_executorch()

    def test_constant_of_device_delegate_is_serialized(self) -> None:
        # The guard reads the storage's device, not spec.device: without device
        # memory planning, a device delegate's inputs are tagged with its
        # device, this constant among them, while their data stays on CPU.
        model = AddWeight()
        edge = to_edge(
            export(model.eval(), (torch.ones(2, 2),), strict=True),
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        )
        et_prog = edge.to_backend(DeviceAwarePartitioner("cuda:0")).to_executorch(
            ExecutorchBackendConfig(enable_non_cpu_memory_planning=False)
        )
        (weight,) = [
            node
            for node in et_prog.exported_program().graph.nodes
            if node.name == "p_weight"
        ]
        self.assertEqual(weight.meta["spec"].device, schema.DeviceType.CUDA)
        self.assertEqual(
            [b.storage for b in et_prog.executorch_program.constant_buffer[1:]],
            [model.weight.detach().numpy().tobytes()],
        )

    def test_empty_constant_on_device_is_emitted(self) -> None:
        # An empty constant has no data to read, whatever its device.
        expected = self._edge(Concat(), torch.ones(3)).to_executorch().buffer
        edge = self._edge(Concat(), torch.ones(3))
        self._move_constant(edge, "empty", "cuda:0")
        self.assertEqual(edge.to_executorch().buffer, expected)
