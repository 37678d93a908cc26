"""Holding torch's ``scaled_dot_product_attention`` to chosen kernels (``torch.nn.attention.sdpa_kernel``,
torch >= 2.3). torch keeps the choice in process-wide flags, not per thread: hold it only around calls beside
which no other thread's attention runs."""
from __future__ import annotations

from typing import Any, ContextManager, Optional, Sequence

import torch


def attention_kernels() -> Optional[Any]:
    """``torch.nn.attention``, or None where this torch has none (:func:`attention_kernels_missing` says why)."""
    return getattr(torch.nn, "attention", None)


def attention_kernels_missing() -> str:
    return f"picking an attention kernel needs torch >= 2.3 (torch.nn.attention): this is torch {torch.__version__}"


def held_to(names: Sequence[str]) -> ContextManager[None]:
    """A context in which attention runs on the first of ``names`` (``SDPBackend`` members) that takes its
    inputs, in torch's order of preference among them; RuntimeError where this torch cannot choose."""
    module = attention_kernels()
    if module is None:
        raise RuntimeError(attention_kernels_missing())
    return module.sdpa_kernel([getattr(module.SDPBackend, name) for name in names])  # type: ignore[no-any-return]
