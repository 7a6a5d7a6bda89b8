# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import (
    _load_for_executorch_from_buffer,
)
from torch.export import export


class LinearReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class TestXnnpackDeviceConstants(unittest.TestCase):
    def test_model_on_meta_raises(self) -> None:
        # A meta model takes the path of a CUDA model, on every build: XNNPACK
        # must refuse its weights rather than read them from the host.
        model = LinearReLU().eval().to("meta")
        program = export(model, (torch.ones(2, 4, device="meta"),), strict=True)
        self.assertEqual(program.state_dict["linear.weight"].device.type, "meta")
        with self.assertRaises(RuntimeError) as context:
            to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        self.assertEqual(
            str(context.exception),
            "Constant tensor data for 'linear.weight' is on device meta, but "
            "XNNPACK serializes constant data from CPU memory. A meta tensor has no "
            "data: load or initialize it on CPU before lowering.",
        )

    def test_cpu_model_lowers(self) -> None:
        torch.manual_seed(0)
        model = LinearReLU().eval()
        x = torch.randn(2, 4)
        executorch_program = to_edge_transform_and_lower(
            export(model, (x,), strict=True), partitioner=[XnnpackPartitioner()]
        ).to_executorch()
        plan = executorch_program.executorch_program.execution_plan[0]
        self.assertEqual(
            [delegate.id for delegate in plan.delegates], ["XnnpackBackend"]
        )
        outputs = _load_for_executorch_from_buffer(executorch_program.buffer).forward(
            (x,)
        )
        torch.testing.assert_close(outputs[0], model(x))
