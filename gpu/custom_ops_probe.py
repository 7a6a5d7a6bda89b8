# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One call of ExecuTorch's LLM custom ops, a Llama step or the runtime, on
a device, in a process of its own (a crash kills only it).

    python3 gpu/custom_ops_probe.py list
    python3 gpu/custom_ops_probe.py CASE DEVICE

CASE is an op (``llama::update_cache.out``, ...), ``llama`` (ExecuTorch's
Llama transformer with the custom SDPA source transform), ``runtime-forward``
or ``runtime-execute`` (a CPU program given its input on DEVICE), or
``quantized`` (an op of libquantized_ops_aot_lib). Prints ``OK sha256`` of
the outputs, so CPU results can be compared stock against patched; an error
ends the process with Python's exit code 1, a crash with the signal's.
"""

import hashlib
import sys
from pathlib import Path
from typing import Callable, Dict, List

import torch


def _custom_ops() -> None:
    # tile_crop's Python module registers what it has for that op.
    from executorch.extension.llm.custom_ops import (  # noqa: F401
        custom_ops,
        op_tile_crop_aot,
    )


def library_ops() -> List[str]:
    """The ops libcustom_ops_aot_lib registers: its namespaces' ops with a
    kernel for every device and a tensor argument."""
    _custom_ops()
    found = []
    for qualname in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, name = qualname.partition("::")
        packet, _, overload = name.partition(".")
        if namespace in ("llama", "preprocess") and (
            torch._C._dispatch_has_kernel_for_dispatch_key(
                qualname, "CompositeExplicitAutograd"
            )
        ):
            op = getattr(
                getattr(getattr(torch.ops, namespace), packet), overload or "default"
            )
            if any("Tensor" in str(a.type) for a in op._schema.arguments):
                found.append(qualname)
    return found


def _op_args(device: str) -> Dict[str, Callable[[], tuple]]:
    """Arguments that each op's kernel accepts, so that it reads them."""

    def rand(*size, dtype=torch.float32):
        return torch.rand(size).to(dtype).to(device)

    def kv():
        return rand(1, 1, 8, 4), rand(1, 10, 8, 4)

    def quantized():
        q, k, v = (
            torch.randint(-8, 8, s, dtype=torch.int8).to(device)
            for s in [(1, 1, 8, 4), (1, 10, 8, 4), (1, 10, 8, 4)]
        )
        zeros = [
            torch.zeros(s, dtype=torch.int8).to(device)
            for s in [(1, 1, 8, 1), (1, 10, 8, 1), (1, 10, 8, 1)]
        ]
        scales = [
            torch.full(s, 0.1).to(device)
            for s in [(1, 1, 8, 1), (1, 10, 8, 1), (1, 10, 8, 1)]
        ]
        return (
            q,
            k,
            v,
            0,
            None,
            0.0,
            True,
            None,
            zeros[0],
            scales[0],
            zeros[1],
            scales[1],
            zeros[2],
            scales[2],
            False,
        )

    def gated():
        b, t, h, d = 1, 2, 2, 4
        return (
            rand(b, t, h, d),
            rand(b, t, h, d),
            rand(b, t, h, d),
            rand(b, t, h),
            rand(b, t, h),
            rand(b, h, d, d),
        )

    return {
        "llama::update_cache": lambda: (*kv(), 0),
        "llama::update_cache_with_indices": lambda: (
            *kv(),
            0,
            torch.zeros(1, 1, dtype=torch.int64).to(device),
        ),
        "llama::custom_sdpa": lambda: (
            rand(1, 1, 8, 4),
            rand(1, 10, 8, 4),
            rand(1, 10, 8, 4),
            0,
            None,
            0.0,
            True,
        ),
        "llama::sdpa_with_kv_cache": lambda: (
            rand(1, 1, 8, 4),
            rand(1, 1, 8, 4),
            rand(1, 1, 8, 4),
            rand(1, 10, 8, 4),
            rand(1, 10, 8, 4),
            0,
            1,
            None,
            0.0,
            True,
        ),
        "llama::custom_quantized_sdpa": quantized,
        "llama::fast_hadamard_transform": lambda: (rand(4, 128),),
        "llama::gated_delta_rule": gated,
        "llama::channelwise_gated_delta_rule": gated,
        "preprocess::tile_crop": lambda: (rand(3, 448, 448), 224),
    }


