# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The user's model, loaded once in each warm parent, for every export child.

Importing a model's file and building the model can take seconds (``import
transformers`` and a decoder built from its config: 4 to 6 s on two cores),
and ``check`` runs two dozen exports of it. :func:`load`, the last preload
step of a warm parent (warm.py), seeds every generator (:func:`seed`) and
loads the model named by ``$EXECUTORCH_DEVICE_GUARD_MODEL`` from the
folder ``$EXECUTORCH_DEVICE_GUARD_MODEL_CWD``, on one thread; each child
forked afterwards :func:`take` s its own copy-on-write copy, with the
generators where loading left them, exactly as if it had seeded and loaded
the model itself. Stock's and patched's parents seed alike, so they build
the same weights. On a CPU build of torch, the parent also makes what
every export of the model from CPU starts with alike (:func:`prepared`).

Whatever goes wrong here is left to the children: a model that fails to
load is not kept, and each child loads it itself and reports why, as a
fresh interpreter would.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from typing import Any, Dict, Optional, Set, Tuple

MODEL = "EXECUTORCH_DEVICE_GUARD_MODEL"
MODEL_CWD = "EXECUTORCH_DEVICE_GUARD_MODEL_CWD"
# The export paths (child.py's flows) that will run, comma-separated.
FLOWS = "EXECUTORCH_DEVICE_GUARD_FLOWS"
# How long the parent may spend on _prepare (check's --timeout), in seconds.
TIMEOUT = "EXECUTORCH_DEVICE_GUARD_TIMEOUT"
STEP = "executorch_device_guard.check.preloaded:load"

_loaded: Dict[str, Any] = {}
# What every export of the model from CPU starts with, made once (_prepare).
_prepared: Dict[str, Any] = {}


def seed() -> None:
    """Seeds torch's, Python's and NumPy's generators alike in every process,
    whichever of them the model draws its weights from. torch imports numpy
    where it is installed, so seeding it imports nothing new."""
    import torch

    torch.manual_seed(0)
    random.seed(0)
    try:
        import numpy
    except ImportError:
        pass
    else:
        numpy.random.seed(0)


def load() -> None:
    """The warm parent's preload step: loads the model once, if one is named."""
    spec = os.environ.get(MODEL)
    if not spec:
        return
    import torch
    from executorch_device_guard.check import models

    try:
        import tqdm
    except ImportError:
        pass
    else:
        # A progress bar's monitor thread would stop the parent from forking.
        tqdm.tqdm.monitor_interval = 0
    cwd = os.environ.get(MODEL_CWD) or os.getcwd()
    here, path = os.getcwd(), list(sys.path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no thread pool in a process that forks
    # The model's own code runs here (its import, its build, its forward
    # that torch.export traces): one that hangs must not hold the parent,
    # whose exports wait for it. After check's --timeout it is abandoned,
    # and each child does it again, under its own.
    try:
        limit = float(os.environ.get(TIMEOUT) or 0)
    except ValueError:
        limit = 0.0
    handler = signal.signal(signal.SIGALRM, _too_long)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        # As in an export child: the user's folder first on the path.
        os.chdir(cwd)
        sys.path.insert(0, cwd)
        seed()
        _loaded[spec] = models.load_model(spec)
        flows = set(filter(None, os.environ.get(FLOWS, "").split(",")))
        _prepare(_loaded[spec], flows)
    except _TooLong:
        pass  # what is not done by now, each child does
    except (Exception, SystemExit):  # noqa: B902 - each child tells it
        _loaded.clear()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler)
        sys.path[:] = path
        os.chdir(here)
        torch.set_num_threads(threads)


def _prepare(model: Any, flows: Set[str]) -> None:
    """The steps that every export of ``model`` from CPU on ``flows``
    repeats alike, whatever the device (the tool moves the constants
    later): ``torch.export``; the emitter's ``to_edge_transform_and_lower``;
    the bundled program's ``to_edge(...).to_executorch()``. A decoder's
    lowering takes seconds, and 10 emitter and 6 bundled exports would each
    repeat it. Each child takes its own copy-on-write copy (:func:`prepared`).

    Not on a GPU build of torch, where an export's fake tensors start a
    thread (warmup.py): there each child makes them. A step that fails is
    left to the children, which report it in their own step. The random
    generators are left where loading the model left them.
    """
    import copy

    import torch

    if torch.version.cuda is not None or torch.version.hip is not None:
        return
    states = _generators()
    try:
        exported = torch.export.export(
            model.module,
            model.args,
            kwargs=model.kwargs,
            dynamic_shapes=model.dynamic_shapes,
        )
        _prepared["torch.export"] = exported
        if "emit" in flows:
            from executorch.exir import to_edge_transform_and_lower

            _prepared["emit"] = to_edge_transform_and_lower(copy.deepcopy(exported))
        if "bundled" in flows and not model.kwargs:
            from executorch.exir import to_edge

            _prepared["bundled"] = to_edge(copy.deepcopy(exported)).to_executorch()
    except Exception:  # noqa: B902 - each child does it, and reports
        _prepared.clear()
    finally:
        _generators(states)


class _TooLong(BaseException):
    """_prepare took longer than check's --timeout (a BaseException: the
    model's own ``except Exception`` must not swallow it)."""


def _too_long(*_: Any) -> None:
    raise _TooLong()


def _generators(states: Optional[Tuple[Any, ...]] = None) -> Tuple[Any, ...]:
    """The random generators' states; with ``states``, sets them back."""
    import torch

    try:
        import numpy
    except ImportError:
        numpy = None
    if states is not None:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        if numpy is not None:
            numpy.random.set_state(states[2])
        return states
    return (
        torch.get_rng_state(),
        random.getstate(),
        numpy.random.get_state() if numpy is not None else None,
    )


def prepared(step: str) -> Any:
    """What the warm parent made of step ``step`` ("torch.export", "emit",
    "bundled") for the model exported from CPU, or None: the caller makes it."""
    return _prepared.pop(step, None)


def take(spec: str) -> Any:
    """The model that this process's warm parent loaded for ``spec``
    (models.LoadedModel), or None: the caller seeds and loads it."""
    return _loaded.pop(spec, None)
