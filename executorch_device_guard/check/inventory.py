# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which constants an export holds on its guarded path, for the user to see.

The guard stops at the first constant on a device; ``check`` lists every one
that reaches the path's host read (the emitter's, a delegate's serializer,
a bundled program's test data), each with its dtype, shape and device, so
that a user sees their int64, bool, empty or tied constants were covered.

A constant is named as the model names it: a parameter or buffer keeps its
name through torch.export (``0.weight``). One that the export made itself
(``_lifted_tensor_constant0``, a folded constant) is named after the
model's tensor that holds the same values, when exactly one does, with the
program's name beside it (``exported_as``).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple


def _own_tensors(module: Any) -> List[Tuple[str, Any]]:
    """The module's parameters, buffers and plain tensor attributes, by name."""
    import torch

    found = list(module.state_dict(keep_vars=True).items())
    seen = {name for name, _ in found}
    for prefix, sub in module.named_modules():
        for attr, value in vars(sub).items():
            name = f"{prefix}.{attr}" if prefix else attr
            if isinstance(value, torch.Tensor) and not attr.startswith("_"):
                if name not in seen:
                    found.append((name, value))
                    seen.add(name)
    return found


def _same(a: Any, b: Any) -> bool:
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    try:
        return bool(torch.equal(a.detach().cpu(), b.detach().cpu()))
    except Exception:  # noqa: B902 - a tensor without data (meta): no match
        return False


def _model_name(value: Any, own: List[Tuple[str, Any]]) -> Optional[str]:
    """The name of the one model tensor that is, or holds the same values
    as, ``value``; None if none or several do."""
    for name, tensor in own:
        if tensor is value:
            return name
    matches = [name for name, tensor in own if _same(tensor, value)]
    return matches[0] if len(matches) == 1 else None


def _made(name: str) -> bool:
    """A name that a pass or the export made, not the model's author."""
    return name.startswith("_") or name.endswith("_fused_bn")


def _consumer(programs: Iterable[Any], target: str) -> Optional[Tuple[str, Any]]:
    """``(module path, index)`` of the model's module whose operator takes
    the constant ``target`` of one of ``programs`` (through quantize and
    dequantize operators), by the graph signature and the operator's
    ``nn_module_stack``; None if no program says."""
    for program in programs:
        signature = program.graph_signature
        inputs = {
            **signature.inputs_to_parameters,
            **signature.inputs_to_buffers,
            **signature.inputs_to_lifted_tensor_constants,
        }
        node = next(
            (
                n
                for n in program.graph.nodes
                if n.op == "placeholder" and inputs.get(n.name) == target
            ),
            None,
        )
        for _ in range(4):
            if node is None or not node.users:
                break
            user = next(iter(node.users))
            stack = user.meta.get("nn_module_stack") or {}
            path = list(stack.values())[-1][0] if stack else ""
            if path and "quantize" not in str(user.target):
                return path, user
            node = user
    return None


def _by_consumer(
    programs: Iterable[Any], module: Any, target: str, value: Any
) -> Optional[str]:
    """The model's own name for a constant that a pass made (a quantized
    weight ``_frozen_param0``, a weight fused with BatchNorm
    ``conv_weight_fused_bn``): the parameter of the module that uses it
    whose shape it has (``stem.0.weight``)."""
    found = _consumer(programs, target)
    if found is None or module is None:
        return None
    path, user = found
    try:
        owner = module.get_submodule(path)
    except (AttributeError, TypeError):
        return None
    for name, tensor in owner.named_parameters(recurse=False):
        if tuple(tensor.shape) == tuple(value.shape):
            return f"{path}.{name}"
    return f"{path} ({getattr(user.target, '__name__', user.target)})"


def describe(
    tables: Iterable[Dict[str, Any]],
    module: Any,
    device: Optional[str] = None,
    programs: Iterable[Any] = (),
) -> List[Dict[str, Any]]:
    """Each tensor of the name -> value ``tables``: its name (the model's
    where it can be found, through ``programs``' graphs for a constant that
    a pass made), dtype, shape and device (``device`` where the tool is
    about to put it, else the tensor's own)."""
    import torch

    own = _own_tensors(module) if module is not None else []
    names = {name for name, _ in own}
    programs = list(programs)
    found = []
    for table in tables:
        for name, value in table.items():
            if not isinstance(value, torch.Tensor):
                continue
            entry = {
                "name": name,
                "dtype": str(value.dtype).replace("torch.", ""),
                "shape": list(value.shape),
                "device": device or str(value.device),
            }
            if _made(name):
                # Made by the export or a pass: named after the model's
                # tensor with its values, else after the module using it.
                model_name = None if name in names else _model_name(value, own)
                if model_name is None or _made(model_name):
                    model_name = (
                        _by_consumer(programs, module, name, value) or model_name
                    )
                if model_name is not None and model_name != name:
                    entry["name"], entry["exported_as"] = model_name, name
            found.append(entry)
    return found


def merge(known: List[Dict[str, Any]], new: List[Dict[str, Any]]) -> None:
    """Adds to ``known`` the entries of ``new`` whose program name it lacks."""
    seen = {entry.get("exported_as", entry["name"]) for entry in known}
    for entry in new:
        key = entry.get("exported_as", entry["name"])
        if key not in seen:
            known.append(entry)
            seen.add(key)


def line(entry: Dict[str, Any]) -> str:
    """``0.weight: float32 [3, 4] on cuda:0`` (and ``exported as ...``)."""
    shape = "[" + ", ".join(str(d) for d in entry["shape"]) + "]"
    text = f"{entry['name']}: {entry['dtype']} {shape} on {entry['device']}"
    if "exported_as" in entry:
        text += f" (exported as {entry['exported_as']})"
    return text
