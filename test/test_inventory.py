# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The constants a row lists: by the model's own names, with dtype, shape
and device."""

import torch

from executorch_device_guard.check import inventory


class Covered(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.empty = torch.nn.Parameter(torch.empty(0))
        self.register_buffer("index", torch.tensor([2, 0, 1]))


def test_a_constant_the_export_made_is_named_after_the_models_tensor() -> None:
    model = Covered()
    tables = [
        {"linear.weight": model.linear.weight, "index": model.index},
        # What torch.export or a pass made of the empty parameter.
        {"_lifted_tensor_constant0": torch.empty(0), "_other": torch.ones(7)},
    ]
    found = inventory.describe(tables, model, "cuda:0")
    assert found == [
        {
            "name": "linear.weight",
            "dtype": "float32",
            "shape": [3, 4],
            "device": "cuda:0",
        },
        {"name": "index", "dtype": "int64", "shape": [3], "device": "cuda:0"},
        {
            "name": "empty",
            "dtype": "float32",
            "shape": [0],
            "device": "cuda:0",
            "exported_as": "_lifted_tensor_constant0",
        },
        {"name": "_other", "dtype": "float32", "shape": [7], "device": "cuda:0"},
    ]
    assert inventory.line(found[2]) == (
        "empty: float32 [0] on cuda:0 (exported as _lifted_tensor_constant0)"
    )


def test_merge_keeps_each_program_name_once() -> None:
    known = [{"name": "a", "dtype": "float32", "shape": [], "device": "cpu"}]
    inventory.merge(
        known,
        [
            {"name": "a", "dtype": "float32", "shape": [], "device": "cpu"},
            {"name": "b", "dtype": "bool", "shape": [2], "device": "cpu"},
        ],
    )
    assert [entry["name"] for entry in known] == ["a", "b"]
