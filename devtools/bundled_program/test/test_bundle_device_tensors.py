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
from executorch.exir.backend.test.device_util import on_device_storage
from torch.export import export


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

    def _bundle(self, inputs: List[torch.Tensor], outputs: List[torch.Tensor]) -> bytes:
        case = MethodTestCase(inputs=inputs, expected_outputs=outputs)
        return serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(self.program, [MethodTestSuite("forward", [case])])
        )

    def test_tensors_on_device_are_bundled_from_host_copies(self) -> None:
        expected = self._bundle([self.input], [self.output])
        device_input = on_device_storage(self.input, "cuda:0")
        device_output = on_device_storage(self.output, "cuda:0")
        # The premise: the bundled program reads storages on cuda:0.
        for tensor in (device_input, device_output):
            self.assertEqual(str(tensor.untyped_storage().device), "cuda:0")
        self.assertEqual(self._bundle([device_input], [self.output]), expected)
        self.assertEqual(self._bundle([self.input], [device_output]), expected)

    def test_meta_expected_output_is_refused(self) -> None:
        with self.assertRaisesRegex(NotImplementedError, "meta tensor"):
            self._bundle([self.input], [torch.empty(2, 3, device="meta")])
