# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""One call of ExecuTorch's LLM custom ops, a Llama step or the runtime, on
a device, in a process of its own (a crash kills only it).

    python3 gpu/custom_ops_probe.py list
    python3 gpu/custom_ops_probe.py CASE DEVICE
    python3 gpu/custom_ops_probe.py many DEVICE CASE...

CASE is an op (``llama::update_cache.out``, ...), ``llama`` (ExecuTorch's
Llama transformer with the custom SDPA source transform), ``export-llama``
(that model exported through XNNPACK to a program, its bytes),
``runtime-forward`` or ``runtime-execute`` (a CPU program given its input on
DEVICE), or ``quantized`` (an op of libquantized_ops_aot_lib). DEVICE is a
device, or ``fake`` (the op under FakeTensorMode, as torch.export traces it).
Prints ``OK sha256`` of the outputs (of their shapes and dtypes on ``meta``
and ``fake``), so results can be compared between builds; an error ends the
process with Python's exit code 1, a crash with the signal's. ``many`` prints
``RESULT CASE OK ...`` or ``RESULT CASE ERROR ...`` per case instead, in one
process, until one crashes it.
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
    tensor argument and a kernel of their own, for every device
    (CompositeExplicitAutograd, as released) or for CPU."""
    _custom_ops()
    found = []
    # PyTorch has no public API that lists a namespace's operators.
    for qualname in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, name = qualname.partition("::")
        packet, _, overload = name.partition(".")
        if namespace in ("llama", "preprocess"):
            op = getattr(
                getattr(getattr(torch.ops, namespace), packet), overload or "default"
            )
            if any(
                isinstance(a.type, torch.TensorType) for a in op._schema.arguments
            ) and any(
                op.has_kernel_for_dispatch_key(key)
                for key in ("CompositeExplicitAutograd", "CPU")
            ):
                found.append(qualname)
    return found


def _op_args(device: str) -> Dict[str, Callable[[], tuple]]:
    """Arguments that each op's kernel accepts, so that it reads them."""

    def rand(*size, dtype=torch.float32):
        return torch.rand(size).to(dtype).to(device)

    def moe():
        # A packed MoE block, as the source transform makes it from a model's.
        from executorch.examples.models.llama.source_transformation.moe import (
            replace_moe_with_quantized_op,
        )
        from executorch.extension.llm.custom_ops.test_quantized_moe import (
            _build_moe_eager,
        )

        holder = torch.nn.Module()
        holder.block_sparse_moe = _build_moe_eager()
        replace_moe_with_quantized_op(holder, group_size=32, weight_nbit=4)
        block = holder.block_sparse_moe
        return (
            rand(4, 32),
            *(
                getattr(block, name).to(device)
                for name in ("gate_weight", "expert_bias", "packed_w13", "packed_w2")
            ),
            *(
                getattr(block, name)
                for name in (
                    "num_activated_experts",
                    "num_experts",
                    "hidden_dim",
                    "dim",
                    "group_size",
                    "weight_nbit",
                    "score_func",
                    "route_scale",
                )
            ),
        )

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
        "llama::quantized_moe_ffn": moe,
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
    made_on = "cpu" if device == "fake" else device
    args = _op_args(made_on)[base]()
    namespace, _, name = base.partition("::")
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
    kwargs = _out_for(base, args, made_on) if overload == "out" else {}
    if device == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode()

        def fake(value):
            return mode.from_tensor(value) if isinstance(value, torch.Tensor) else value

        args = tuple(fake(v) for v in args)
        kwargs = {k: fake(v) for k, v in kwargs.items()}
        with mode:
            result = op(*args, **kwargs)
        return args[1] if base.startswith("llama::update_cache") else result
    result = op(*args, **kwargs)
    # The cache ops return a placeholder: their result is the updated cache.
    return args[1] if base.startswith("llama::update_cache") else result


def llama_model():
    """ExecuTorch's Llama transformer, tiny, with what --use_sdpa_with_kv_cache
    applies: the custom SDPA and KV cache source transforms."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
        replace_kv_cache_with_custom_kv_cache,
    )
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
    model = replace_sdpa_with_custom_op(construct_transformer(args).eval())
    return replace_kv_cache_with_custom_kv_cache(model)


def llama(device: str):
    """That model moved to ``device``: one eager step."""
    model = llama_model().to(device)
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


def export_llama(device: str):
    """The bytes of the program that ExecuTorch's export flow makes of that
    model: torch.export traces the custom ops with their fake kernels, and
    to_executorch plans their out variants."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
        XnnpackPartitioner,
    )
    from executorch.exir import to_edge_transform_and_lower

    model = llama_model()
    inputs = (torch.tensor([[1]]), {"input_pos": torch.tensor([0])})
    program = to_edge_transform_and_lower(
        torch.export.export(model, inputs, strict=False),
        partitioner=[XnnpackPartitioner()],
    ).to_executorch()
    return torch.frombuffer(bytearray(program.buffer), dtype=torch.uint8)


CASES = {
    "llama": llama,
    "export-llama": export_llama,
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
        if not isinstance(t, torch.Tensor):
            continue
        if t.device.type == "meta" or isinstance(
            t, torch._subclasses.fake_tensor.FakeTensor
        ):
            h.update(f"{tuple(t.shape)} {t.dtype}".encode())
        else:
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run(case: str, device: str) -> str:
    torch.manual_seed(0)
    result = CASES[case](device) if case in CASES else call_op(case, device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return digest(result)


def main(argv: List[str]) -> int:
    if argv[0] == "list":
        print("\n".join(library_ops()))
        return 0
    if argv[0] == "many":
        device, *cases = argv[1:]
        for case in cases:
            print(f"START {case}", flush=True)
            try:
                print(f"RESULT {case} OK {run(case, device)}", flush=True)
            except Exception as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                print(f"RESULT {case} ERROR {type(e).__name__}: {first}", flush=True)
        return 0
    case, device = argv
    print("OK", run(case, device), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
