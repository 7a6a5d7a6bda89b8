# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One export in a process of its own, since stock ExecuTorch may kill it.

    python -m executorch_device_guard.check.child --device fake:cuda:0 --model issue \
        --out OUT --result RESULT

puts the model's tensors on the device, runs one export path, and reports to
the file RESULT, a channel the model's own output cannot reach (its stdout
and stderr are the user's): one JSON object per line, first
``{"emitter": PATH, "served": {...}}``, the ExecuTorch emitter this process
imported and what the import hook served it, by module (None where the hook
is off; the parent checks both against the side's), then ``{"stage": "export"}``, then
``{"stage": "device"}`` once the tool has put the tensors on the device, then
``{"result": {...}}``. A crash writes no result: the parent reads the signal,
and the last stage says where it happened.

The stage says how far the export got: ``export`` before the tool put
anything on the device (torch.export and lowering; all of a ``cpu`` case),
``device`` after. An error result carries it too. An error or a crash in the
``export`` stage does not depend on the device, or on the patch.

Devices: ``cpu``; ``meta``; ``fake:<device>`` (storage that claims <device>
over host memory that faults on read, see fake_device.py); ``cuda`` (a real
GPU: the model is moved there before export, as in issue #21545). Wherever
the model was built, it is moved to CPU for every other device. The tool
moves meta and fake-device constants where ExecuTorch starts on the real
constants: after lowering for the emitter, at the start of XNNPACK's and
Vulkan's preprocess, and the expected outputs of a bundled program. From there on,
tensors derived from them stay on the device.

A failure to load the model or set up the case (``setup-error``), and an
exception from the tool's own code at any stage (``tool-error``: moving the
model, its inputs or its constants, building the bundled test case), are
errors of the tool, never outcomes of the export. Each step of the export
records its name first (``{"step": "torch.export"}``), so that an error or a
crash says where it happened.

Paths (``--flow``):
  emit              to_edge_transform_and_lower(...).to_executorch(): the emitter
  xnnpack           the same, lowered with XnnpackPartitioner
  vulkan            the same, lowered with VulkanPartitioner
  bundled           a BundledProgram whose expected outputs are on the device
  cuda-partitioner  a CUDA model lowered with CudaPartitioner (the supported way)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

FLOWS = ["emit", "xnnpack", "vulkan", "bundled", "cuda-partitioner"]
OUTCOMES = ("ok", "error", "n/a", "setup-error", "tool-error")

# How far the export got: "export" until the tool puts tensors on the device.
_stage = ["export"]
# The result file, where each stage is recorded as it starts (a crash writes
# no result, but leaves its stage).
_result_file: List[Path] = []


# The step of the export that runs now, e.g. "torch.export" (see _step).
_current_step = [""]
# What the tool's own code was doing when it failed, if it did (see _tool).
_tool_failure: List[str] = []
# The constants on the guarded path (inventory.py), and the model they
# come from (named by it).
_constants: List[Dict[str, Any]] = []
_model: List[Any] = []


def _record_constants(
    tables: List[Dict[str, Any]], device: str, programs: Tuple[Any, ...] = ()
) -> None:
    """Adds the tensors of ``tables`` to the constants on the guarded path
    and records them all (a crash at the read leaves them); ``programs``,
    whose graphs name a constant that a pass made after the model's
    module that uses it."""
    from executorch_device_guard.check import inventory

    module = _model[0].module if _model else None
    where = None if device in ("cpu", "cuda") else _target_device(device)
    with _tool("listing the constants"):
        found = inventory.describe(tables, module, where, programs)
        inventory.merge(_constants, found)
    if _result_file:
        _report(_result_file[0], {"constants": _constants})


def _on_device() -> None:
    if _stage[0] != "device" and _result_file:
        _report(_result_file[0], {"stage": "device"})
    _stage[0] = "device"


def _step(name: str) -> None:
    """Records that the export's step ``name`` starts (a crash leaves it)."""
    if _current_step[0] != name and _result_file:
        _report(_result_file[0], {"step": name})
    _current_step[0] = name


class Bundle(NamedTuple):
    """A serialized bundled program, and that of the host copies of its
    device test data (None on cpu and meta)."""

    data: bytes
    host_copy: Optional[bytes]


class NotApplicable(Exception):
    """This (path, device) pair cannot be run; reported, not failed."""


class SetupError(Exception):
    """The case could not be set up (model, fake device): an error of the tool."""


class ToolError(Exception):
    """The tool's own code failed: an error of the tool, never of ExecuTorch."""


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


@contextlib.contextmanager
def _tool(what: str) -> Iterator[None]:
    """Any exception inside is the tool's: ToolError, and recorded, so that
    it stays the tool's even if ExecuTorch code that called back into the
    tool (XNNPACK's preprocess) wraps it in an error of its own."""
    try:
        yield
    except (NotApplicable, SetupError, ToolError):
        raise
    except Exception as e:  # noqa: B902 - every failure of the tool's code
        message = f"{what}: {type(e).__name__}: {_first_line(e)}"
        if not _tool_failure:
            _tool_failure.append(message)
        raise ToolError(message) from e


def _raised_here(error: BaseException) -> bool:
    """Whether ``error`` was raised by this file's own code (not by torch,
    ExecuTorch or the model that it called)."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    here = os.path.normcase(os.path.abspath(__file__))
    return os.path.normcase(os.path.abspath(tb.tb_frame.f_code.co_filename)) == here


def _raising_frame(error: BaseException) -> str:
    """``module.function`` that raised ``error``: the same in stock's and
    patched's processes, whose changed files have other names."""
    tb = error.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "?")
    return f"{module}.{tb.tb_frame.f_code.co_name}"


