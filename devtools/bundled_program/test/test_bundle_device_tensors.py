# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""Bundled test tensors must be on CPU: device data is refused, not read (#21545).

Expected outputs computed by running the eager model on a GPU are device tensors.
Reading their data_ptr() from the host kills the process. The public API is
driven with meta tensors, which need no hardware; BundledProgram accepts only
plain torch.Tensor values, so the fake-device case calls _emit_bundled_tensor
directly with a tensor whose storage claims a device over the null page, which
no supported OS maps.
"""

from typing import List

import executorch.devtools.bundled_program.schema as bp_schema
import pytest
import torch
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import ExecutorchProgramManager, to_edge
from executorch.exir.tensor import TensorSpec
from torch.export import export

_UNREADABLE_ADDRESS = 0x10


class _LinearReLU(torch.nn.Sequential):
    def __init__(self) -> None:
        super().__init__(torch.nn.Linear(4, 3), torch.nn.ReLU())


class _DeviceStorageTensor(torch.Tensor):
    """A CPU tensor whose storage claims to be on another device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage


def _program() -> ExecutorchProgramManager:
    return to_edge(export(_LinearReLU().eval(), (torch.ones(2, 4),))).to_executorch()


def _bundle(inputs: List[torch.Tensor], outputs: List[torch.Tensor]) -> BundledProgram:
    case = MethodTestCase(inputs=inputs, expected_outputs=outputs)
    return BundledProgram(_program(), [MethodTestSuite("forward", [case])])


def test_meta_expected_output_raises() -> None:
    x = torch.ones(2, 4)
    bundled = _bundle([x], [_LinearReLU()(x).to("meta")])
    with pytest.raises(
        RuntimeError,
        match=r"expected output 0 of test case 0 of method 'forward' is on device meta,",
    ):
        serialize_from_bundled_program_to_flatbuffer(bundled)


def test_meta_input_raises() -> None:
    x = torch.ones(2, 4)
    bundled = _bundle([x.to("meta")], [_LinearReLU()(x)])
    with pytest.raises(
        RuntimeError,
        match=r"input 0 of test case 0 of method 'forward' is on device meta,",
    ):
        serialize_from_bundled_program_to_flatbuffer(bundled)


@pytest.mark.parametrize("device", ["cuda:0", "mps:0"])
def test_device_tensor_raises_before_any_read(device: str) -> None:
    x = torch.ones(2, 4)
    bundled = _bundle([x], [_LinearReLU()(x)])
    fake = torch.Tensor._make_subclass(_DeviceStorageTensor, torch.ones(2, 3))
    fake.device_storage = torch._C._construct_storage_from_data_pointer(
        _UNREADABLE_ADDRESS, torch.device(device), fake.nbytes
    )
    values: List[bp_schema.Value] = []
    with pytest.raises(RuntimeError, match=rf"is on device {device},"):
        bundled._emit_bundled_tensor(TensorSpec.from_tensor(fake, const=True), values)
    assert values == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_computed_expected_output_raises() -> None:
    model = _LinearReLU().eval()
    x = torch.ones(2, 4)
    expected = model.cuda()(x.cuda())
    bundled = _bundle([x], [expected])
    with pytest.raises(RuntimeError, match=r"expected output 0 .* on device cuda:0,"):
        serialize_from_bundled_program_to_flatbuffer(bundled)


def test_cpu_tensors_serialize() -> None:
    x = torch.ones(2, 4)
    bundled = _bundle([x], [_LinearReLU()(x)])
    assert len(serialize_from_bundled_program_to_flatbuffer(bundled)) > 0
