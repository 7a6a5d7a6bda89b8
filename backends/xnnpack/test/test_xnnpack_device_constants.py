# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""XNNPACK refuses constant data that is not in host memory (#21545).

A CUDA model lowered with XnnpackPartitioner used to segfault while XNNPACK
serialized its weights, because their data_ptr() is a device address. These
tests stand in a parameter whose storage claims a device over the null page,
which no supported OS maps: a read before the check would crash the process.
"""

from typing import Dict

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from torch.export import export

_UNREADABLE_ADDRESS = 0x10


class _DeviceStorageParameter(torch.nn.Parameter):
    """A CPU parameter whose storage claims to be on another device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage

    def __deepcopy__(self, memo: Dict[int, object]) -> "_DeviceStorageParameter":
        # A copy of a device tensor stays on its device.
        return self


def _on_device(param: torch.Tensor, device: str) -> torch.nn.Parameter:
    fake = torch.Tensor._make_subclass(_DeviceStorageParameter, param.detach())
    fake.device_storage = torch._C._construct_storage_from_data_pointer(
        _UNREADABLE_ADDRESS, torch.device(device), param.untyped_storage().nbytes()
    )
    return fake


def _linear_relu() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


@pytest.mark.parametrize("device", ["cuda:0", "mps:0"])
def test_weight_on_device_raises(device: str) -> None:
    program = export(_linear_relu(), (torch.ones(2, 4),))
    weight = program.state_dict["0.weight"]
    program.state_dict["0.weight"] = _on_device(weight, device)
    with pytest.raises(RuntimeError, match=rf"'p_0_weight' is on device {device},"):
        to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_model_raises() -> None:
    model = _linear_relu().cuda()
    program = export(model, (torch.ones(2, 4).cuda(),))
    with pytest.raises(RuntimeError, match=r"'p_0_weight' is on device cuda:0,"):
        to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])


def test_cpu_model_lowers() -> None:
    program = export(_linear_relu(), (torch.ones(2, 4),))
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    assert len(edge.to_executorch().buffer) > 0
