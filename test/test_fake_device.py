# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The fake device: a plain tensor whose storage claims a device, and keeps it.

Reading its memory from the host must kill the process (checked in a child);
everything else must behave as for a device tensor: operators compute on the
real values, and what they derive stays on the device.
"""

import copy
import os
import signal
import subprocess
import sys

import pytest
import torch

from conftest import REPO
from executorch_device_guard.check.fake_device import (
    is_fake,
    keep_device_claims,
    on_device,
)


def test_a_fake_tensor_is_a_plain_tensor_on_the_device() -> None:
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    fake = on_device(source, "cuda:0")
    assert type(fake) is torch.Tensor and is_fake(fake)
    assert str(fake.untyped_storage().device) == "cuda:0"
    assert fake.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()
    assert torch.equal(fake * 1, source)  # operators compute on the real values
    # Copying to the host gives the bytes, as a device-to-host copy would.
    assert fake.untyped_storage().cpu().tolist() == source.untyped_storage().tolist()
    parameter = on_device(torch.nn.Parameter(source), "mps:0")
    assert isinstance(parameter, torch.nn.Parameter) and is_fake(parameter)


def test_derived_tensors_stay_on_the_device() -> None:
    weight = on_device(torch.randn(4, 3, 3, 3), "cuda:0")
    scale = on_device(torch.rand(4), "cuda:0")
    with keep_device_claims():
        derived = {
            "fused": weight * scale.reshape(-1, 1, 1, 1),  # BatchNorm fusion
            "contiguous": weight.permute(0, 2, 3, 1).contiguous(),
            "channels_last": weight.to(memory_format=torch.channels_last),
            "half": weight.to(torch.float16),
            "clone": weight.clone(),
            "view": weight.view(4, -1),
            "deepcopy": copy.deepcopy(weight),
            "parameter": copy.deepcopy(torch.nn.Parameter(weight)),
        }
        plain = torch.ones(2) * 2  # no fake input: left alone
    for name, tensor in derived.items():
        assert is_fake(tensor), name
        assert str(tensor.untyped_storage().device) == "cuda:0", name
    assert isinstance(derived["parameter"], torch.nn.Parameter)
    assert not is_fake(plain)
    assert torch.equal(derived["clone"] * 1, weight * 1)
    # Outside, derived tensors are plain CPU tensors again.
    assert not is_fake(weight * 2)


def test_meta_is_a_real_move() -> None:
    moved = on_device(torch.ones(3), "meta")
    assert moved.device.type == "meta" and not is_fake(moved)


@pytest.mark.parametrize(
    "read",
    [
        # The host reads of #21545: ctypes over storage.data_ptr().
        "ctypes.string_at(t.untyped_storage().data_ptr(), 4)",
        "ctypes.string_at(t.contiguous().untyped_storage().data_ptr(), 4)",
    ],
)
def test_a_host_read_crashes(read: str) -> None:
    code = (
        "import ctypes, torch\n"
        "from executorch_device_guard.check.fake_device import on_device, "
        "keep_device_claims\n"
        "with keep_device_claims():\n"
        "    t = on_device(torch.ones(4, 4).t(), 'cuda:0')\n"
        f"    {read}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -signal.SIGSEGV, result.stderr
    assert "Fatal Python error: Segmentation fault" in result.stderr
