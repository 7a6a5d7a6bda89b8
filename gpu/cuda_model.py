# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The issue's model, built on CUDA, for `check --model gpu/cuda_model.py:make`."""

import torch


def make():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().cuda()
    return model, (torch.ones(2, 4).cuda(),)
