# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The custom-ops backport's test (patches/backports/custom-ops.patch), in the
form of ExecuTorch's own tests. Named so that this project's pytest does not
collect it: test/test_releases.py runs it on 1.4.1 and on the environment's
1.5.1, stock and patched."""

import unittest

import torch
from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
from torch.utils._mode_utils import no_dispatch


class _OnCuda(torch.Tensor):
    """Host memory that reports, and dispatches as, cuda:0.

    The ops must refuse a device's tensors before their CPU kernels read them
    from the host. These bytes stay readable, so a kernel that runs anyway
    returns, and the test fails instead of crashing.
    """

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.prim.device.default:
            return torch.device("cuda:0")
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def _on_cuda(tensor: torch.Tensor) -> torch.Tensor:
    return torch.Tensor._make_subclass(
        _OnCuda,
        tensor,
        False,
        dispatch_device=True,
        device_for_backend_keys=torch.device("cuda:0"),
    )


def _error(op: str, argument: str, advice: str) -> str:
    return (
        f"{op}: argument '{argument}' is on device cuda:0, but this op runs on CPU "
        f"only. {advice}"
    )


MODEL_ADVICE = (
    "Run the model on CPU, or leave the custom op source transforms off to run "
    "it on cuda."
)


class TestCustomOpsDeviceTensors(unittest.TestCase):
    def _calls(self, move):
        def tensor(*size):
            moved = move(torch.rand(size))
            # Each case's premise: the op gets a tensor on the device.
            self.assertEqual(str(moved.device), "cuda:0")
            return moved

        q, k, v = tensor(1, 1, 8, 4), tensor(1, 1, 8, 4), tensor(1, 1, 8, 4)
        k_cache, v_cache = tensor(1, 10, 8, 4), tensor(1, 10, 8, 4)
        image = tensor(3, 448, 448)
        llama, preprocess = torch.ops.llama, torch.ops.preprocess
        # update_cache first: without the guard it returns from host memory.
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
                lambda: preprocess.tile_crop.out(
                    image, 224, out=tensor(4, 3, 224, 224)
                ),
                _error("preprocess::tile_crop.out", "input", "Crop the image on CPU."),
            ),
        ]

    def test_tensor_on_device_raises(self) -> None:
        for call, error in self._calls(_on_cuda):
            with self.assertRaises(RuntimeError) as context:
                call()
            self.assertEqual(str(context.exception), error)

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA is not available")
    def test_cuda_tensor_raises(self) -> None:
        for call, error in self._calls(lambda t: t.cuda()):
            with self.assertRaises(RuntimeError) as context:
                call()
            self.assertEqual(str(context.exception), error)

    def test_cpu_tensors_run(self) -> None:
        value, cache = torch.rand(1, 1, 8, 4), torch.zeros(1, 10, 8, 4)
        torch.ops.llama.update_cache(value, cache, 3)
        self.assertTrue(torch.equal(cache[:, 3:4], value))
        self.assertEqual(
            tuple(torch.ops.preprocess.tile_crop(torch.rand(3, 448, 448), 224).shape),
            (4, 3, 224, 224),
        )
