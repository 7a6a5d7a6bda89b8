# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest
from unittest import mock

import torch
from executorch.backends.xnnpack.operators import node_visitor
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.utils.utils import get_param_tensor
from executorch.exir import to_edge_transform_and_lower
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import export


class LinearReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class TestXnnpackDeviceConstants(unittest.TestCase):
    def assert_lowering_raises(self, program, device) -> None:
        with self.assertRaises(RuntimeError) as context:
            to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        self.assertEqual(
            str(context.exception),
            f"Constant tensor data for 'linear.weight' is on device {device}, but "
            "XNNPACK serializes constant data from CPU memory. Lower the model with "
            "its constants in CPU memory.",
        )

    def test_model_on_meta_raises(self) -> None:
        # A meta model takes the path of a CUDA model, without a GPU: XNNPACK
        # must refuse its weights rather than read them from the host.
        model = LinearReLU().eval().to("meta")
        program = export(model, (torch.ones(2, 4, device="meta"),), strict=True)
        self.assertEqual(program.state_dict["linear.weight"].device.type, "meta")
        self.assert_lowering_raises(program, "meta")

    def test_weight_in_meta_storage_raises(self) -> None:
        # A fake tensor reports cpu, but its storage, which XNNPACK reads, is on
        # meta. Lowering rejects fake weights in the state dict, so the test
        # hands one over where the visitor fetches the weight
        # (node_visitor.get_param_tensor).
        program = export(LinearReLU().eval(), (torch.ones(2, 4),), strict=True)

        def fetch_fake(exported_program, node):
            weight = FakeTensorMode().from_tensor(
                get_param_tensor(exported_program, node)
            )
            self.assertEqual(weight.device.type, "cpu")
            return weight

        with mock.patch.object(node_visitor, "get_param_tensor", fetch_fake):
            self.assert_lowering_raises(program, "meta")
