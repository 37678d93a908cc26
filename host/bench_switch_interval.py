"""How long the host's main thread waits for the GIL while the finisher builds texts, per switch interval.

In the model host the main thread replays a batch's decode graph in chunks: it waits for a CUDA event
(which releases the GIL), then queues the next chunk, a few hundred microseconds of Python, about 33
times per batch of 45 s clips. Meanwhile the finisher thread builds the previous batch's texts, words
and segments, tens of milliseconds of pure Python. Each time the main thread wakes it must get the
GIL back from the finisher, which gives it up only at the interpreter's switch interval: until then
the GPU has nothing queued.

This runs that pattern without a GPU: the main thread waits ``--chunk-ms`` (an Event wait, which
releases the GIL as an event synchronize does) and then does a little Python, ``--chunks`` times per
batch, while a finisher thread runs the real text building (``words_from_tokens``,
``segments_from_words``) for ``--clips`` decoded items of ``--tokens`` tokens each. It reports, per
switch interval, how late the main thread resumed after each wait and how long a batch's chunk loop
took against its ideal (chunks x chunk time), side by side.

    /usr/bin/python3 host/bench_switch_interval.py --batches 20 --out switch.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from voxmux_host.host import GIL_SWITCH_INTERVAL_S  # noqa: E402
from voxmux_host.models.parakeet.adapter import segments_from_words, words_from_tokens  # noqa: E402
from voxmux_host.models.parakeet.decoder import DecodedItem  # noqa: E402
from voxmux_host.models.parakeet.tokenizer import SyntheticTokenizer  # noqa: E402

FRAME_S = 0.08
DEFAULT_INTERVAL_S = 0.005


def _items(clips: int, tokens: int, seed: int) -> List[DecodedItem]:
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(clips):
        ids = rng.integers(1, 1024, tokens).tolist()
        durations = rng.integers(1, 5, tokens).tolist()
        frames = np.cumsum([0] + durations[:-1]).tolist()
        items.append(DecodedItem(tokens=ids, frames=frames, durations=durations, steps=tokens))
    return items


def _build_texts(tokenizer: SyntheticTokenizer, items: Sequence[DecodedItem], duration_s: float) -> None:
    for item in items:
        text = tokenizer.decode(item.tokens)
        words = words_from_tokens(tokenizer, item, FRAME_S, duration_s)
        segments_from_words(words, text, duration_s)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def run(args: argparse.Namespace, interval_s: float, with_finisher: bool = True) -> Dict[str, Any]:
    tokenizer = SyntheticTokenizer(1024)
    items = _items(args.clips, args.tokens, seed=1)
    chunk_s = args.chunk_ms / 1000
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    try:
        finish_ms: List[float] = []
        late_ms: List[float] = []
        loop_ms: List[float] = []
        wait = threading.Event()
        for _ in range(args.batches):
            # The finisher builds the last batch's texts while this batch's chunks run.
            def finish() -> None:
                start = time.perf_counter()
                _build_texts(tokenizer, items, args.clip_seconds)
                finish_ms.append((time.perf_counter() - start) * 1000)

            finisher = threading.Thread(target=finish if with_finisher else lambda: None)
            loop_start = time.perf_counter()
            finisher.start()
            for _ in range(args.chunks):
                start = time.perf_counter()
                wait.wait(chunk_s)
                late_ms.append((time.perf_counter() - start - chunk_s) * 1000)
                sum(range(200))  # queueing the next chunk: a little Python
            loop_ms.append((time.perf_counter() - loop_start) * 1000)
            finisher.join()
    finally:
        sys.setswitchinterval(previous)
    ideal_ms = args.chunks * args.chunk_ms
    return {
        "switchIntervalMs": interval_s * 1000,
        "finisher": with_finisher,
        "finishMsP50": round(_percentile(finish_ms, 50), 2) if finish_ms else None,
        "wakeLateMsP50": round(_percentile(late_ms, 50), 3),
        "wakeLateMsP99": round(_percentile(late_ms, 99), 3),
        "chunkLoopMsP50": round(_percentile(loop_ms, 50), 2),
        "chunkLoopIdealMs": round(ideal_ms, 2),
        "chunkLoopExtraMsP50": round(_percentile(loop_ms, 50) - ideal_ms, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=33, help="decode chunks per batch (260 steps / 8 per chunk)")
    parser.add_argument("--chunk-ms", type=float, default=0.55, help="GPU time of one decode chunk")
    parser.add_argument("--clips", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=162, help="tokens per clip")
    parser.add_argument("--clip-seconds", type=float, default=45.0)
    parser.add_argument("--out", default="bench-switch-interval.json")
    args = parser.parse_args(argv)
    # The floor (no finisher: what the waits themselves cost), then Python's default and the host's interval.
    rows = [run(args, DEFAULT_INTERVAL_S, with_finisher=False)]
    rows += [run(args, interval) for interval in (DEFAULT_INTERVAL_S, GIL_SWITCH_INTERVAL_S)]
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "rows": rows,
    }
    print(f"{'switch ms':>9} {'finisher':>8} {'finish ms':>9} {'late p50':>9} {'late p99':>9} {'loop ms':>9} {'ideal ms':>9} {'extra ms':>9}")
    for r in rows:
        print(
            f"{r['switchIntervalMs']:>9} {'yes' if r['finisher'] else 'no':>8} {str(r['finishMsP50']):>9} "
            f"{r['wakeLateMsP50']:>9} {r['wakeLateMsP99']:>9} "
            f"{r['chunkLoopMsP50']:>9} {r['chunkLoopIdealMs']:>9} {r['chunkLoopExtraMsP50']:>9}"
        )
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
