"""torchvision's swin_t for `check --model gpu/swin_t.py:make` (issue 27).

Built on CPU without pretrained weights (no network on the GPU machine):
the guard reads constants, not their values, and check seeds every child
alike. Its outputs computed on a GPU differ from a CPU's in their low bits,
which is what the bundled cuda row must not take for the patch's fault.
"""

import torch
import torchvision


def make():
    model = torchvision.models.swin_t(weights=None).eval()
    return model, (torch.randn(1, 3, 224, 224),)
