"""A tiny transformers encoder (T5's), built from its config: no download.

``check --model test/models/encoder.py:make``: token ids in, hidden states out.
"""

import torch
from transformers import T5Config, T5EncoderModel


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = T5Config(
            vocab_size=64,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
        )
        self.encoder = T5EncoderModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids).last_hidden_state


def make():
    return Encoder().eval(), (torch.arange(8).reshape(1, 8),)
