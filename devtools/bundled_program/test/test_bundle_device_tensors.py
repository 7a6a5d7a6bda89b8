# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

# pyre-strict

import unittest
from typing import List

import torch
from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
from executorch.devtools.bundled_program.core import BundledProgram
from executorch.devtools.bundled_program.serialize import (
    serialize_from_bundled_program_to_flatbuffer,
)
from executorch.exir import to_edge
from parameterized import parameterized
from torch.export import export

# Storages that report an accelerator over host memory (see _DeviceStorage).
DEVICES = [("cuda:0",), ("mps:0",)]


class _DeviceStorage(torch.UntypedStorage):
    """Readable host memory whose storage reports another device.

    MethodTestCase copies a tensor on a device to CPU; a storage still on a
    device when the bundled program reads it (here, under a CPU tensor) must
    be refused. These bytes stay readable, so code that reads them without
    checking the device serializes them, and the test fails instead of
    crashing.
    """

    claimed_device: torch.device

    @property
    def device(self) -> torch.device:
        return self.claimed_device


def _claim_device(tensor: torch.Tensor, device: str) -> torch.Tensor:
    storage = _DeviceStorage(tensor.untyped_storage().nbytes())
    storage.claimed_device = torch.device(device)
    storage.copy_(tensor.untyped_storage())
    return torch.empty(0, dtype=tensor.dtype).set_(
        storage, tensor.storage_offset(), tensor.size(), tensor.stride()
    )


def _device_error(tensor: str, device: str) -> str:
    return (
        f"Bundled {tensor} of test case 0 of method 'forward' is on device "
        f"{device}, but bundled inputs and expected outputs are serialized from "
        "CPU memory. Move it to CPU first."
    )


class LinearReLU(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


class TestBundleDeviceTensors(unittest.TestCase):
    model: LinearReLU
    input: torch.Tensor
    output: torch.Tensor

    def setUp(self) -> None:
        torch.manual_seed(0)
        self.model = LinearReLU().eval()
        self.input = torch.randn(2, 4)
        with torch.no_grad():
            self.output = self.model(self.input)

    def _bundle(
        self, inputs: List[torch.Tensor], expected_outputs: List[torch.Tensor]
    ) -> BundledProgram:
        program = to_edge(
            export(self.model, (self.input,), strict=True)
        ).to_executorch()
        case = MethodTestCase(inputs=inputs, expected_outputs=expected_outputs)
        return BundledProgram(program, [MethodTestSuite("forward", [case])])

    def _on_device(self, tensor: torch.Tensor, device: str) -> torch.Tensor:
        moved = _claim_device(tensor, device)
        # Each case's premise: the bundled program will read a storage on this
        # device.
        self.assertEqual(str(moved.untyped_storage().device), device)
        return moved

    @parameterized.expand(DEVICES)
    def test_expected_output_on_device_raises(self, device: str) -> None:
        bundled = self._bundle([self.input], [self._on_device(self.output, device)])
        with self.assertRaises(RuntimeError) as context:
            serialize_from_bundled_program_to_flatbuffer(bundled)
        self.assertEqual(
            str(context.exception), _device_error("expected output 0", device)
        )

    @parameterized.expand(DEVICES)
    def test_input_on_device_raises(self, device: str) -> None:
        bundled = self._bundle([self._on_device(self.input, device)], [self.output])
        with self.assertRaises(RuntimeError) as context:
            serialize_from_bundled_program_to_flatbuffer(bundled)
        self.assertEqual(str(context.exception), _device_error("input 0", device))

    @parameterized.expand([("input",), ("expected_output",)])
    def test_meta_tensor_is_refused(self, which: str) -> None:
        meta = torch.empty(2, 4, device="meta")
        inputs = [meta] if which == "input" else [self.input]
        outputs = [meta] if which == "expected_output" else [self.output]
        with self.assertRaisesRegex(
            AssertionError, "is on device meta, which has no data to bundle"
        ):
            MethodTestCase(inputs=inputs, expected_outputs=outputs)

    def test_cpu_tensors_are_kept(self) -> None:
        case = MethodTestCase(inputs=[self.input], expected_outputs=[self.output])
        self.assertIs(case.inputs[0], self.input)
        self.assertIs(case.expected_outputs[0], self.output)

    def test_cpu_tensors_are_serialized(self) -> None:
        bundled = self._bundle([self.input], [self.output])
        (test_case,) = bundled.serialize_to_schema().method_test_suites[0].test_cases
        self.assertEqual(test_case.inputs[0].val.data, self.input.numpy().tobytes())
        self.assertEqual(
            test_case.expected_outputs[0].val.data, self.output.numpy().tobytes()
        )
