# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import re
import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa
from torch.utils._mode_utils import no_dispatch


class _OnCuda(torch.Tensor):
    """Host memory that reports, and dispatches as, CUDA, on any machine."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.prim.device.default:
            return torch.device("cuda:0")
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def _on_cuda() -> torch.Tensor:
    return torch.Tensor._make_subclass(
        _OnCuda,
        torch.zeros(1),
        False,
        dispatch_device=True,
        device_for_backend_keys=torch.device("cuda:0"),
    )


def _library_ops():
    """The overloads that op_sdpa_aot.cpp, op_moe_aot.cpp,
    op_fast_hadamard_transform_aten.cpp and op_tile_crop_aot.cpp register for
    CPU."""
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


def _runs_on_cuda(op) -> bool:
    try:
        torch.library.get_kernel(op, "CUDA")
    except RuntimeError:
        return False
    return True


def _arguments(op, tensor):
    """A value for each argument without a default, every tensor made by
    ``tensor``."""
    values = {"Tensor": tensor, "int": int, "float": float, "str": str}
    required = [a for a in op._schema.arguments if not a.has_default_value()]
    for argument in required:
        if str(argument.type) not in values:
            raise AssertionError(f"{op.name()}: no test value for {argument.type}")
    return {a.name: values[str(a.type)]() for a in required}


class DeviceTensorsTest(unittest.TestCase):
    maxDiff = None  # A failure names every op that would run on CUDA.

    def _assert_refused(self, tensor) -> None:
        ops = _library_ops()
        # The arguments below are placeholders, which a kernel that ran would
        # read as the op's data: check first that none would.
        self.assertEqual([op.name() for op in ops if _runs_on_cuda(op)], [])
        for op in ops:
            with self.assertRaisesRegex(
                NotImplementedError,
                f"Could not run '{re.escape(op.name())}' with arguments from the "
                "'CUDA' backend",
            ):
                op(**_arguments(op, tensor))

    def test_tensor_dispatched_as_cuda(self) -> None:
        self.assertEqual(_on_cuda().device.type, "cuda")
        self._assert_refused(_on_cuda)

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA is not available")
    def test_cuda_tensor(self) -> None:
        self._assert_refused(lambda: torch.zeros(1, device="cuda"))
