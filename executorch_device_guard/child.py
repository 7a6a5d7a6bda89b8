# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One export in a process of its own, since the stock emitter may kill it.

    python -m executorch_device_guard.child --device fake:cuda:0 --model issue

exports the model with ``to_edge_transform_and_lower(...).to_executorch()``
after putting its constants on the device, and prints one ``RESULT_TAG`` line
of JSON. A crash prints nothing of the kind: the parent reads the signal.

Devices: ``cpu``; ``meta``; ``fake:<device>`` (storage that claims <device>
over host memory that faults on read); ``cuda`` (a real GPU: the model is
moved there before export, as in the issue).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

RESULT_TAG = "DEVICE_GUARD_RESULT "


def _constants_to_device(edge: Any, device: str) -> None:
    from executorch_device_guard.fake_device import NoAccessMemory, on_device

    programs = [edge.exported_program(name) for name in edge.methods]
    tables = [t for ep in programs for t in (ep.state_dict, ep.constants)]
    tensors = [v for table in tables for v in table.values() if hasattr(v, "data_ptr")]
    largest = max((t.untyped_storage().nbytes() for t in tensors), default=0)
    # Address space only: nothing is ever committed behind it.
    memory = NoAccessMemory(max(largest, 1) + 4096)
    for table in tables:
        for name, value in list(table.items()):
            if hasattr(value, "data_ptr"):
                table[name] = on_device(value, device, memory)


def _cuda_partitioner_program(model: Any, inputs: Any) -> Any:
    """The supported way to export a CUDA model: lower it to the CUDA backend."""
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
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch_device_guard import models
    from torch.export import export

    # Seeded, so that stock and patched children export the same weights.
    torch.manual_seed(0)
    model, inputs = models.load(model_spec)
    if device == "cuda":
        model = model.to("cuda")
        inputs = tuple(i.to("cuda") for i in inputs)
    if flow == "cuda-partitioner":
        program = _cuda_partitioner_program(model, inputs)
    else:
        edge = to_edge_transform_and_lower(export(model, inputs))
        if device.startswith("fake:"):
            _constants_to_device(edge, device[len("fake:") :])
        elif device == "meta":
            _constants_to_device(edge, "meta")
        config = ExecutorchBackendConfig(external_constants=external_constants)
        program = edge.to_executorch(config)
    files = {"program.pte": program.buffer}
    # 1.5.1 keeps external data in _tensor_data; later releases add data_files.
    for name, cord in (getattr(program, "_tensor_data", None) or {}).items():
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
    parser.add_argument("--flow", choices=["emit", "cuda-partitioner"], default="emit")
    args = parser.parse_args(argv)
    try:
        result = run(
            args.device, args.model, args.external_constants, args.out, args.flow
        )
        code = 0
    except Exception as e:  # noqa: B902 - reported to the parent, then exit 1
        lines = str(e).strip().splitlines() or [""]
        result = {"outcome": "error", "type": type(e).__name__, "message": lines[0]}
        code = 1
        import traceback

        traceback.print_exc()
    import executorch.exir.emit._emitter as emitter

    result["emitter"] = emitter.__file__
    print(RESULT_TAG + json.dumps(result), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
