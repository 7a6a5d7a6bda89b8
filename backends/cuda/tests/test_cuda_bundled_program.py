# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

import unittest

import torch
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import to_edge
from torch.export import export


class TestCudaBundledProgram(unittest.TestCase):
    """Test bundling test data that is in CUDA memory (devtools' bundled
    program, tested here for cuda.yml's GPU runner)."""

    def setUp(self):
        if not torch.cuda.is_available():
            self.skipTest("CUDA is not available")

    def test_cuda_test_data_is_bundled_from_cpu_copies(self):
        module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        inputs = (torch.randn(2, 4),)
        with torch.no_grad():
            expected = module(*inputs)
        program = to_edge(export(module, inputs, strict=True)).to_executorch()

        def bundle(test_inputs, expected_outputs) -> bytes:
            case = MethodTestCase(inputs=test_inputs, expected_outputs=expected_outputs)
            return serialize_from_bundled_program_to_flatbuffer(
                BundledProgram(program, [MethodTestSuite("forward", [case])])
            )

        self.assertEqual(
            bundle([inputs[0].cuda()], [expected.cuda()]),
            bundle(list(inputs), [expected]),
        )
