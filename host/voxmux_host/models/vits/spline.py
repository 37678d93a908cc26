"""The inverse rational-quadratic spline with linear tails of the duration predictor's ConvFlow (Piper
``vits/transforms.py``, inverse direction only; the log-determinant is not needed at inference)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MIN_BIN_WIDTH = 1e-3
MIN_BIN_HEIGHT = 1e-3
MIN_DERIVATIVE = 1e-3


def inverse_spline(inputs: torch.Tensor, widths_raw: torch.Tensor, heights_raw: torch.Tensor,
                   derivatives_raw: torch.Tensor, tail_bound: float) -> torch.Tensor:
    """inputs [...]; widths_raw and heights_raw [..., bins], derivatives_raw [..., bins - 1]."""
    inside = (inputs >= -tail_bound) & (inputs <= tail_bound)
    outputs = inputs.clone()
    derivatives_raw = F.pad(derivatives_raw, pad=(1, 1))
    constant = math.log(math.exp(1 - MIN_DERIVATIVE) - 1)
    derivatives_raw[..., 0] = constant
    derivatives_raw[..., derivatives_raw.size(-1) - 1] = constant
    if bool(inside.any()):
        outputs[inside] = _spline(inputs[inside], widths_raw[inside, :], heights_raw[inside, :],
                                  derivatives_raw[inside, :], tail_bound)
    return outputs


def _spline(inputs: torch.Tensor, widths_raw: torch.Tensor, heights_raw: torch.Tensor,
            derivatives_raw: torch.Tensor, bound: float) -> torch.Tensor:
    left, right, bottom, top = -bound, bound, -bound, bound
    num_bins = widths_raw.shape[-1]
    widths = F.softmax(widths_raw, dim=-1)
    widths = MIN_BIN_WIDTH + (1 - MIN_BIN_WIDTH * num_bins) * widths
    cumwidths = F.pad(torch.cumsum(widths, dim=-1), pad=(1, 0), mode='constant', value=0.0)
    cumwidths = (right - left) * cumwidths + left
    cumwidths[..., 0] = left
    cumwidths[..., cumwidths.size(-1) - 1] = right
    widths = cumwidths[..., 1:] - cumwidths[..., :-1]

    derivatives = MIN_DERIVATIVE + F.softplus(derivatives_raw)

    heights = F.softmax(heights_raw, dim=-1)
    heights = MIN_BIN_HEIGHT + (1 - MIN_BIN_HEIGHT * num_bins) * heights
    cumheights = F.pad(torch.cumsum(heights, dim=-1), pad=(1, 0), mode='constant', value=0.0)
    cumheights = (top - bottom) * cumheights + bottom
    cumheights[..., 0] = bottom
    cumheights[..., cumheights.size(-1) - 1] = top
    heights = cumheights[..., 1:] - cumheights[..., :-1]

    locations = cumheights.clone()
    locations[..., locations.size(-1) - 1] += 1e-6
    bin_idx = (torch.sum(inputs[..., None] >= locations, dim=-1) - 1)[..., None]

    input_cumwidths = cumwidths.gather(-1, bin_idx)[..., 0]
    input_bin_widths = widths.gather(-1, bin_idx)[..., 0]
    input_cumheights = cumheights.gather(-1, bin_idx)[..., 0]
    delta = heights / widths
    input_delta = delta.gather(-1, bin_idx)[..., 0]
    input_derivatives = derivatives.gather(-1, bin_idx)[..., 0]
    input_derivatives_plus_one = derivatives[..., 1:].gather(-1, bin_idx)[..., 0]
    input_heights = heights.gather(-1, bin_idx)[..., 0]

    slope_sum = input_derivatives + input_derivatives_plus_one - 2 * input_delta
    a = (inputs - input_cumheights) * slope_sum + input_heights * (input_delta - input_derivatives)
    b = input_heights * input_derivatives - (inputs - input_cumheights) * slope_sum
    c = -input_delta * (inputs - input_cumheights)
    discriminant = torch.clamp_min(b.pow(2) - 4 * a * c, 0.0)
    root = (2 * c) / (-b - torch.sqrt(discriminant))
    outputs: torch.Tensor = root * input_bin_widths + input_cumwidths
    return outputs
