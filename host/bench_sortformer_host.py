"""The host's CPU time per diarization chunk outside the model's forward pass, by stage, per batch size.

A Sortformer instance runs each sequence batch on one thread: it reads every session's state from its
bytes (``prepare``), stages the audio windows and contexts (``stage``), runs the forward pass, applies
every session's speaker-cache and FIFO update and compression (``update``) and builds the segments and
the new state bytes (``finish``). On the GPU the forward pass is the device's; the rest is the host's
CPU time, in series with it. This times that rest without a GPU: the adapter is loaded as served (full
shapes, 16-bit storage, preset ``chunk-15s``) and its forward pass is replaced by synthetic predictions
of the right shapes (speakers taking turns of 3.2 s with some noise, so the segments and compression see
speech-like input) and random chunk embeddings. Sessions send 15 s chunks; the first two steps (cache
filling, first compression) are not timed.

``--host DIR`` imports ``voxmux_host`` from another checkout's ``host/`` folder, so the same bench
times two commits (``bench/sortformer-host-cpu/run.sh`` alternates them).

    /usr/bin/python3 host/bench_sortformer_host.py --batch-sizes 1,16,64 --out host-stages.json
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

STAGES = ("prepare", "stage", "update", "finish")
RATE = 16000
TURN_FRAMES = 40  # 3.2 s
SPEAKERS = 4


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default=str(Path(__file__).resolve().parent),
                        help="folder holding the voxmux_host package to time (default: this one)")
    parser.add_argument("--config", default="full", help="adapter config: full (served shapes) or tiny (tests)")
    parser.add_argument("--dtype", default="bf16", help="storage and compute dtype of the adapter (bf16 as on CUDA)")
    parser.add_argument("--batch-sizes", default="1,16,64", help="sessions per batch, comma-separated")
    parser.add_argument("--chunks", type=int, default=8,
                        help="15 s chunks per session (the first two not timed); more where needed for --min-steps")
    parser.add_argument("--min-steps", type=int, default=192, help="timed session steps per batch size, at least")
    parser.add_argument("--chunk-seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (an instance's share)")
    parser.add_argument("--label", default="", help="names the side in the output")
    parser.add_argument("--out", help="append the result as one JSON line to this file")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> Dict[str, Any]:
    sys.path.insert(0, str(Path(args.host).resolve()))
    import torch

    torch.set_num_threads(args.threads)
    adapter_module = importlib.import_module("voxmux_host.models.sortformer.adapter")
    model_api = importlib.import_module("voxmux_host.model_api")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    adapter = adapter_module.SortformerAdapter()
    adapter.load(model_api.LoadContext("bench", "sortformer", {
        "config": args.config, "device": "cpu", "dtype": args.dtype, "maxBatchSize": max(batch_sizes)}))
    engine = adapter._engine
    engine._forward = _synthetic_forward(engine, torch)
    chunk = int(args.chunk_seconds * RATE)
    rng = np.random.default_rng(0)
    rows = []
    for batch in batch_sizes:
        chunks = max(args.chunks, 2 + -(-args.min_steps // batch))
        audio = [(rng.standard_normal(chunk * chunks) * 3000).astype(np.int16) for _ in range(batch)]
        states: List[Optional[bytes]] = [None] * batch
        totals = {stage: 0.0 for stage in STAGES}
        wall = 0.0
        timed = 0
        for k in range(chunks):
            items = [model_api.SequenceInput(f"r{i}-{k}", f"s{i}", k, audio[i][k * chunk:(k + 1) * chunk], states[i],
                                             False, {}) for i in range(batch)]
            before = dict(engine.counters.stage_ms)
            start = time.perf_counter()
            results = adapter.run_sequence(items)
            elapsed = time.perf_counter() - start
            states = [r.state for r in results]
            if k < 2:
                continue
            timed += batch
            wall += elapsed * 1000
            for stage in STAGES:
                totals[stage] += engine.counters.stage_ms.get(stage, 0.0) - before.get(stage, 0.0)
        per_session = {stage: round(totals[stage] / timed, 4) for stage in STAGES}
        rows.append({"batchSize": batch, "msPerSession": per_session,
                     "hostMsPerSession": round(sum(per_session.values()), 4),
                     "callMsPerSession": round(wall / timed, 4), "timedSteps": timed, "stateBytes": max(len(s or b"") for s in states)})
    return {
        "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "config": args.config,
        "dtype": args.dtype,
        "threads": args.threads,
        "chunkSeconds": args.chunk_seconds,
        "rows": rows,
    }


def _synthetic_forward(engine: Any, torch: Any) -> Any:
    """Stands in for ``StepEngine._forward``: predictions [B, context + chunk frames, S] where one speaker at
    a time is active (turns of TURN_FRAMES) over a little noise, random chunk embeddings, the chunk lengths."""
    generator = torch.Generator().manual_seed(0)
    factor = engine.config.subsampling_factor
    d_model = engine.config.fc_d_model

    def forward(valid: List[int], frames: List[int], context_lengths: List[int]) -> Tuple[Any, Any, List[int]]:
        b = len(valid)
        lengths = [-(-f // factor) for f in frames]
        t_chunk = max(lengths)
        n = engine.context_frames + t_chunk
        turns = torch.randint(0, SPEAKERS, (b, n // TURN_FRAMES + 1), generator=generator)
        speaker = turns.repeat_interleave(TURN_FRAMES, dim=1)[:, :n]
        active = torch.nn.functional.one_hot(speaker, SPEAKERS).float()[..., : engine.config.n_speakers]
        preds = active * 0.8 + torch.rand(b, n, engine.config.n_speakers, generator=generator) * 0.15
        chunk = torch.randn(b, t_chunk, d_model, generator=generator).to(engine.storage_dtype)
        return preds, chunk, lengths

    return forward


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(f"{result['label'] or 'this tree'}: torch {result['torch']}, {args.threads} thread(s), {args.dtype}")
    print("batch | " + " | ".join(STAGES) + " | host ms per session")
    for row in result["rows"]:
        stages = " | ".join(f"{row['msPerSession'][s]:.3f}" for s in STAGES)
        print(f"{row['batchSize']:5d} | {stages} | {row['hostMsPerSession']:.3f}")
    if args.out:
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
