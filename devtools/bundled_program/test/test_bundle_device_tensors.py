# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest
from typing import List

import torch
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import to_edge
from torch.export import export


class _DeviceStorage(torch.UntypedStorage):
    """Host memory whose storage reports another device, and whose pointer,
    as a device's is to the host, cannot be read through.

    A bundled program that reads it directly gets a NULL pointer and fails
    the test instead of crashing it; a copy (``cpu()``) still reads the bytes.
    """

    claimed_device: torch.device

    @property
    def device(self) -> torch.device:
        return self.claimed_device

    def data_ptr(self) -> int:
        return 0


def _claim_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    storage = _DeviceStorage(tensor.untyped_storage().nbytes())
    storage.claimed_device = torch.device(device)
    storage.copy_(tensor.untyped_storage())
    return torch.empty(0, dtype=tensor.dtype).set_(
        storage, tensor.storage_offset(), tensor.size(), tensor.stride()
    )


class TestBundleDeviceTensors(unittest.TestCase):
    def setUp(self) -> None:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).eval()
        self.input = torch.randn(2, 4)
        with torch.no_grad():
            self.output = model(self.input)
        self.program = to_edge(
            export(model, (self.input,), strict=True)
        ).to_executorch()

    def _bundle(self, outputs: List[torch.Tensor]) -> bytes:
        case = MethodTestCase(inputs=[self.input], expected_outputs=outputs)
        return serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(self.program, [MethodTestSuite("forward", [case])])
        )

    def test_expected_output_on_device_is_bundled_from_a_host_copy(self) -> None:
        output = _claim_device(self.output, "cuda:0")
        # The premise: the bundled program reads a storage on cuda:0.
        self.assertEqual(str(output.untyped_storage().device), "cuda:0")
        self.assertEqual(self._bundle([output]), self._bundle([self.output]))

    def test_meta_expected_output_is_refused(self) -> None:
        with self.assertRaises(NotImplementedError):
            self._bundle([torch.empty(2, 3, device="meta")])
