# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa


def _library_ops():
    """The overloads that op_sdpa_aot.cpp, op_moe_aot.cpp,
    op_fast_hadamard_transform_aten.cpp and op_tile_crop_aot.cpp register: an
    op added there belongs here too."""
    packets = [
        torch.ops.llama.sdpa_with_kv_cache,
        torch.ops.llama.custom_sdpa,
        torch.ops.llama.custom_quantized_sdpa,
        torch.ops.llama.update_cache,
        torch.ops.llama.update_cache_with_indices,
        torch.ops.llama.gated_delta_rule,
        torch.ops.llama.channelwise_gated_delta_rule,
        torch.ops.llama.quantized_moe_ffn,
        torch.ops.llama.fast_hadamard_transform,
        torch.ops.preprocess.tile_crop,
    ]
    return [getattr(packet, name) for packet in packets for name in packet.overloads()]


def _has_kernel(op, dispatch_key: str) -> bool:
    try:
        torch.library.get_kernel(op, dispatch_key)
    except RuntimeError:
        return False
    return True


class CpuKernelsTest(unittest.TestCase):
    maxDiff = None  # A failure names every op.

    def test_kernels_are_registered_for_cpu_only(self) -> None:
        # The kernels read tensor data from host memory: tensors on any other
        # device must not reach them.
        ops = _library_ops()
        self.assertEqual(len(ops), 20)
        self.assertEqual([op.name() for op in ops if not _has_kernel(op, "CPU")], [])
        self.assertEqual([op.name() for op in ops if _has_kernel(op, "CUDA")], [])
