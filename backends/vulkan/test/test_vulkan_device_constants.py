# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest
from unittest import mock

import torch
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.backends.vulkan.serialization.vulkan_graph_builder import VkGraphBuilder
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.test.device_util import on_device
from torch.export import export


class LinearReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class TestVulkanDeviceConstants(unittest.TestCase):
    def test_weight_on_cuda_raises(self) -> None:
        program = export(LinearReLU().eval(), (torch.ones(2, 4),), strict=True)
        get_param_tensor = VkGraphBuilder.get_param_tensor

        def fetch_on_cuda(builder, node):
            # on_device() tensors do not survive lowering, whose verifier wants
            # Parameters: the weight goes on the device where the delegate fetches it.
            weight = on_device(get_param_tensor(builder, node), "cuda:0")
            self.assertEqual(str(weight.device), "cuda:0")
            return weight

        with mock.patch.object(VkGraphBuilder, "get_param_tensor", fetch_on_cuda):
            with self.assertRaises(RuntimeError) as context:
                to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()])
        self.assertEqual(
            str(context.exception),
            "Constant tensor data for 'linear.weight' is on device cuda:0, but the "
            "Vulkan delegate serializes constant data from CPU memory. Move the "
            "model to CPU before lowering it to Vulkan.",
        )

    def test_model_on_meta_raises(self) -> None:
        # A meta model takes the path of a CUDA model, on every build: the
        # delegate must refuse its weights rather than read them from the host.
        model = LinearReLU().eval().to("meta")
        program = export(model, (torch.ones(2, 4, device="meta"),), strict=True)
        self.assertEqual(program.state_dict["linear.weight"].device.type, "meta")
        with self.assertRaises(RuntimeError) as context:
            to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()])
        self.assertEqual(
            str(context.exception),
            "Constant tensor data for 'linear.weight' is on device meta, but the "
            "Vulkan delegate serializes constant data from CPU memory. Move the "
            "model to CPU before lowering it to Vulkan.",
        )

    def test_cpu_model_serializes_weights(self) -> None:
        model = LinearReLU().eval()
        executorch_program = to_edge_transform_and_lower(
            export(model, (torch.ones(2, 4),), strict=True),
            partitioner=[VulkanPartitioner()],
        ).to_executorch()
        plan = executorch_program.executorch_program.execution_plan[0]
        self.assertEqual(
            [delegate.id for delegate in plan.delegates], ["VulkanBackend"]
        )
        for param in model.parameters():
            self.assertIn(param.detach().numpy().tobytes(), executorch_program.buffer)
