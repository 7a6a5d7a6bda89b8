# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops, op_tile_crop_aot  # noqa
from torch.utils._mode_utils import no_dispatch


class _OnDevice(torch.Tensor):
    """Host memory that reports, and dispatches as, another device.

    The ops must refuse a device's tensors before their CPU kernels read them
    from the host. These bytes stay readable, so a kernel that runs anyway
    returns, and the test fails instead of crashing.
    """

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.prim.device.default:
            return args[0].claimed_device
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def _on_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    moved = torch.Tensor._make_subclass(
        _OnDevice,
        tensor,
        False,
        dispatch_device=True,
        device_for_backend_keys=torch.device(device),
    )
    moved.claimed_device = torch.device(device)
    return moved


def _error(op: str, argument: str, advice: str) -> str:
    return (
        f"{op}: argument '{argument}' is on device cuda:0, but this op runs on CPU "
        f"only. {advice}"
    )


MODEL_ADVICE = (
    "Run the model on CPU, or leave the custom op source transforms off to run "
    "it on cuda."
)


class CustomOpsDeviceTensorsTest(unittest.TestCase):
    def _calls(self, to_device):
        def tensor(*size):
            moved = to_device(torch.rand(size))
            # Each case's premise: the op gets a tensor on the device.
            self.assertEqual(str(moved.device), "cuda:0")
            return moved

        q, k, v = tensor(1, 1, 8, 4), tensor(1, 1, 8, 4), tensor(1, 1, 8, 4)
        k_cache, v_cache = tensor(1, 10, 8, 4), tensor(1, 10, 8, 4)
        image = tensor(3, 448, 448)
        llama, preprocess = torch.ops.llama, torch.ops.preprocess
        # update_cache first: without the fix it returns from host memory.
        return [
            (
                lambda: llama.update_cache(k, k_cache, 0),
                _error("llama::update_cache", "value", MODEL_ADVICE),
            ),
            (
                lambda: llama.custom_sdpa(q, k_cache, v_cache, 0, None, 0, True),
                _error("llama::custom_sdpa", "query", MODEL_ADVICE),
            ),
            (
                lambda: llama.sdpa_with_kv_cache(
                    q, k, v, k_cache, v_cache, 0, 1, None, 0, True
                ),
                _error("llama::sdpa_with_kv_cache", "query", MODEL_ADVICE),
            ),
            (
                lambda: preprocess.tile_crop(image, 224),
                _error("preprocess::tile_crop", "input", "Crop the image on CPU."),
            ),
        ]

    def test_every_op_of_the_library_has_a_cuda_kernel(self) -> None:
        # The library's kernels are registered for every device: each op with
        # a tensor argument needs one for CUDA that refuses device tensors.
        def takes_tensors(name: str) -> bool:
            handle = torch._C._dispatch_find_schema_or_throw(*name.partition(".")[::2])
            return any("Tensor" in str(a.type) for a in handle.schema().arguments)

        ops = [
            name
            for name in sorted(torch._C._dispatch_get_all_op_names())
            if name.startswith(("llama::", "preprocess::"))
            and torch._C._dispatch_has_kernel_for_dispatch_key(
                name, "CompositeExplicitAutograd"
            )
            and takes_tensors(name)
        ]
        self.assertIn("llama::custom_sdpa", ops)
        missing = [
            name
            for name in ops
            if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA")
        ]
        self.assertEqual(missing, [])

    def test_tensor_on_device_raises(self) -> None:
        # A tensor that dispatches as CUDA over host memory, on any build.
        for call, error in self._calls(lambda t: _on_device(t, "cuda:0")):
            with self.assertRaises(RuntimeError) as context:
                call()
            self.assertEqual(str(context.exception), error)

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA is not available")
    def test_cuda_tensor_raises(self) -> None:
        # Without a CUDA kernel the op reads device memory and crashes: fail
        # before the call instead.
        for op in ("llama::update_cache", "llama::custom_sdpa"):
            self.assertTrue(torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA"))
        for call, error in self._calls(lambda t: t.cuda()):
            with self.assertRaises(RuntimeError) as context:
                call()
            self.assertEqual(str(context.exception), error)
