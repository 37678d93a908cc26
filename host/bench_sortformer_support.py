"""What the Sortformer host benches share (``bench_sortformer_host.py``, ``bench_sequence_pipeline.py``):
their common options, the adapter as served loaded from a chosen ``host/`` folder, synthetic outputs in
place of its forward pass, and the provenance of a result line."""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import platform
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

RATE = 16000
#: One speaker at a time is active in the synthetic predictions, in turns of this many 80 ms frames.
TURN_FRAMES = 40


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=str(Path(__file__).resolve().parent),
                        help="folder holding the voxmux_host package to run (default: this one)")
    parser.add_argument("--config", default="full", help="adapter config: full (served shapes) or tiny (tests)")
    parser.add_argument("--dtype", default="bf16", help="storage and compute dtype of the adapter (bf16 as on CUDA)")
    parser.add_argument("--chunk-seconds", type=float, default=15.0)
    parser.add_argument("--label", default="", help="names the side in the output")
    parser.add_argument("--out", help="append the result as one JSON line to this file")


def load_adapter(args: argparse.Namespace, max_batch_size: int) -> Any:
    """The Sortformer adapter of ``args.host`` on the CPU, loaded as served (its forward pass still real)."""
    sys.path.insert(0, str(Path(args.host).resolve()))
    adapter_module = importlib.import_module("voxmux_host.models.sortformer.adapter")
    model_api = importlib.import_module("voxmux_host.model_api")
    adapter = adapter_module.SortformerAdapter()
    adapter.load(model_api.LoadContext("bench", "sortformer", {
        "config": args.config, "device": "cpu", "dtype": args.dtype, "maxBatchSize": max_batch_size}))
    return adapter


class SyntheticOutputs:
    """Outputs of the right shapes for ``StepEngine._forward``: predictions where one speaker at a time is
    active (turns of TURN_FRAMES) over a little noise, and random chunk embeddings. Made once per shape
    (the host only reads them), so that using them costs nothing."""

    def __init__(self, engine: Any, torch: Any) -> None:
        self._engine = engine
        self._torch = torch
        self._generator = torch.Generator().manual_seed(0)
        self._made: Dict[Tuple[int, int], Tuple[Any, Any]] = {}

    def lengths(self, frames: List[int]) -> List[int]:
        """Each item's chunk length in diarization frames, from its window's mel frames."""
        factor = self._engine.config.subsampling_factor
        return [-(-f // factor) for f in frames]

    def __call__(self, batch: int, t_chunk: int) -> Tuple[Any, Any]:
        if (batch, t_chunk) not in self._made:
            torch, engine, generator = self._torch, self._engine, self._generator
            speakers = engine.config.n_speakers
            n = engine.context_frames + t_chunk
            turns = torch.randint(0, speakers, (batch, n // TURN_FRAMES + 1), generator=generator)
            active = torch.nn.functional.one_hot(turns.repeat_interleave(TURN_FRAMES, dim=1)[:, :n], speakers)
            preds = active.float() * 0.8 + torch.rand(batch, n, speakers, generator=generator) * 0.15
            chunk = torch.randn(batch, t_chunk, engine.config.fc_d_model, generator=generator)
            self._made[(batch, t_chunk)] = (preds, chunk.to(engine.storage_dtype))
        return self._made[(batch, t_chunk)]


@contextlib.contextmanager
def process_settings(torch: Any, threads: int, switch_interval_s: Optional[float] = None) -> Iterator[None]:
    """torch's CPU threads (and the interpreter's switch interval) as an instance has them, for the bench's
    duration only: a caller in the same process (a test) keeps its own."""
    threads_before, interval_before = torch.get_num_threads(), sys.getswitchinterval()
    torch.set_num_threads(threads)
    if switch_interval_s is not None:
        sys.setswitchinterval(switch_interval_s)
    try:
        yield
    finally:
        torch.set_num_threads(threads_before)
        sys.setswitchinterval(interval_before)


def provenance(args: argparse.Namespace, torch: Any) -> Dict[str, Any]:
    """The fields every result line starts with."""
    return {
        "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "config": args.config,
        "dtype": args.dtype,
        "chunkSeconds": args.chunk_seconds,
    }


def append_line(path: str, result: Dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(result) + "\n")
