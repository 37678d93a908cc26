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
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sortformer_support import (RATE, SyntheticOutputs, add_common_arguments, append_line,  # noqa: E402
                                      load_adapter, process_settings, provenance)

STAGES = ("prepare", "stage", "update", "finish")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--batch-sizes", default="1,16,64", help="sessions per batch, comma-separated")
    parser.add_argument("--chunks", type=int, default=8,
                        help="15 s chunks per session (the first two not timed); more where needed for --min-steps")
    parser.add_argument("--min-steps", type=int, default=192, help="timed session steps per batch size, at least")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (an instance's share)")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> Dict[str, Any]:
    import torch

    with process_settings(torch, args.threads):
        return _run(args, torch)


def _run(args: argparse.Namespace, torch: Any) -> Dict[str, Any]:
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    adapter = load_adapter(args, max(batch_sizes))
    model_api = sys.modules["voxmux_host.model_api"]
    engine = adapter._engine
    outputs = SyntheticOutputs(engine, torch)

    def forward(valid: List[int], frames: List[int], context_lengths: List[int]) -> Tuple[Any, Any, List[int]]:
        lengths = outputs.lengths(frames)
        preds, chunk = outputs(len(valid), max(lengths))
        return preds, chunk, lengths

    engine._forward = forward
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
                     "callMsPerSession": round(wall / timed, 4), "timedSteps": timed,
                     "stateBytes": max(len(s or b"") for s in states)})
    return {**provenance(args, torch), "threads": args.threads, "rows": rows}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(f"{result['label'] or 'this tree'}: torch {result['torch']}, {args.threads} thread(s), {args.dtype}")
    print("batch | " + " | ".join(STAGES) + " | host ms per session")
    for row in result["rows"]:
        stages = " | ".join(f"{row['msPerSession'][s]:.3f}" for s in STAGES)
        print(f"{row['batchSize']:5d} | {stages} | {row['hostMsPerSession']:.3f}")
    if args.out:
        append_line(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
