# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The MPS backport's test (patches/backports/mps-constants.patch), in the
form of ExecuTorch's own tests. Named so that this project's pytest does not
collect it: only releases that ship the MPS backend can import it, and
test/test_releases.py runs it on 1.4.1, stock and patched."""

import unittest

import torch
from executorch.backends.apple.mps.partition import MPSPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.backend_details import CompileSpec
from torch.export import export


class LinearReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class AddOffset(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        return x + self.offset


class TestMPSDeviceConstants(unittest.TestCase):
    def assert_refused_on_meta(self, model: torch.nn.Module, fqn: str) -> None:
        # A meta model takes the path of a model on a GPU, on any machine: the
        # delegate must refuse its constants rather than read them from the host.
        model = model.eval().to("meta")
        program = export(model, (torch.ones(2, 4, device="meta"),), strict=True)
        self.assertEqual(program.state_dict[fqn].untyped_storage().device.type, "meta")
        partitioner = MPSPartitioner([CompileSpec("use_fp16", bytes([False]))])
        with self.assertRaises(RuntimeError) as context:
            to_edge_transform_and_lower(program, partitioner=[partitioner])
        self.assertEqual(
            str(context.exception),
            f"Constant tensor data for '{fqn}' is on device meta, but the MPS "
            "delegate serializes constant data from CPU memory. A meta tensor has "
            "no data: load or initialize it on CPU before lowering.",
        )

    def test_parameter_on_meta_raises(self) -> None:
        self.assert_refused_on_meta(LinearReLU(), "linear.weight")

    def test_buffer_on_meta_raises(self) -> None:
        self.assert_refused_on_meta(AddOffset(), "offset")

    def test_cpu_model_serializes_weights(self) -> None:
        model = LinearReLU().eval()
        partitioner = MPSPartitioner([CompileSpec("use_fp16", bytes([False]))])
        executorch_program = to_edge_transform_and_lower(
            export(model, (torch.ones(2, 4),), strict=True),
            partitioner=[partitioner],
        ).to_executorch()
        plan = executorch_program.executorch_program.execution_plan[0]
        self.assertEqual([delegate.id for delegate in plan.delegates], ["MPSBackend"])
        for param in model.parameters():
            self.assertIn(param.detach().numpy().tobytes(), executorch_program.buffer)
