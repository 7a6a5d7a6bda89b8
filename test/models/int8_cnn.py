"""A small CNN quantized to int8 with the PT2E flow and XNNPACK's quantizer
(``check --model test/models/int8_cnn.py:make``), as ExecuTorch's docs show.

The emitter path needs ExecuTorch's quantized out-variants registered
(``import executorch.kernels.quantized``): ``make`` leaves that out, as a
user who has not read that far would, and gets the emitter's error;
``make_with_kernels`` is the same model with that import.
"""

import torch
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    get_symmetric_quantization_config,
    XNNPACKQuantizer,
)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
        )
        self.head = torch.nn.Linear(8 * 8 * 8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stem(x).flatten(1))


def make():
    inputs = (torch.randn(1, 3, 8, 8),)
    model = Net().eval()
    captured = torch.export.export(model, inputs).module()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(captured, quantizer)
    prepared(*inputs)  # calibration
    return convert_pt2e(prepared), inputs


def make_with_kernels():
    import executorch.kernels.quantized  # noqa: F401 - registers the out-variants

    return make()
