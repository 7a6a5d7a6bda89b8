# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Tensors whose storage claims a device, over host memory that faults on read.

This reproduces #21545 without an accelerator. A fake-device tensor is a plain
``torch.Tensor`` whose storage is a :class:`DeviceStorage`: its bytes are real
host memory, so every operator computes on them as usual, but the storage
says it is on ``cuda:0`` (or another device), and its ``data_ptr()`` points at
reserved address space that faults on any access. ExecuTorch's stock emitter,
XNNPACK and bundled program read constants through ``storage.data_ptr()`` on
the host, so they die with SIGSEGV exactly as for a real CUDA tensor.

A real device tensor stays on its device through every operator: BatchNorm
fusion's fused weights, a constant folded from device weights, a weight made
contiguous or channels-last for XNNPACK are all device tensors. Inside
:func:`keep_device_claims`, a tensor that an operator derives from a
fake-device tensor gets a fake storage on the same device too, so the claim
survives every pass on the way to the read.

The tensor itself reports ``cpu``: Python code that made new tensors on its
device (``torch.empty(..., device=weight.device)``) would fail without one.
So a guard that checks ``tensor.device`` lets it through to the read; one
that checks the storage it reads refuses it, as it does a real device tensor.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import sys
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map


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


class DeviceStorage(torch.UntypedStorage):
    """Host bytes that claim to be on ``claimed_device``; data_ptr() faults.

    Operators use the real host bytes; Python code that reads the storage
    through ``data_ptr()`` reads no-access memory. ``cpu()`` copies the real
    bytes to a plain CPU storage, as a device-to-host copy would.
    """

    claimed_device: torch.device
    no_access: NoAccessMemory

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self.claimed_device

    def data_ptr(self) -> int:
        return self.no_access.address

    def clone(self) -> torch.UntypedStorage:  # type: ignore[override]
        # A plain storage: torch's TypedStorage accepts no other type. A tensor
        # copied inside keep_device_claims() gets its claim back.
        return torch.UntypedStorage(self.nbytes()).copy_(self)


def device_storage(source: torch.UntypedStorage, device: str) -> DeviceStorage:
    """A :class:`DeviceStorage` claiming ``device``, holding ``source``'s bytes."""
    nbytes = source.nbytes()
    storage = DeviceStorage(nbytes)
    if nbytes:
        # Copy the real bytes: torch.UntypedStorage.copy_ does not go
        # through Python's data_ptr().
        storage.copy_(source)
    storage.claimed_device = torch.device(device)
    # At least a page, so that even an empty storage faults when read.
    storage.no_access = NoAccessMemory(max(nbytes, 1) + 4096)
    return storage


def is_fake(tensor: Any) -> bool:
    """Whether ``tensor`` is a tensor on a fake device."""
    return isinstance(tensor, torch.Tensor) and isinstance(
        _storage_or_none(tensor), DeviceStorage
    )


def _storage_or_none(tensor: torch.Tensor) -> Optional[torch.UntypedStorage]:
    try:
        return tensor.untyped_storage()
    except Exception:  # noqa: B902 - tensors without a storage raise many kinds
        # Functional, sparse and other tensors without a plain storage.
        return None


def _rewrap(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """``tensor`` (a plain CPU tensor) as a tensor of the same values on ``device``."""
    storage = device_storage(tensor.untyped_storage(), device)
    with torch.no_grad():
        fake = torch.empty(0, dtype=tensor.dtype).set_(
            storage, tensor.storage_offset(), tensor.size(), tensor.stride()
        )
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(fake, requires_grad=tensor.requires_grad)
    return fake.requires_grad_(tensor.requires_grad) if tensor.is_leaf else fake


def on_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    """``tensor`` moved to ``device``: a real move for ``meta``, else a fake one."""
    if device == "meta":
        moved = tensor.detach().to("meta")
        if isinstance(tensor, torch.nn.Parameter):
            return torch.nn.Parameter(moved, tensor.requires_grad)
        return moved
    return _rewrap(tensor, device)


def _can_rewrap(value: Any) -> bool:
    return (
        type(value) in (torch.Tensor, torch.nn.Parameter)
        and value.device.type == "cpu"
        and value.layout == torch.strided
        and not value.is_quantized
    )


class _KeepDeviceClaims(TorchFunctionMode):
    """Gives a fake storage to every tensor derived from a fake-device tensor."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if torch.compiler.is_compiling():
            # Dynamo tracing a graph (XNNPACK's passes export pattern graphs):
            # no constant is made here, and some Dynamo versions cannot trace
            # the checks below (torch 2.11: isinstance on a storage).
            return result
        if func is torch.Tensor.__deepcopy__:
            # deepcopy(tensor, memo): the copy must also be the memo's entry.
            copied = _claimed([args[0]], result)
            if copied is not result and len(args) > 1:
                args[1][id(args[0])] = copied
            return copied
        return _claimed(tree_flatten((args, kwargs))[0], result)


def _claimed(inputs: List[Any], result: Any) -> Any:
    """``result``, with a fake storage on each new tensor if an input has one."""
    inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
    storages = [_storage_or_none(x) for x in inputs]
    claims = [s.claimed_device for s in storages if isinstance(s, DeviceStorage)]
    if not claims:
        return result
    device = str(claims[0])
    shared = {s._cdata for s in storages if s is not None}

    def rewrap(value: Any) -> Any:
        if not _can_rewrap(value):
            return value
        storage = _storage_or_none(value)
        if storage is None or isinstance(storage, DeviceStorage):
            return value
        if storage._cdata in shared:
            # A view of an input: the same memory as before.
            return value
        return _rewrap(value, device)

    return tree_map(rewrap, result)


@contextlib.contextmanager
def keep_device_claims() -> Iterator[None]:
    """Inside, operators on fake-device tensors return fake-device tensors."""
    with _KeepDeviceClaims():
        yield


def tables_on_device(tables: List[Dict[str, Any]], device: str) -> None:
    """Moves every tensor of each name -> value table to ``device``, in place."""
    for table in tables:
        for name, value in list(table.items()):
            if isinstance(value, torch.Tensor):
                table[name] = on_device(value, device)
