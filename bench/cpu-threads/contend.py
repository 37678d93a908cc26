"""The CPU side of a Sortformer session step, in several processes at once, with PyTorch's intra-op
threads per process set to a given count: how much a pool of one thread per core in every model host
costs when the hosts share the cores (the supervisor's default CPU share, docs/operations.md).

Each process runs what a diarization instance does on the CPU for every batch of sessions between GPU
launches: the speaker-cache and FIFO update of ``update_context`` and the batched cache compression of
``compress_contexts``, on the full model's shapes (512-dim pre-encode embeddings in bf16, 4 speakers,
the ``chunk-15s`` preset: a cache of 188 frames, a 186-frame chunk), for a batch of 5 sessions (the
mean batch of the H200 diarization run). No GPU is used.

Usage: /usr/bin/python3 bench/cpu-threads/contend.py --processes P --threads T [--seconds S]
Prints one JSON line: processes, threads, batches, the per-batch p50 / p95 in ms (all processes'
batches together) and the batches per second over all processes.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "host"))

BATCH = 5


def _worker(threads: int, seconds: float, start_at: float, out: "mp.Queue[List[float]]") -> None:
    import torch

    torch.set_num_threads(threads)
    from voxmux_host.models.sortformer.cache import SpeakerContext, compress_contexts, update_context
    from voxmux_host.models.sortformer.config import FULL, PRESETS

    params = PRESETS["chunk-15s"]
    d, s = FULL.fc_d_model, FULL.n_speakers
    gen = torch.Generator().manual_seed(os.getpid())

    def context() -> SpeakerContext:
        return SpeakerContext(
            spkcache=torch.randn(params.spkcache_len, d, generator=gen).to(torch.bfloat16),
            spkcache_preds=torch.rand(params.spkcache_len, s, generator=gen),
            fifo=torch.zeros(0, d, dtype=torch.bfloat16),
            fifo_preds=torch.zeros(0, s),
            mean_sil_emb=torch.zeros(d),
            n_sil_frames=0,
            compressed=True,
        )

    total = params.spkcache_len + params.chunk_len + 2
    preds = [torch.rand(total, s, generator=gen) for _ in range(BATCH)]
    chunks = [torch.randn(params.chunk_len + 2, d, generator=gen).to(torch.bfloat16) for _ in range(BATCH)]
    while time.time() < start_at:
        time.sleep(0.001)
    times: List[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        began = time.perf_counter()
        contexts = [update_context(context(), preds[b], chunks[b], 1, params.chunk_len, params, compress=False)[0]
                    for b in range(BATCH)]
        compress_contexts(contexts, params)
        times.append((time.perf_counter() - began) * 1000)
    out.put(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    out: "mp.Queue[List[float]]" = ctx.Queue()
    start_at = time.time() + 3.0  # every process imported torch before the clock starts
    workers = [ctx.Process(target=_worker, args=(args.threads, args.seconds, start_at, out))
               for _ in range(args.processes)]
    for w in workers:
        w.start()
    times = sorted(t for _ in workers for t in out.get())
    for w in workers:
        w.join()

    def pct(q: float) -> float:
        return round(times[min(len(times) - 1, int(q * len(times)))], 2)

    print(json.dumps({"processes": args.processes, "threads": args.threads, "cores": os.cpu_count(),
                      "batchSize": BATCH, "batches": len(times), "p50Ms": pct(0.5), "p95Ms": pct(0.95),
                      "batchesPerSecond": round(len(times) / args.seconds, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
