# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

import unittest

import torch
from executorch.backends.cuda.cuda_backend import CudaBackend
from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torch.export import export


class TestCudaBundledProgram(unittest.TestCase):
    """Test bundling test data computed on CUDA with a CUDA-lowered program."""

    def setUp(self):
        if not torch.cuda.is_available():
            self.skipTest("CUDA is not available")

    def test_cuda_test_data_is_bundled_from_cpu_copies(self):
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
        module = module.eval().cuda()
        inputs = (torch.randn(2, 4).cuda(),)
        with torch.no_grad():
            expected = module(*inputs)

        program = to_edge_transform_and_lower(
            export(module, inputs, strict=True),
            partitioner=[
                CudaPartitioner(
                    [CudaBackend.generate_method_name_compile_spec("forward")]
                )
            ],
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
        ).to_executorch()

        def bundle(test_inputs, expected_outputs) -> bytes:
            case = MethodTestCase(inputs=test_inputs, expected_outputs=expected_outputs)
            return serialize_from_bundled_program_to_flatbuffer(
                BundledProgram(program, [MethodTestSuite("forward", [case])])
            )

        self.assertEqual(
            bundle(inputs, [expected]),
            bundle([inputs[0].cpu()], [expected.cpu()]),
        )
