"""FP8 (e4m3) matrix products with row-wise scales for an encoder's large linear layers (Parakeet's and
Whisper's), and the checks of the ``matmul: fp8`` option they share.

A product ``x @ W.T`` becomes ``(x_q * s_x) @ (W_q * s_w).T``: each row of the activations ``x`` [M, K]
and each output channel of the weight ``W`` [N, K] gets its own float32 scale (its largest magnitude
divided by 448, the largest e4m3 value), the operands are cast to ``float8_e4m3fn``, and one
``torch._scaled_mm`` multiplies them on the tensor cores and applies both scales and the bias in its
epilogue, writing bf16. The weights are quantized once (:func:`fp8_weight_from`); the activations on
every call (:func:`quantize_rowwise`), which under ``torch.compile`` fuses into the kernel that
produces them (LayerNorm, SiLU, GLU, the subsampling's last ReLU).

The ``torch._scaled_mm`` this relies on (aten/src/ATen/native/native_functions.yaml)::

    _scaled_mm(Tensor self, Tensor mat2, Tensor scale_a, Tensor scale_b, Tensor? bias=None,
               Tensor? scale_result=None, ScalarType? out_dtype=None, bool use_fast_accum=False) -> Tensor

``self`` [M, K] row-major and ``mat2`` [K, N] column-major, both float8; K and N multiples of 16.
Row-wise scaling in this form (``scale_a`` float32 [M, 1], ``scale_b`` float32 [1, N], both 2-D and
contiguous) is torch >= 2.5: first a CUTLASS kernel for sm90 with bf16 output only (a bias must then be
bf16); later releases added an sm89 kernel and, with cuBLAS >= 12.9 on sm90, run it through cuBLAS.
Earlier releases had other forms (keyword-only optional scales, an amax output, 1-D row scales), hence
:data:`FP8_AVAILABLE` asks for torch >= 2.5.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

#: The largest finite float8_e4m3fn value.
E4M3_MAX = 448.0
#: Rows whose largest magnitude is below this are scaled as if it were this (an all-zero row then
#: quantizes to zeros instead of dividing by zero).
MIN_AMAX = 1e-12
#: Let the FP8 tensor cores accumulate without the periodic promotion to full float32. This is what
#: inference stacks use for the forward product: the accumulation error it adds stays far below the
#: error of rounding every operand to 3 mantissa bits.
USE_FAST_ACCUM = True
#: The multiple that K and N must be for ``torch._scaled_mm``.
DIM_ALIGNMENT = 16


def _torch_version() -> Tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


#: This torch has the float8_e4m3fn dtype (casts work on any device).
HAS_FLOAT8 = hasattr(torch, "float8_e4m3fn")
#: This torch has the float8 dtype and a ``torch._scaled_mm`` with row-wise scales (torch >= 2.5).
#: The device must still be a GPU of compute capability 8.9 or higher (see the module docstring).
FP8_AVAILABLE = HAS_FLOAT8 and hasattr(torch, "_scaled_mm") and _torch_version() >= (2, 5)


class Fp8Weight(NamedTuple):
    """A linear layer's weight as the second operand of :func:`fp8_linear`."""

    #: float8_e4m3fn [N, K], row-major (its transpose is the column-major [K, N] operand).
    weight: torch.Tensor
    #: float32 [1, N]: output channel n of the product is multiplied by scale[0, n].
    scale: torch.Tensor
    #: [N] in out_dtype, or None.
    bias: Optional[torch.Tensor]
    #: The dtype of the products (the layer's own weight dtype).
    out_dtype: torch.dtype


def quantize_rowwise(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """x [..., K] -> (float8_e4m3fn [..., K], float32 scale [..., 1]) with x ~ x_fp8 * scale.

    The largest magnitude of each row maps to 448. Written as plain tensor operations, without
    data-dependent Python control flow, so that torch.compile fuses them into one pass over x.
    """
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=MIN_AMAX)
    scale = amax / E4M3_MAX
    # The clamp only catches a quotient that rounding put a hair above 448 (cast, it would be NaN).
    quantized = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)  # type: ignore[attr-defined]
    return quantized, scale


def fp8_weight_from(weight: torch.Tensor, bias: Optional[torch.Tensor]) -> Fp8Weight:
    """Quantize a linear layer's weight [N, K] per output channel; the bias is kept in the weight's dtype.

    Raises ValueError where N or K is not a multiple of 16 (``torch._scaled_mm`` refuses those).
    """
    if weight.dim() != 2:
        raise ValueError(f"Expected a 2-D weight [N, K]: got shape {list(weight.shape)}")
    n, k = weight.shape
    if n % DIM_ALIGNMENT or k % DIM_ALIGNMENT:
        raise ValueError(f"Expected a weight whose dimensions are multiples of {DIM_ALIGNMENT} for FP8: got [{n}, {k}]")
    with torch.no_grad():
        quantized, scale = quantize_rowwise(weight.detach())
        kept_bias = bias.detach().to(weight.dtype).contiguous() if bias is not None else None
    return Fp8Weight(quantized.contiguous(), scale.reshape(1, n).contiguous(), kept_bias, weight.dtype)


