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

    def _bundle(self, outputs: List[torch.Tensor]) -> bytes:
        case = MethodTestCase(inputs=[self.input], expected_outputs=outputs)
        return serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(self.program, [MethodTestSuite("forward", [case])])
        )

    def test_expected_output_on_device_is_bundled_from_a_host_copy(self) -> None:
        output = on_device_storage(self.output, "cuda:0")
        # The premise: the bundled program reads a storage on cuda:0.
        self.assertEqual(str(output.untyped_storage().device), "cuda:0")
        self.assertEqual(self._bundle([output]), self._bundle([self.output]))

    def test_meta_expected_output_is_refused(self) -> None:
        with self.assertRaises(NotImplementedError):
            self._bundle([torch.empty(2, 3, device="meta")])
