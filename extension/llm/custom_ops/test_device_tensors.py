# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-unsafe

import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa
from torch.utils._mode_utils import no_dispatch

DEVICE_KEYS = ("CUDA", "MPS", "XPU", "HPU", "MTIA", "PrivateUse1")


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


def _library_ops():
    """The ops of libcustom_ops_aot_lib: its namespaces' ops with a kernel for
    every device and a tensor argument."""
    for qualname in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualname.partition("::")
        packet, _, overload = name.partition(".")
        if namespace in ("llama", "preprocess") and (
            torch._C._dispatch_has_kernel_for_dispatch_key(
                qualname, "CompositeExplicitAutograd"
            )
        ):
            op = getattr(getattr(torch.ops, namespace), packet)
            schema = getattr(op, overload or "default")._schema
            if any("Tensor" in str(argument.type) for argument in schema.arguments):
                yield qualname


def _error(op: str, argument: str, device: str) -> str:
    return (
        f"{op}: argument '{argument}' is on device {device}, but ExecuTorch's "
        "custom ops run on CPU only. Run the model on CPU, or leave the custom op "
        f"source transforms off to run it on {torch.device(device).type}."
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
        ops = torch.ops.llama
        return {
            ("llama::update_cache", "value"): lambda: ops.update_cache(k, k_cache, 0),
            ("llama::custom_sdpa", "query"): lambda: ops.custom_sdpa(
                q, k_cache, v_cache, 0, None, 0, True
            ),
            ("llama::sdpa_with_kv_cache", "query"): lambda: ops.sdpa_with_kv_cache(
                q, k, v, k_cache, v_cache, 0, 1, None, 0, True
            ),
        }

    def _assert_refused(self, to_device) -> None:
        for (op, argument), call in self._calls(to_device).items():
            # Without a kernel for the device, the op would run its CPU kernel
            # on the device's memory: fail here instead.
            self.assertTrue(torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA"))
            with self.assertRaises(RuntimeError) as context:
                call()
            self.assertEqual(str(context.exception), _error(op, argument, "cuda:0"))

    def test_every_op_has_a_kernel_for_each_device(self) -> None:
        ops = set(_library_ops())
        self.assertLessEqual(
            {
                "llama::update_cache",
                "llama::custom_sdpa.out",
                "llama::sdpa_with_kv_cache",
                "preprocess::tile_crop",
            },
            ops,
        )
        missing = [
            (op, key)
            for op in sorted(ops)
            for key in DEVICE_KEYS
            if not torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
        ]
        self.assertEqual(missing, [])

    def test_tensor_on_device_raises(self) -> None:
        self._assert_refused(lambda tensor: _on_device(tensor, "cuda:0"))

    @unittest.skipUnless(torch.cuda.is_available(), "CUDA is not available")
    def test_cuda_tensor_raises(self) -> None:
        self._assert_refused(lambda tensor: tensor.cuda())
