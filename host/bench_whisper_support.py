"""What bench_whisper.py's parts share: timing on a device, the encoder's variants (eager, compiled, FP8
products) and the report written as each part ends."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from voxmux_host.fp8 import fp8_option_problems
from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def progress(report: Dict[str, Any], out: str, part: str) -> None:
    """Writes the report so far, so that a run stopped at a time limit keeps its finished parts."""
    Path(out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{part}: done ({out})", flush=True)


def timed_ms(fn: Any, device: torch.device, repeats: int) -> float:
    fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync(device)
    return (time.perf_counter() - start) * 1000 / repeats


def variant_problem(variant: str, device: torch.device, dtype: torch.dtype) -> Optional[str]:
    """Why the encoder cannot run as ``variant`` here (None where it can)."""
    problems = []
    if variant != "eager" and not hasattr(torch.nn.Module, "compile"):
        problems.append(f"the compiled encoder needs torch >= 2.2 (torch.compile of modules): this is torch {torch.__version__}")
    if variant == "fp8":
        problems += fp8_problems(device, dtype)
    return "; ".join(problems) or None


def fp8_problems(device: torch.device, dtype: torch.dtype) -> List[str]:
    """Why FP8 products cannot run here (the checks of ``matmul: fp8`` but its need of a compiled encoder)."""
    dtype_name = next(name for name, value in DTYPES.items() if value == dtype)
    return fp8_option_problems({"compileEncoder": True, "dtype": dtype_name, "device": str(device)})


def encoder_as(model: Any, config: Any, variant: str, device: torch.device, dtype: torch.dtype) -> None:
    """The model's encoder as ``variant`` (see :func:`encoder_variants`), from whatever it was before."""
    encoder = model.encoder
    if variant == "fp8":
        encoder.build_fp8_()
    else:
        encoder.drop_fp8()
    if variant == "eager":
        encoder.is_compiled = False
        return
    encoder.compile_()
    # The compilation, as the adapter's warmup makes it (smaller batches stay eager).
    encoder(torch.zeros(COMPILED_MIN_WINDOWS, config.n_mels, 3000, device=device, dtype=dtype))
