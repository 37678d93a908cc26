"""Experimental options of the parakeet adapter: off by default, in no recommended configuration.

An option lives here when it lost in the committed measurements where it was tried, but another
measurement suggests it may still pay off elsewhere. Every name starts with ``experimental``; the adapter
takes the defaults, the checks and the effect on the model from this module alone, so that an option
can be promoted (moved to the adapter under a plain name) or retired (deleted here) in one place.

``experimentalKernels`` (``"torch"`` or ``"triton"``): the attention's masked position bias and the
convolution module's GLU, padding mask, depthwise convolution, BatchNorm and SiLU as the project's own
Triton kernels (kernels.py, triton_kernels.py) instead of PyTorch's and Inductor's. Needs a CUDA device,
torch >= 2.4 with Triton and a convolution kernel size of 9.

- Lost: in the server with one 45 s bucket (static shapes), c13 ran 202.7 to 234.7 against c7's 320.0
  requests/s (bench/results/asr-h200-2026-12-03c/, run 2); the model alone saved about 1 ms per batch.
- May come back: where the compiled encoder sees several length buckets (dynamic shapes, the adapter's
  default of five), one batch of 32 x 45 s profiled without graphs took 93.3 instead of 107.5 ms of GPU
  time (same folder, run 1). Graph mode with several buckets is not measured yet.
"""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from voxmux_host.errors import InstanceError

from .encoder import KERNEL_KINDS
from .kernels import KERNELS_AVAILABLE, KERNELS_UNAVAILABLE_REASON
from .model import ParakeetModel

#: The experimental options and their defaults (merged into the adapter's DEFAULT_OPTIONS).
EXPERIMENTAL_DEFAULTS: Dict[str, Any] = {
    "experimentalKernels": "torch",
}


def experimental_problems(options: Dict[str, Any]) -> List[str]:
    """Why the experimental options in ``options`` (all options, defaults applied) cannot run with the
    other options on this machine; empty when they can."""
    problems: List[str] = []
    kernels = options["experimentalKernels"]
    if kernels not in KERNEL_KINDS:
        problems.append(f"Expected experimentalKernels to be torch or triton: got {kernels!r}")
    elif kernels == "triton":
        problems.extend(_triton_kernel_problems(options))
    return problems


def _triton_kernel_problems(options: Dict[str, Any]) -> List[str]:
    problems = []
    if not KERNELS_AVAILABLE:
        problems.append(f"experimentalKernels triton is not available: {KERNELS_UNAVAILABLE_REASON}")
    name = str(options["device"])
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if not name.startswith("cuda"):
        problems.append(f"experimentalKernels triton needs a CUDA device: got device {name!r}")
    elif not torch.cuda.is_available():
        problems.append("experimentalKernels triton needs a CUDA device: CUDA is not available")
    return problems


def apply_experimental(model: ParakeetModel, options: Dict[str, Any]) -> None:
    """Put the experimental options into effect on a model that is on its device and dtype, before
    anything is compiled."""
    try:
        model.encoder.set_kernels(str(options["experimentalKernels"]))
    except ValueError as exc:  # a .nemo model whose convolution kernel size the kernels do not cover
        raise InstanceError("load_failed", str(exc)) from exc


def kernels_in_use(options: Dict[str, Any]) -> str:
    """What the load info reports as ``kernels``."""
    return str(options["experimentalKernels"])
