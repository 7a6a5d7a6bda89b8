# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One export in a process of its own, since stock ExecuTorch may kill it.

    python -m executorch_device_guard.child --device fake:cuda:0 --model issue

puts the model's tensors on the device, runs one export path, and prints one
``RESULT_TAG`` line of JSON. A crash prints nothing of the kind: the parent
reads the signal.

Devices: ``cpu``; ``meta``; ``fake:<device>`` (storage that claims <device>
over host memory that faults on read); ``cuda`` (a real GPU: the model is
moved there before export, as in issue #21545).

Paths (``--flow``):
  emit              to_edge_transform_and_lower(...).to_executorch(): the emitter
  xnnpack           the same, lowered with XnnpackPartitioner
  bundled           a BundledProgram whose expected outputs are on the device
  cuda-partitioner  a CUDA model lowered with CudaPartitioner (the supported way)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

RESULT_TAG = "DEVICE_GUARD_RESULT "
FLOWS = ["emit", "xnnpack", "bundled", "cuda-partitioner"]


class NotApplicable(Exception):
    """This (path, device) pair cannot be run; reported, not failed."""


def _memory_for(tensors: List[Any]) -> Any:
    from executorch_device_guard.fake_device import NoAccessMemory

    largest = max((t.untyped_storage().nbytes() for t in tensors), default=0)
    # Address space only: nothing is ever committed behind it.
    return NoAccessMemory(max(largest, 1) + 4096)


def _tables_to_device(tables: List[Dict[str, Any]], device: str) -> None:
    from executorch_device_guard.fake_device import on_device

    tensors = [v for t in tables for v in t.values() if hasattr(v, "data_ptr")]
    memory = _memory_for(tensors)
    for table in tables:
        for name, value in list(table.items()):
            if hasattr(value, "data_ptr"):
                table[name] = on_device(value, device, memory)


def _programs_tables(programs: List[Any]) -> List[Dict[str, Any]]:
    return [t for ep in programs for t in (ep.state_dict, ep.constants)]


def _target_device(device: str) -> str:
    return device[len("fake:") :] if device.startswith("fake:") else device


def _emit(model: Any, inputs: Any, device: str, external_constants: bool) -> Any:
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from torch.export import export

    edge = to_edge_transform_and_lower(export(model, inputs))
    if device.startswith("fake:") or device == "meta":
        programs = [edge.exported_program(name) for name in edge.methods]
        _tables_to_device(_programs_tables(programs), _target_device(device))
    config = ExecutorchBackendConfig(external_constants=external_constants)
    return edge.to_executorch(config)


def _xnnpack(model: Any, inputs: Any, device: str) -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import export

    if device == "meta":
        raise NotApplicable("meta weights fail in lowering's decompositions first")
    program = export(model, inputs)
    if device.startswith("fake:"):
        # Before lowering: XNNPACK reads the weights while it lowers.
        _tables_to_device(_programs_tables([program]), _target_device(device))
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    return edge.to_executorch()


def _bundled(model: Any, inputs: Any, device: str) -> Any:
    """A BundledProgram whose expected outputs were computed on the device."""
    import torch
    from executorch.devtools.bundled_program.config import (
        MethodTestCase,
        MethodTestSuite,
    )
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )
    from executorch.exir import to_edge
    from executorch.exir.tensor import TensorSpec
    from executorch_device_guard.fake_device import on_device
    from torch.export import export

    # run() leaves the model on CPU for this path: the program is exported from
    # CPU, and only the expected outputs are computed on the device.
    program = to_edge(export(model, inputs)).to_executorch()
    where = "cuda" if device == "cuda" else "cpu"
    with torch.no_grad():
        expected = model.to(where)(*(i.to(where) for i in inputs))
    outputs = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if device == "meta":
        outputs = [o.to("meta") for o in outputs]
    case = MethodTestCase(inputs=list(inputs), expected_outputs=outputs)
    bundled = BundledProgram(program, [MethodTestSuite("forward", [case])])
    if device.startswith("fake:"):
        # BundledProgram takes only plain torch.Tensor values, which cannot
        # claim a fake device: this is the function that reads them.
        fake = on_device(outputs[0], _target_device(device), _memory_for(outputs))
        bundled._emit_bundled_tensor(TensorSpec.from_tensor(fake, const=True), [])
        raise AssertionError("a fake-device tensor was read without error")
    return serialize_from_bundled_program_to_flatbuffer(bundled)


def _cuda_partitioner(model: Any, inputs: Any) -> Any:
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from torch.export import export

    specs = [CudaBackend.generate_method_name_compile_spec("forward")]
    edge = to_edge_transform_and_lower(
        export(model, inputs),
        partitioner=[CudaPartitioner(specs)],
        compile_config=EdgeCompileConfig(
            _check_ir_validity=False, _skip_dim_order=True
        ),
    )
    return edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=True))


def run(
    device: str, model_spec: str, external_constants: bool, out: Path, flow: str
) -> Dict:
    import torch
    from executorch_device_guard import models

    # Seeded, so that stock and patched children export the same weights.
    torch.manual_seed(0)
    model, inputs = models.load(model_spec)
    if device == "cuda" and flow != "bundled":
        model = model.to("cuda")
        inputs = tuple(i.to("cuda") for i in inputs)
    if flow == "emit":
        result = _emit(model, inputs, device, external_constants)
    elif flow == "xnnpack":
        result = _xnnpack(model, inputs, device)
    elif flow == "bundled":
        result = _bundled(model, inputs, device)
    else:
        result = _cuda_partitioner(model, inputs)

    if isinstance(result, bytes):
        files = {"bundled_program.bpte": result}
    else:
        files = {"program.pte": result.buffer}
        # 1.5.1 keeps external data in _tensor_data; later releases add data_files.
        for name, cord in (getattr(result, "_tensor_data", None) or {}).items():
            files[name] = bytes(cord)
    out.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, data in sorted(files.items()):
        (out / name).write_bytes(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return {"outcome": "ok", "files": digests}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--model", default="issue")
    parser.add_argument("--external-constants", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--flow", choices=FLOWS, default="emit")
    args = parser.parse_args(argv)
    code = 0
    try:
        result = run(
            args.device, args.model, args.external_constants, args.out, args.flow
        )
    except NotApplicable as e:
        result = {"outcome": "n/a", "message": str(e)}
    except Exception as e:  # noqa: B902 - reported to the parent, then exit 1
        import traceback

        traceback.print_exc()
        lines = str(e).strip().splitlines() or [""]
        result = {"outcome": "error", "type": type(e).__name__, "message": lines[0]}
        code = 1
    import executorch.exir.emit._emitter as emitter

    result["emitter"] = emitter.__file__
    print(RESULT_TAG + json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
