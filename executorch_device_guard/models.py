# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Built-in models, and loading a user's model from ``module:attr`` or a file.

A model spec resolves to ``(module, example_inputs)``: either that tuple itself
or a zero-argument callable returning it.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Callable, Dict, Tuple

import torch

ModelAndInputs = Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]


def issue_model() -> ModelAndInputs:
    """The reproducer's model from ExecuTorch issue #21545."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    return model, (torch.ones(2, 4),)


class _WithBuffers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))
        self.register_buffer("shift", torch.arange(4, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + self.shift


def buffers_model() -> ModelAndInputs:
    return _WithBuffers().eval(), (torch.ones(2, 4),)


def channels_last_conv_model() -> ModelAndInputs:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())
    model = model.eval().to(memory_format=torch.channels_last)
    return model, (torch.ones(1, 3, 8, 8).to(memory_format=torch.channels_last),)


BUILTIN: Dict[str, Callable[[], ModelAndInputs]] = {
    "issue": issue_model,
    "buffers": buffers_model,
    "channels_last_conv": channels_last_conv_model,
}


def load(spec: str) -> ModelAndInputs:
    """Resolves a built-in name, ``package.module:attr`` or ``path/file.py[:attr]``."""
    if spec in BUILTIN:
        return BUILTIN[spec]()
    target, _, attr = spec.partition(":")
    if target.endswith(".py") or Path(target).is_file():
        path = Path(target).resolve()
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot load {path}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    value = getattr(module, attr or "model")
    if callable(value) and not isinstance(value, torch.nn.Module):
        value = value()
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], torch.nn.Module)
    ):
        raise ValueError(
            f"{spec} must be a (torch.nn.Module, example_inputs) tuple or a "
            "zero-argument callable returning one"
        )
    model, inputs = value
    return model, tuple(inputs)
