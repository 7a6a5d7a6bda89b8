# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Tensors whose storage claims a device, over host memory that faults on read.

This reproduces #21545 without an accelerator: ExecuTorch's stock emitter reads
such a storage's data_ptr() on the host and the process dies with SIGSEGV, as it
does for a real CUDA tensor. The upstream test module
(exir/emit/test/test_emit_device_constants.py) builds the same thing.
"""

from __future__ import annotations

import ctypes
import mmap
import sys

import torch


class NoAccessMemory:
    """Reserved host address space that faults on any read or write."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        if sys.platform == "win32":
            kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
            kernel32.VirtualAlloc.restype = ctypes.c_void_p
            kernel32.VirtualAlloc.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_ulong,
                ctypes.c_ulong,
            ]
            mem_reserve, page_noaccess = 0x2000, 0x01
            address = kernel32.VirtualAlloc(None, nbytes, mem_reserve, page_noaccess)
        else:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_long,
            ]
            prot_none = 0
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
            address = libc.mmap(None, nbytes, prot_none, flags, -1, 0)
            if address == ctypes.c_void_p(-1).value:
                address = None
        if not address:
            raise OSError(ctypes.get_errno(), "could not reserve no-access memory")
        self.address: int = address


class DeviceStorageTensor(torch.Tensor):
    """A CPU tensor whose storage claims to be on another device."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage

    def __deepcopy__(self, memo: dict) -> "torch.Tensor":
        # A copy of a device tensor is on the same device: keep the claim.
        return self


class DeviceStorageParameter(torch.nn.Parameter):
    """The same, for parameters: exported programs check their type."""

    device_storage: torch.UntypedStorage

    def untyped_storage(self) -> torch.UntypedStorage:
        return self.device_storage

    def __deepcopy__(self, memo: dict) -> "torch.Tensor":
        # A copy of a device tensor is on the same device: keep the claim.
        return self


def on_device(
    tensor: torch.Tensor, device: str, memory: NoAccessMemory
) -> torch.Tensor:
    """``tensor`` with its storage on ``device`` (a real move for ``meta``)."""
    is_parameter = isinstance(tensor, torch.nn.Parameter)
    if device == "meta":
        moved = tensor.detach().to("meta")
        return (
            torch.nn.Parameter(moved, tensor.requires_grad) if is_parameter else moved
        )
    nbytes = tensor.untyped_storage().nbytes()
    if nbytes > memory.nbytes:
        raise ValueError(f"{nbytes} bytes do not fit in {memory.nbytes}")
    cls = DeviceStorageParameter if is_parameter else DeviceStorageTensor
    fake = torch.Tensor._make_subclass(cls, tensor.detach(), tensor.requires_grad)
    fake.device_storage = torch._C._construct_storage_from_data_pointer(
        memory.address, torch.device(device), nbytes
    )
    return fake
