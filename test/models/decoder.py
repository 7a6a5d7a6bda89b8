"""A tiny transformers decoder (Qwen2), built from its config: no download.

``check --model test/models/decoder.py:make``: token ids in, logits out,
as a new user would wrap a causal language model for export.
"""

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = Qwen2Config(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            use_cache=False,
        )
        self.model = Qwen2ForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


def make():
    return Decoder().eval(), (torch.arange(8).reshape(1, 8),)
