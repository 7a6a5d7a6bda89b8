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
from executorch.exir.backend.test.device_util import DeviceAwarePartitioner, on_device
from executorch.exir.error import InternalError
from torch.export import export


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

    def _move_constant(self, edge: EdgeProgramManager, fqn: str, device: str):
        state_dict = edge.exported_program().state_dict
        if device == "meta":
            state_dict[fqn] = state_dict[fqn].to(device)
        else:
            state_dict[fqn] = on_device(state_dict[fqn], device)
        # The premise: the emitter reads a storage on this device.
        self.assertEqual(str(state_dict[fqn].untyped_storage().device), device)

    def test_constant_on_device_raises(self) -> None:
        for device in ("cuda:0", "mps:0", "xpu:0", "meta"):
            with self.subTest(device=device):
                edge = self._edge(LinearReLU(), torch.ones(2, 4))
                self._move_constant(edge, "linear.weight", device)
                with self.assertRaisesRegex(
                    InternalError,
                    re.escape(
                        "Constant tensor data for 'linear.weight' is on device "
                        f"{device}, but ExecuTorch can only serialize constant data "
                        "from CPU memory. Move the model to CPU before export, or "
                        "delegate the ops that use it to a backend for that device."
                    )
                    + r"[\s\S]*--> %p_linear_weight",
                ):
                    edge.to_executorch()

    def test_constant_method_on_device_raises(self) -> None:
        edge = to_edge(
            export(LinearReLU().eval(), (torch.ones(2, 4),), strict=True),
            constant_methods={
                "get_scales": [torch.ones(2), on_device(torch.ones(3), "cuda:0")]
            },
        )
        with self.assertRaises(InternalError) as context:
            edge.to_executorch()
        # The value belongs to no graph: the message has no node dump.
        self.assertEqual(
            str(context.exception),
            "Constant tensor data for value 1 of 'get_scales' is on device cuda:0, "
            "but ExecuTorch can only serialize constant data from CPU memory. Pass "
            "CPU tensors in constant_methods.",
        )

    def test_constant_of_device_delegate_is_serialized(self) -> None:
        # The guard reads the storage's device, not spec.device. The premise:
        # without device memory planning, a device delegate's inputs are tagged
        # with its device, this constant among them, while their data is on CPU.
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
