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
the same weights.

Whatever goes wrong here is left to the children: a model that fails to
load is not kept, and each child loads it itself and reports why, as a
fresh interpreter would.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any, Dict

MODEL = "EXECUTORCH_DEVICE_GUARD_MODEL"
MODEL_CWD = "EXECUTORCH_DEVICE_GUARD_MODEL_CWD"
STEP = "executorch_device_guard.preloaded:load"

_loaded: Dict[str, Any] = {}


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
    from executorch_device_guard import models

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
    try:
        # As in an export child: the user's folder first on the path.
        os.chdir(cwd)
        sys.path.insert(0, cwd)
        seed()
        _loaded[spec] = models.load_model(spec)
    except (Exception, SystemExit):  # noqa: B902 - each child tells it
        _loaded.clear()
    finally:
        sys.path[:] = path
        os.chdir(here)
        torch.set_num_threads(threads)


def take(spec: str) -> Any:
    """The model that this process's warm parent loaded for ``spec``
    (models.LoadedModel), or None: the caller seeds and loads it."""
    return _loaded.pop(spec, None)
