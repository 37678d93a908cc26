"""Seeded random weights: the same values on every device and torch version for one seed.

Linear and convolution weights are N(0, gain / fan_in) (gain 2 before a ReLU), biases zero, norms at
identity, BatchNorm statistics at (0, 1). The head's output layer is scaled and biased so that a
random model's sigmoids move around 0.5 and cross the default thresholds now and then, as a trained
model's do during speech (so that post-processing and the cache compression see both classes).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .model import SortformerModel

#: The head's output layer is scaled up so that its logits vary by about one unit between frames.
HEAD_OUTPUT_GAIN = 8.0
HEAD_OUTPUT_BIAS = -0.3


def init_random_weights_(model: SortformerModel, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                fan_in = module.weight[0].numel()
                std = math.sqrt(2.0 / fan_in) if isinstance(module, nn.Conv2d) else 1.0 / math.sqrt(fan_in)
                scratch = torch.empty(module.weight.shape, dtype=torch.float32)
                scratch.normal_(0.0, std, generator=gen)
                module.weight.copy_(scratch)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, (nn.LayerNorm, nn.BatchNorm1d)):
                module.weight.fill_(1.0)
                module.bias.fill_(0.0)
                if isinstance(module, nn.BatchNorm1d):
                    module.running_mean.zero_()  # type: ignore[union-attr]
                    module.running_var.fill_(1.0)  # type: ignore[union-attr]
                    module.num_batches_tracked.zero_()  # type: ignore[union-attr]
        for name, param in model.named_parameters():
            if name.endswith("pos_bias_u") or name.endswith("pos_bias_v"):
                param.zero_()
        model.sortformer_modules.single_hidden_to_spks.weight.mul_(HEAD_OUTPUT_GAIN)
        model.sortformer_modules.single_hidden_to_spks.bias.fill_(HEAD_OUTPUT_BIAS)