def fp8_products(x: torch.Tensor, weights: Sequence[Fp8Weight]) -> List[torch.Tensor]:
    """``F.linear(x, W, b)`` for each weight as one FP8 product, all sharing one quantization of x (an
    attention layer's query, key and value read the same input): x [..., K] -> [..., N] each, in the
    weight's ``out_dtype``.

    Needs :data:`FP8_AVAILABLE`, a CUDA device of compute capability 8.9 or higher and a bf16
    ``out_dtype``.
    """
    k = x.shape[-1]
    quantized, scale = quantize_rowwise(x.reshape(-1, k))
    quantized = quantized.contiguous()
    outs = []
    for w in weights:
        out: torch.Tensor = torch._scaled_mm(  # type: ignore[attr-defined]
            quantized,
            w.weight.t(),
            scale_a=scale,
            scale_b=w.scale,
            bias=w.bias,
            out_dtype=w.out_dtype,
            use_fast_accum=USE_FAST_ACCUM,
        )
        outs.append(out.reshape(*x.shape[:-1], out.shape[-1]))
    return outs


def fp8_linear(x: torch.Tensor, w: Fp8Weight) -> torch.Tensor:
    """``F.linear(x, W, b)`` as one FP8 product: x [..., K] -> [..., N] in ``w.out_dtype`` (see
    :func:`fp8_products`)."""
    return fp8_products(x, (w,))[0]


class Fp8CapableLinear(nn.Linear):
    """``nn.Linear`` (same parameters, same names) that runs as one FP8 product once :meth:`build_fp8_` has
    quantized its weight, until :meth:`drop_fp8` (call it again after moving or loading the weights)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        self.fp8: Optional[Fp8Weight] = None

    def build_fp8_(self) -> None:
        self.fp8 = fp8_weight_from(self.weight, self.bias)

    def drop_fp8(self) -> None:
        self.fp8 = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # A plain attribute test: torch.compile traces it without a graph break.
        return F.linear(x, self.weight, self.bias) if self.fp8 is None else fp8_linear(x, self.fp8)


def dequantize(quantized: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor and its scale (broadcast over the last dimension) stand for."""
    return quantized.float() * scale


def fp8_linear_reference(x: torch.Tensor, w: Fp8Weight) -> torch.Tensor:
    """What :func:`fp8_linear` computes, in float32 on any device: the product of the dequantized
    operands plus the bias (``torch._scaled_mm`` differs only in accumulation order and the final
    rounding to ``out_dtype``)."""
    quantized, scale = quantize_rowwise(x)
    weight = dequantize(w.weight, w.scale.reshape(-1, 1))
    bias = w.bias.float() if w.bias is not None else None
    return F.linear(dequantize(quantized, scale), weight, bias)


#: The GPUs with FP8 tensor cores: compute capability 8.9 (Ada) and up (Hopper...).
FP8_MIN_CAPABILITY = (8, 9)


def fp8_option_problems(options: Dict[str, Any]) -> List[str]:
    """Why ``matmul: fp8`` cannot run with an adapter's options (``compileEncoder``, ``dtype``, ``device``)
    on this machine (empty when it can)."""
    problems = []
    if not FP8_AVAILABLE:
        problems.append(
            f"matmul fp8 needs torch >= 2.5 (float8 and row-wise scaled _scaled_mm): this is torch {torch.__version__}"
        )
    if options["compileEncoder"] is not True:
        problems.append(
            "matmul fp8 needs compileEncoder: true (uncompiled, quantizing the activations costs more than FP8 saves)"
        )
    if options["dtype"] not in (None, "bf16"):
        problems.append(f"matmul fp8 needs dtype bf16: got {options['dtype']!r}")
    device_problem = _fp8_device_problem(str(options["device"]))
    if device_problem is not None:
        problems.append(device_problem)
    return problems


def _fp8_device_problem(name: str) -> Optional[str]:
    """Why the device option ``name`` cannot run FP8 products, or None (also where the name itself is
    invalid: the adapter's device check reports that)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        return None
    if device.type != "cuda":
        return f"matmul fp8 needs a CUDA device: got device {name!r}"
    if not torch.cuda.is_available():
        return "matmul fp8 needs a CUDA device: CUDA is not available"
    index = device.index if device.index is not None else 0
    if index >= torch.cuda.device_count():
        return None
    capability = torch.cuda.get_device_capability(index)
    if capability < FP8_MIN_CAPABILITY:
        major, minor = capability
        return f"matmul fp8 needs a GPU of compute capability >= 8.9 (Ada, Hopper): cuda:{index} is {major}.{minor}"
    return None
