# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

"""The emitter refuses constant data that is not in host memory (#21545).

Reading a device tensor's data_ptr() from the host kills the process, so these
tests cannot rely on a real accelerator being absent or present. A "fake device"
tensor is a CPU tensor whose untyped_storage() claims another device over an
address in the null page, which no supported OS maps (Linux's mmap_min_addr,
macOS's __PAGEZERO, the reserved first 64 KiB on Windows): if the emitter read it
before raising, the test process would crash instead of passing.
"""

import re
import subprocess
import sys
from typing import Tuple

import pytest
import torch
from executorch.exir import (
    EdgeProgramManager,
    ExecutorchBackendConfig,
    to_edge,
    to_edge_transform_and_lower,
)
from executorch.exir.error import InternalError
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from torch.export import export

# Inside the first page, with room for the small constants below.
_UNREADABLE_ADDRESS = 0x10
_UNREADABLE_BYTES = 4096 - _UNREADABLE_ADDRESS

# Fake devices need no hardware; meta is a real device with no data at all.
DEVICES = ["cuda:0", "mps:0", "meta"]

# The reproducer from #21545, verbatim.
_ISSUE_REPRODUCER = """
import torch
from torch.export import export
from executorch.exir import to_edge_transform_and_lower

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
example = torch.ones(2, 4).cuda()
program = to_edge_transform_and_lower(export(model, (example,))).to_executorch()
"""


class _DeviceStorageTensor(torch.Tensor):
    """A CPU tensor whose storage claims to be on another device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage


def _on_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    if device == "meta":
        return tensor.to("meta")
    nbytes = tensor.untyped_storage().nbytes()
    assert nbytes <= _UNREADABLE_BYTES
    fake = torch.Tensor._make_subclass(_DeviceStorageTensor, tensor)
    fake.device_storage = torch._C._construct_storage_from_data_pointer(
        _UNREADABLE_ADDRESS, torch.device(device), nbytes
    )
    return fake


def _device_error(name: str, device: str) -> str:
    # Anchored on the device so that the node dump ("metadata") cannot match.
    return rf"'{re.escape(name)}' is on device {re.escape(device)},"


class _LinearReLU(torch.nn.Sequential):
    def __init__(self) -> None:
        super().__init__(torch.nn.Linear(4, 3), torch.nn.ReLU())


class _Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.arange(4, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(x)
        return self.count + 0


def _edge(
    model: torch.nn.Module, inputs: Tuple[torch.Tensor, ...]
) -> EdgeProgramManager:
    return to_edge_transform_and_lower(export(model.eval(), inputs))


def _replace_state(edge: EdgeProgramManager, fqn: str, tensor: torch.Tensor) -> None:
    edge.exported_program().state_dict[fqn] = tensor


@pytest.mark.parametrize("device", DEVICES)
def test_constant_on_device_raises(device: str) -> None:
    edge = _edge(_LinearReLU(), (torch.ones(2, 4),))
    weight = edge.exported_program().state_dict["0.weight"]
    _replace_state(edge, "0.weight", _on_device(weight, device))
    with pytest.raises(InternalError, match=_device_error("0.weight", device)):
        edge.to_executorch()


@pytest.mark.parametrize("device", DEVICES)
def test_external_constant_on_device_raises(device: str) -> None:
    edge = _edge(_LinearReLU(), (torch.ones(2, 4),))
    weight = edge.exported_program().state_dict["0.weight"]
    _replace_state(edge, "0.weight", _on_device(weight, device))
    with pytest.raises(InternalError, match=_device_error("0.weight", device)):
        edge.to_executorch(ExecutorchBackendConfig(external_constants=True))


@pytest.mark.parametrize("device", DEVICES)
def test_initialized_mutable_buffer_on_device_raises(device: str) -> None:
    edge = _edge(_Counter(), (torch.ones(4),))
    count = edge.exported_program().state_dict["count"]
    _replace_state(edge, "count", _on_device(count, device))
    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["count"])])
    with pytest.raises(InternalError, match=_device_error("count", device)):
        edge.to_executorch(config)


@pytest.mark.parametrize("device", DEVICES)
def test_constant_method_on_device_raises(device: str) -> None:
    scale = _on_device(torch.ones(3), device)
    edge = to_edge(
        export(_LinearReLU().eval(), (torch.ones(2, 4),)),
        constant_methods={"get_scale": scale},
    )
    with pytest.raises(InternalError, match=_device_error("get_scale", device)):
        edge.to_executorch()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_issue_reproducer_on_cuda_raises() -> None:
    # A child process, because without the guard the host read kills it.
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _ISSUE_REPRODUCER],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Fatal Python error" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    assert re.search(
        r"InternalError: .*'0\.weight' is on device cuda:0,", result.stderr
    ), result.stderr


def test_cpu_constants_export() -> None:
    program = _edge(_LinearReLU(), (torch.ones(2, 4),)).to_executorch()
    assert len(program.buffer) > 0


@pytest.mark.parametrize("device", DEVICES)
def test_uninitialized_mutable_buffer_on_device_is_emitted(device: str) -> None:
    # Without an initial state only the buffer's shape and dtype are serialized.
    edge = _edge(_Counter(), (torch.ones(4),))
    count = edge.exported_program().state_dict["count"]
    _replace_state(edge, "count", _on_device(count, device))
    assert len(edge.to_executorch().buffer) > 0


@pytest.mark.parametrize("device", DEVICES)
def test_empty_constant_on_device_is_emitted(device: str) -> None:
    edge = to_edge(
        export(_LinearReLU().eval(), (torch.ones(2, 4),)),
        constant_methods={"get_empty": _on_device(torch.ones(0), device)},
    )
    assert len(edge.to_executorch().buffer) > 0