def _root_cause(error: BaseException) -> Optional[BaseException]:
    """The exception ``error`` was raised from, followed to its start (a
    pass manager's "An error occurred when running ..." hides it), or None."""
    seen, cause = {id(error)}, None
    current: Optional[BaseException] = error
    while current is not None:
        nxt = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        cause = current = nxt
    return cause


def _programs_tables(programs: List[Any]) -> List[Dict[str, Any]]:
    return [t for ep in programs for t in (ep.state_dict, ep.constants)]


def _target_device(device: str) -> str:
    return device[len("fake:") :] if device.startswith("fake:") else device


def _is_moved(device: str) -> bool:
    """Whether the tool moves the tensors itself (fake devices and meta)."""
    return device.startswith("fake:") or device == "meta"


def _record_programs(edge: Any, device: str) -> None:
    """Records the constants of every method of ``edge``."""
    programs = [edge.exported_program(name) for name in edge.methods]
    _record_constants(_programs_tables(programs), device, tuple(programs))


def _move_programs(edge: Any, device: str) -> None:
    """Every constant of every method of ``edge`` to ``device``, in place."""
    from executorch_device_guard.check.fake_device import tables_on_device

    with _tool(f"moving the program's constants to {device}"):
        programs = [edge.exported_program(name) for name in edge.methods]
        tables_on_device(_programs_tables(programs), _target_device(device))


def _claims(device: str) -> Any:
    """keep_device_claims() for a moved device; nothing for cpu and cuda."""
    import contextlib

    from executorch_device_guard.check.fake_device import keep_device_claims

    return keep_device_claims() if _is_moved(device) else contextlib.nullcontext()


# Whether the model is exported from CPU: then the warm parent may have
# made its first steps already, alike for every device (preloaded.py).
_from_cpu = [False]


def _prepared(step: str) -> Any:
    """The warm parent's result of ``step`` for the model from CPU, or None."""
    from executorch_device_guard.check import preloaded

    return preloaded.prepared(step) if _from_cpu[0] else None


def _export(model: Any) -> Any:
    from torch.export import export

    _step("torch.export")
    found = _prepared("torch.export")
    if found is not None:
        return found
    return export(
        model.module,
        model.args,
        kwargs=model.kwargs,
        dynamic_shapes=model.dynamic_shapes,
    )


