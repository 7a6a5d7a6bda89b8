# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What a warm parent computes once, so that no export child computes it again.

XNNPACK's and Vulkan's lowering match fixed pattern graphs, each made by a
``torch.export`` of a small module: the first XNNPACK export of a process
spends about 4 s making them (kept by ``functools.lru_cache``), every
Vulkan export about 5 s (its registry makes them anew on each of its two
calls). :func:`main` makes them in the warm parent, before it forks, and
:func:`keep_vulkan_patterns` keeps Vulkan's, so that a child inherits them
all. The graphs only serve as patterns to match, and the same graphs are
made every time, so the exported programs are the same bytes.

Making them must leave the parent with one thread (warm.py): tqdm's
monitor thread, which a progress bar starts, is turned off, and torch runs
on one thread meanwhile. A GPU build of torch starts a thread for any
export, so there the children make them. Every step is optional: a release without these
modules has nothing to warm.
"""

from __future__ import annotations

from typing import Any, Callable, List


def keep_vulkan_patterns() -> None:
    """Vulkan's pattern graphs made once per process, not once per call."""
    try:
        from executorch.backends.vulkan.patterns.pattern_registry import (
            fusable_patterns,
        )
    except ImportError:
        return
    for entry in fusable_patterns.values():
        make = getattr(entry, "get_graphs_fn", None)
        if make is not None and not getattr(make, "_device_guard_kept", False):
            entry.get_graphs_fn = _kept(make)


def _kept(make: Callable[[], List[Any]]) -> Callable[[], List[Any]]:
    graphs: List[List[Any]] = []

    def kept() -> List[Any]:
        if not graphs:
            graphs.append(make())
        return list(graphs[0])

    kept._device_guard_kept = True  # type: ignore[attr-defined]
    return kept


def _no_tqdm_monitor() -> None:
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def _xnnpack_patterns() -> None:
    try:
        from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa
    except ImportError:
        return
    bilinear_2d.get_graphs_dict()
    sdpa.get_graphs()


def _vulkan_patterns() -> None:
    keep_vulkan_patterns()
    try:
        from executorch.backends.vulkan.patterns import all_fusable_graph_patterns
    except ImportError:
        return
    all_fusable_graph_patterns()


def main() -> None:
    """Makes every pattern graph now (in a warm parent, before it forks)."""
    import torch

    _no_tqdm_monitor()
    if torch.version.cuda is not None or torch.version.hip is not None:
        # With a GPU build, torch.export's fake tensors start the device guard,
        # and with it a driver thread (gpu/cuda_start_probe.py on an H200),
        # after which the parent may not fork: each child makes the graphs.
        keep_vulkan_patterns()
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _xnnpack_patterns()
        _vulkan_patterns()
    finally:
        torch.set_num_threads(threads)
