# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The runtime-input backport's test (patches/backports/runtime-inputs.patch),
in the form of ExecuTorch's own tests. Named so that this project's pytest
does not collect it: it is for releases 1.0.0 to 1.4.1, and
test/test_releases.py runs it on 1.4.1, stock and patched."""

import unittest

import torch
from executorch.exir import to_edge
from executorch.extension.pybindings.portable_lib import (
    _load_for_executorch_from_buffer,
)
from executorch.runtime import Runtime
from torch.export import export
from torch.utils._mode_utils import no_dispatch


class _OnDevice(torch.Tensor):
    """Host memory that reports, and dispatches as, cuda:0.

    The runtime must refuse a device's tensor before reading it from the host.
    These bytes stay readable, so a runtime that reads them anyway returns,
    and the test fails instead of crashing.
    """

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.prim.device.default:
            return torch.device("cuda:0")
        with no_dispatch():
            return func(*args, **(kwargs or {}))


def _on_device(tensor: torch.Tensor) -> torch.Tensor:
    return torch.Tensor._make_subclass(
        _OnDevice,
        tensor,
        False,
        dispatch_device=True,
        device_for_backend_keys=torch.device("cuda:0"),
    )


ERROR = (
    "Input 0 is on device cuda:0, but this ExecuTorch release reads inputs "
    "from host memory. Move it to CPU first."
)


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class TestRuntimeInputs(unittest.TestCase):
    def setUp(self) -> None:
        self.x = torch.arange(4.0)
        self.buffer = to_edge(export(AddOne(), (self.x,))).to_executorch().buffer

    def _input_on_device(self) -> torch.Tensor:
        moved = _on_device(self.x)
        # The premise: the runtime gets a tensor that reports cuda:0.
        self.assertEqual(str(moved.device), "cuda:0")
        return moved

    def test_module_input_on_device_raises(self) -> None:
        module = _load_for_executorch_from_buffer(self.buffer)
        for call in (
            lambda x: module.forward((x,)),
            lambda x: module.run_method("forward", (x,)),
            lambda x: module(x),
        ):
            with self.assertRaises(RuntimeError) as context:
                call(self._input_on_device())
            self.assertEqual(str(context.exception), ERROR)

    def test_method_input_on_device_raises(self) -> None:
        method = Runtime.get().load_program(self.buffer).load_method("forward")
        with self.assertRaises(RuntimeError) as context:
            method.execute([self._input_on_device()])
        self.assertEqual(str(context.exception), ERROR)

    def test_cpu_input_runs(self) -> None:
        module = _load_for_executorch_from_buffer(self.buffer)
        method = Runtime.get().load_program(self.buffer).load_method("forward")
        torch.testing.assert_close(module.forward((self.x,))[0], self.x + 1)
        torch.testing.assert_close(method.execute([self.x])[0], self.x + 1)
