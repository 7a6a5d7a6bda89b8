# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""The Vulkan delegate refuses constant data that is not in host memory (#21545).

Reading a device tensor's data_ptr() from the host kills the process. These
tests stand in tensors whose storage claims a device over the null page, which
no supported OS maps: a read before the check would crash the process.
"""

from typing import Dict

import pytest
import torch
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkGraph
from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
    serialize_vulkan_graph,
)
from executorch.exir import to_edge_transform_and_lower
from torch.export import export

_UNREADABLE_ADDRESS = 0x10


class _DeviceStorageTensor(torch.Tensor):
    """A CPU tensor whose storage claims to be on another device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage


class _DeviceStorageParameter(torch.nn.Parameter):
    """The same, as a parameter; a copy of a device tensor stays on its device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage

    def __deepcopy__(self, memo: Dict[int, object]) -> "_DeviceStorageParameter":
        return self


def _on_device(tensor: torch.Tensor, device: str, cls: type) -> torch.Tensor:
    fake = torch.Tensor._make_subclass(cls, tensor.detach())
    fake.device_storage = torch._C._construct_storage_from_data_pointer(
        _UNREADABLE_ADDRESS, torch.device(device), tensor.untyped_storage().nbytes()
    )
    return fake


def _linear_relu() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


@pytest.mark.parametrize("device", ["cuda:0", "mps:0"])
def test_weight_on_device_raises(device: str) -> None:
    program = export(_linear_relu(), (torch.ones(2, 4),))
    weight = program.state_dict["0.weight"]
    program.state_dict["0.weight"] = _on_device(weight, device, _DeviceStorageParameter)
    with pytest.raises(RuntimeError, match=rf"'p_0_weight' is on device {device},"):
        to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()])


@pytest.mark.parametrize("device", ["cuda:0", "mps:0"])
def test_serialize_vulkan_graph_raises(device: str) -> None:
    # No partitioner passes tensors here today; callers such as tests do.
    graph = VkGraph(
        version="0",
        chain=[],
        values=[],
        input_ids=[],
        output_ids=[],
        constants=[],
        shaders=[],
    )
    tensors = [torch.ones(4), _on_device(torch.ones(3), device, _DeviceStorageTensor)]
    with pytest.raises(RuntimeError, match=rf"tensor 1 is on device {device},"):
        serialize_vulkan_graph(graph, tensors, [])


def test_cpu_model_lowers() -> None:
    program = export(_linear_relu(), (torch.ones(2, 4),))
    edge = to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()])
    assert len(edge.to_executorch().buffer) > 0