def _out_for(qualname: str, args: tuple, device: str) -> Dict[str, torch.Tensor]:
    """The out= arguments of an op's .out overload, shaped as its kernel wants."""
    if qualname.startswith("llama::update_cache"):
        return {"out": torch.empty(1).to(device)}
    if "gated_delta_rule" in qualname:
        q, state = args[0], args[5]
        return {"out": torch.empty_like(q), "final_state_out": torch.empty_like(state)}
    if qualname == "preprocess::tile_crop":
        return {"out": torch.empty(4, 3, 224, 224).to(device)}
    return {"out": torch.empty(args[0].shape).to(device)}


def call_op(qualname: str, device: str):
    _custom_ops()
    base, _, overload = qualname.partition(".")
    args = _op_args(device)[base]()
    namespace, _, name = base.partition("::")
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
    kwargs = _out_for(base, args, device) if overload == "out" else {}
    result = op(*args, **kwargs)
    # The cache ops return a placeholder: their result is the updated cache.
    return args[1] if base.startswith("llama::update_cache") else result


def llama(device: str):
    """ExecuTorch's Llama transformer, tiny, with what --use_sdpa_with_kv_cache
    applies, moved to ``device``: one eager step."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.sdpa import (
        replace_sdpa_with_custom_op,
    )

    torch.manual_seed(0)
    args = ModelArgs(
        dim=32,
        n_layers=1,
        n_heads=4,
        vocab_size=64,
        max_seq_len=16,
        max_context_len=16,
        max_batch_size=1,
        use_kv_cache=True,
        enable_dynamic_shape=False,
    )
    model = replace_sdpa_with_custom_op(construct_transformer(args).eval()).to(device)
    tokens = torch.tensor([[1]], device=device)
    with torch.no_grad():
        return model(tokens, {"input_pos": torch.tensor([0], device=device)})


def _program() -> bytes:
    from executorch.exir import to_edge
    from torch.export import export

    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x + 1

    return to_edge(export(AddOne(), (torch.arange(4.0),))).to_executorch().buffer


def runtime_forward(device: str):
    from executorch.extension.pybindings.portable_lib import (
        _load_for_executorch_from_buffer,
    )

    module = _load_for_executorch_from_buffer(_program())
    return module.forward((torch.arange(4.0).to(device),))


def runtime_execute(device: str):
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(_program()).load_method("forward")
    return method.execute([torch.arange(4.0).to(device)])


def quantized(device: str):
    """An op of libquantized_ops_aot_lib, loaded here so that a failure says
    why (its package's __init__ only logs it)."""
    from executorch import kernels

    (lib,) = Path(kernels.__path__[0]).glob("quantized/**/*quantized_ops_aot_lib.*")
    torch.ops.load_library(lib)
    x = torch.rand(2, 4).to(device)
    out = torch.empty(2, 4, dtype=torch.int8).to(device)
    return torch.ops.quantized_decomposed.quantize_per_tensor.out(
        x, 0.1, 0, -128, 127, torch.int8, out=out
    )


CASES = {
    "llama": llama,
    "runtime-forward": runtime_forward,
    "runtime-execute": runtime_execute,
    "quantized": quantized,
}


def digest(result) -> str:
    tensors = (
        [result]
        if isinstance(result, torch.Tensor)
        else list(torch.utils._pytree.tree_leaves(result))
    )
    h = hashlib.sha256()
    for t in tensors:
        if isinstance(t, torch.Tensor):
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv: List[str]) -> int:
    if argv[0] == "list":
        print("\n".join(library_ops()))
        return 0
    case, device = argv
    torch.manual_seed(0)
    result = CASES[case](device) if case in CASES else call_op(case, device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    print("OK", digest(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