def _emit(model: Any, device: str, external_constants: bool) -> Any:
    """The emitter: the constants move to the device after lowering, so that
    to_executorch()'s passes and the emitter see device tensors."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    edge = _prepared("emit")
    if edge is None:
        exported = _export(model)
        _step("to_edge_transform_and_lower")
        edge = to_edge_transform_and_lower(exported)
    _record_programs(edge, device)
    if _is_moved(device):
        _move_programs(edge, device)
        _on_device()
    config = ExecutorchBackendConfig(external_constants=external_constants)
    _step("to_executorch")
    with _claims(device):
        return edge.to_executorch(config)


def _device_in_preprocess(backend: Any, name: str, device: str) -> None:
    """A delegate's preprocess (``backend``'s, e.g. XnnpackBackend) records
    its program's constants, and gets them on ``device`` (a moved one).

    Lowering traces the program with fake tensors of its own, so the device
    tensors are put in place where the delegate starts on the real
    constants: at the start of preprocess, before its own passes (BatchNorm
    fusion and the rest) and its serializer. Tensors those passes derive stay
    on the device (keep_device_claims), as they would on a real one. Each
    tensor reports cpu: the guard must check the storage it reads.
    """
    from executorch_device_guard.check.fake_device import (
        keep_device_claims,
        tables_on_device,
    )

    original = backend.preprocess

    def preprocess(edge_program: Any, compile_specs: Any) -> Any:
        tables = [edge_program.state_dict, edge_program.constants]
        _record_constants(tables, device, (edge_program,))
        if not _is_moved(device):
            _step(f"{name} preprocess")
            return original(edge_program, compile_specs)
        with _tool(f"moving {name}'s constants to {device}"):
            tables_on_device(tables, _target_device(device))
        _on_device()
        _step(f"{name} preprocess")
        with keep_device_claims():
            return original(edge_program, compile_specs)

    backend.preprocess = staticmethod(preprocess)


def _lowered(
    model: Any,
    device: str,
    backend: Any,
    name: str,
    partitioner: Any,
) -> Any:
    """The model lowered with ``partitioner`` to ``backend`` (the delegate
    ``name``'s BackendDetails), then to_executorch(); on a moved device, the
    constants are there from the start of the delegate's preprocess."""
    from executorch.exir import to_edge_transform_and_lower

    _device_in_preprocess(backend, name, device)
    exported = _export(model)
    # Every constant of the program: the delegate reads those it takes, the
    # emitter the others (a device row stops at the first).
    _record_constants(
        [exported.state_dict, exported.constants], device, (exported,)
    )
    _step(f"to_edge_transform_and_lower with {type(partitioner).__name__}")
    edge = to_edge_transform_and_lower(exported, partitioner=[partitioner])
    _record_programs(edge, device)
    if _is_moved(device):
        # What the delegate did not take is emitted from the device too.
        _move_programs(edge, device)
        _on_device()
    _step("to_executorch")
    with _claims(device):
        return edge.to_executorch()


def _xnnpack(model: Any, device: str) -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    if device == "meta":
        raise NotApplicable("meta weights fail in lowering's decompositions first")
    return _lowered(model, device, XnnpackBackend, "XNNPACK", XnnpackPartitioner())


def _vulkan(model: Any, device: str) -> Any:
    """Lowered with VulkanPartitioner, which needs no Vulkan runtime: its
    serializer reads every constant it takes from the host."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
        VulkanPartitioner,
    )
    from executorch.backends.vulkan.vulkan_preprocess import VulkanBackend

    return _lowered(model, device, VulkanBackend, "Vulkan", VulkanPartitioner())


def _bundled(model: Any, device: str) -> Any:
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
    from executorch_device_guard.check.fake_device import on_device
    from torch.utils._pytree import tree_flatten

    if model.kwargs:
        raise NotApplicable("bundled test cases take positional inputs only")
    # run() leaves the model on CPU for this path: the program is exported from
    # CPU, and only the expected outputs are computed on the device.
    program = _prepared("bundled")
    if program is None:
        exported = _export(model)
        _step("to_edge")
        edge = to_edge(exported)
        _step("to_executorch")
        program = edge.to_executorch()
    where = "cuda" if device == "cuda" else "cpu"
    with _tool(f"moving the model and its inputs to {where}"):
        eager = model.to(where)
    _step("computing the expected outputs (eager)")
    with torch.no_grad():
        expected = eager.module(*eager.args)
    # A test case holds its inputs and outputs flattened: nested ones (an
    # LSTM's (h, c)) are leaves in order, as in the program's signature.
    with _tool("flattening the inputs and expected outputs"):
        inputs = tree_flatten(model.args)[0]
        outputs = tree_flatten(expected)[0]
    # What a test case holds (ExecuTorch's bundled_program.config.ConfigValue).
    held = (torch.Tensor, bool, int, float)
    other = [v for v in inputs + outputs if not isinstance(v, held)]
    if other:
        raise NotApplicable(
            "bundled test cases hold tensors, ints, floats and bools, not "
            f"{type(other[0]).__name__}"
        )

    def bundle(expected: List[Any]) -> bytes:
        case = MethodTestCase(inputs=inputs, expected_outputs=expected)
        bundled = BundledProgram(program, [MethodTestSuite("forward", [case])])
        _step("serialize_from_bundled_program_to_flatbuffer")
        return serialize_from_bundled_program_to_flatbuffer(bundled)

    host_copy = None
    if device not in ("cpu", "meta"):
        # What the fix guarantees, in this process: the bundle of the device
        # tensors equals the bundle of their host copies. (Another row's
        # bundle would hold outputs computed elsewhere: a GPU's low bits
        # differ from a CPU's.) Made first: stock crashes on the device's.
        with _tool("copying the expected outputs to the host"):
            copies = [
                o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in outputs
            ]
        _step("BundledProgram of the host copies")
        host_copy = bundle(copies)
    _record_constants(
        [
            {
                f"expected output {i}": o
                for i, o in enumerate(outputs)
                if isinstance(o, torch.Tensor)
            }
        ],
        device,
    )
    if _is_moved(device):
        with _tool(f"moving the expected outputs to {device}"):
            outputs = [
                (
                    on_device(o, _target_device(device))
                    if isinstance(o, torch.Tensor)
                    else o
                )
                for o in outputs
            ]
    if device != "cpu":
        _on_device()
    _step("BundledProgram")
    with _claims(device):
        return Bundle(bundle(outputs), host_copy)


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
    _step("torch.export")
    exported = export(model, inputs)
    _step("to_edge_transform_and_lower with CudaPartitioner")
    edge = to_edge_transform_and_lower(
        exported,
        partitioner=[CudaPartitioner(specs)],
        compile_config=EdgeCompileConfig(
            _check_ir_validity=False, _skip_dim_order=True
        ),
    )
    _step("to_executorch")
    return edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=True))


def run(
    device: str, model_spec: str, external_constants: bool, out: Path, flow: str
) -> Dict:
    from executorch_device_guard.check import models, preloaded

    # The model the warm parent loaded once (preloaded.py), seeded as here;
    # else seeded and loaded now, so that stock and patched children export
    # the same weights.
    model = preloaded.take(model_spec)
    if model is None:
        preloaded.seed()
        try:
            model = models.load_model(model_spec)
        except models.ModelSpecError as e:
            raise SetupError(str(e)) from e
    # The model goes where the case says, wherever it was built (a factory may
    # return a .cuda() model): to CUDA for a real CUDA case (the bundled path
    # exports from CPU and computes only its expected outputs there), to CPU
    # for every other; the tool moves the constants to meta and fake devices.
    where = "cuda" if device == "cuda" and flow != "bundled" else "cpu"
    with _tool(f"moving the model and its inputs to {where}"):
        model = model.to(where)
    _model[:] = [model]
    _from_cpu[0] = where == "cpu"
    if where == "cuda":
        _on_device()
    if flow == "emit":
        result = _emit(model, device, external_constants)
    elif flow == "xnnpack":
        result = _xnnpack(model, device)
    elif flow == "vulkan":
        result = _vulkan(model, device)
    elif flow == "bundled":
        result = _bundled(model, device)
    else:
        result = _cuda_partitioner(model.module, model.args)

    host_copy = None
    if isinstance(result, Bundle):
        files = {"bundled_program.bpte": result.data}
        if result.host_copy is not None:
            host_copy = {"bundled_program.bpte": _digest(result.host_copy)}
    else:
        _step("serializing the program")
        files = {"program.pte": result.buffer}
        # 1.5.1 keeps external data in _tensor_data; later releases add data_files.
        for name, cord in (getattr(result, "_tensor_data", None) or {}).items():
            files[name] = bytes(cord)
    with _tool("writing the program"):
        out.mkdir(parents=True, exist_ok=True)
        digests = {}
        for name, data in sorted(files.items()):
            (out / name).write_bytes(data)
            digests[name] = _digest(data)
    found = {"outcome": "ok", "files": digests}
    if host_copy is not None:
        found["host_copy"] = host_copy
    return found


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _report(path: Path, record: Dict) -> None:
    """Appends one JSON line to the result file."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def _served() -> Optional[Dict[str, str]]:
    """What the import hook did with each target module this process
    imported (``"changed"``, the state it left it in, or ``MISSED`` where
    the module was loaded without it); None where the hook is off."""
    from executorch_device_guard.finder import MARKER, MISSED

    for hook in sys.meta_path:
        if getattr(hook, MARKER, False):
            served = {name: state for name, (state, _) in hook.served.items()}
            served.update(dict.fromkeys(hook.missed(), MISSED))
            return served
    return None


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--model", default="issue")
    parser.add_argument("--external-constants", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--flow", choices=FLOWS, default="emit")
    parser.add_argument("--threads", type=int, help="torch's intra-op threads")
    args = parser.parse_args(argv)
    import executorch.exir.emit._emitter as emitter

    _report(args.result, {"emitter": emitter.__file__, "served": _served()})
    _result_file[:] = [args.result]
    _report(args.result, {"stage": _stage[0]})
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    code = 0
    try:
        result = run(
            args.device, args.model, args.external_constants, args.out, args.flow
        )
    except NotApplicable as e:
        result = {"outcome": "n/a", "message": str(e)}
    except SetupError as e:
        print(f"SetupError: {e}", file=sys.stderr)
        result = {"outcome": "setup-error", "type": "SetupError", "message": str(e)}
        code = 1
    except (Exception, SystemExit) as e:  # noqa: B902 - reported, then exit 1
        import traceback

        traceback.print_exc()
        if isinstance(e, SystemExit):
            lines = [f"the model called sys.exit({e.code!r})"]
        else:
            lines = str(e).strip().splitlines() or [""]
        result = {
            "outcome": "error",
            "type": type(e).__name__,
            "message": lines[0],
            "stage": _stage[0],
            "step": _current_step[0],
            "frame": _raising_frame(e),
        }
        cause = _root_cause(e)
        if cause is not None:
            result["cause"] = {
                "type": type(cause).__name__,
                "message": _first_line(cause),
                "frame": _raising_frame(cause),
            }
        if _tool_failure or isinstance(e, ToolError) or _raised_here(e):
            # The tool's own code failed: no outcome of ExecuTorch's.
            message = (
                _tool_failure[0]
                if _tool_failure
                else f"in its own code: {type(e).__name__}: {lines[0]}"
            )
            result.update(outcome="tool-error", type="ToolError", message=message)
        code = 1
    sys.stdout.flush()
    _report(args.result, {"result": result})
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
