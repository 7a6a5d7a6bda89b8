# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

import os
import subprocess
import sys
import unittest

import torch

# The reproducer of https://github.com/pytorch/executorch/issues/21545: a CUDA
# model exported without a partitioner for CUDA.
_EXPORT_CUDA_MODEL_WITHOUT_PARTITIONER = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
example = torch.ones(2, 4).cuda()
program = to_edge_transform_and_lower(export(model, (example,))).to_executorch()
"""


class TestCudaDeviceConstants(unittest.TestCase):
    def setUp(self):
        if not torch.cuda.is_available():
            self.skipTest("CUDA is not available")

    def test_export_without_partitioner_raises(self):
        # In a child process: reading the weights' device memory from the host
        # would kill the process, and the test run with it. The child gets this
        # process's import path, which a packaged test binary sets up itself.
        result = subprocess.run(
            [sys.executable, "-c", _EXPORT_CUDA_MODEL_WITHOUT_PARTITIONER],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(
            "InternalError: Failed with error: Constant tensor data for '0.weight' "
            "is on device cuda:0, but ExecuTorch can only serialize constant data "
            "from CPU memory. Move the model to CPU before export, or lower it "
            "with a partitioner for that device such as CudaPartitioner.\n",
            result.stderr,
        )
