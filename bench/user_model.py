"""A small user model for bench/bench_check.py: a 1-D convolution classifier,
as a new user would bring (``check --model bench/user_model.py:make``)."""

import torch


class Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv1d(2, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv1d(8, 8, 3, padding=1),
            torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(8 * 16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def make():
    return Classifier().eval(), (torch.ones(1, 2, 16),)
