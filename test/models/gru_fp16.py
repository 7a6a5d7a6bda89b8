"""A small GRU in fp16 (``check --model test/models/gru_fp16.py:make``)."""

import torch


class Tagger(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(8, 16, num_layers=1, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.head(out)


def make():
    model = Tagger().eval().half()
    return model, (torch.randn(1, 5, 8, dtype=torch.float16),)
