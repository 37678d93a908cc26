"""How many Sortformer sequence batches an instance's pipeline runs per second, with 1 or more batches in
flight, when its forward pass is a wait on the device.

On a GPU the instance's main thread spends a batch's forward pass waiting for the device (the copy of
the outputs back to the host blocks and releases the interpreter lock); the rest of a batch is host work:
reading the session states, staging, the speaker-cache updates, the segments and the new state bytes.
This runs the host's real pipeline (reader queue, main, finisher threads, resident session states) with
the real Sortformer adapter (full shapes, bf16 storage, preset ``chunk-15s``), its forward pass replaced
by synthetic outputs of the right shapes after a sleep of ``--forward-ms-base + --forward-ms-per-session
x batch size`` (a sleep releases the lock as the wait on the device does), and sends batches of
``--batch-size`` sessions, 15 s chunks each, keeping ``--in-flight`` batches in the pipeline as the
scheduler would (a session's next chunk only after its result). It reports batches/s and chunks/s, and
the host time per batch beyond the forward wait.

``--host DIR`` imports ``voxmux_host`` from another checkout's ``host/`` folder, so the same bench runs
two commits side by side (the pipeline and the adapter of each).

    /usr/bin/python3 host/bench_sequence_pipeline.py --in-flight 1,2 --out sequence-pipeline.jsonl
"""
from __future__ import annotations

import argparse
import importlib
import io
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sortformer_support import (RATE, SyntheticOutputs, add_common_arguments, append_line,  # noqa: E402
                                      load_adapter, process_settings, provenance)

WARMUP_ROUNDS = 2  # batches per session group not timed (caches filling, the first compression)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=16, help="sessions per batch")
    parser.add_argument("--batches", type=int, default=40, help="timed batches per level")
    parser.add_argument("--in-flight", default="1,2", help="batches kept in the pipeline, comma-separated")
    parser.add_argument("--forward-ms-base", type=float, default=8.0, help="device wait per forward pass, ms")
    parser.add_argument("--forward-ms-per-session", type=float, default=0.5,
                        help="device wait per session of a forward pass, ms")
    return parser.parse_args(argv)


class _Exited(Exception):
    pass


def _exit(code: int) -> NoReturn:
    raise _Exited(code)


def run(args: argparse.Namespace) -> Dict[str, Any]:
    import torch

    adapter = load_adapter(args, args.batch_size)
    host_module = importlib.import_module("voxmux_host.host")
    # One torch thread and the host process's switch interval, as an instance runs.
    with process_settings(torch, 1, host_module.GIL_SWITCH_INTERVAL_S):
        return _run(args, torch, adapter)


def _run(args: argparse.Namespace, torch: Any, adapter: Any) -> Dict[str, Any]:
    pipeline_module = importlib.import_module("voxmux_host.pipeline")
    work = importlib.import_module("voxmux_host.work")
    log_module = importlib.import_module("voxmux_host.log")
    engine = adapter._engine
    outputs = SyntheticOutputs(engine, torch)
    wait_ms = (args.forward_ms_base, args.forward_ms_per_session)

    def forward(valid: List[int], frames: List[int], context_lengths: List[int]) -> Tuple[Any, Any, List[int]]:
        """Waits as the device would (a sleep releases the interpreter lock, as a blocking copy from the
        device does), then gives the synthetic outputs."""
        lengths = outputs.lengths(frames)
        preds, chunk = outputs(len(valid), max(lengths))
        time.sleep((wait_ms[0] + wait_ms[1] * len(valid)) / 1000)
        return preds, chunk, lengths

    engine._forward = forward
    chunk = int(args.chunk_seconds * RATE)
    audio = (np.random.default_rng(0).standard_normal(chunk) * 3000).astype(np.int16)
    levels = []
    for in_flight in [int(n) for n in args.in_flight.split(",")]:
        levels.append(_level(args, in_flight, adapter, audio, pipeline_module, work, log_module))
    return {**provenance(args, torch), "batchSize": args.batch_size, "forwardMsBase": args.forward_ms_base,
            "forwardMsPerSession": args.forward_ms_per_session, "levels": levels}


def _level(args: argparse.Namespace, in_flight: int, adapter: Any, audio: Any, pipeline_module: Any, work: Any,
           log_module: Any) -> Dict[str, Any]:
    """One level: batches sent as results come back, ``in_flight`` in the pipeline at a time."""
    inbox: "queue.Queue[Any]" = queue.Queue()
    done: "queue.Queue[Tuple[str, int]]" = queue.Queue()
    sink = _Sink(done)
    pipeline = pipeline_module.Pipeline(pipeline_module.PipelineOptions(), pipeline_module.PipelineDeps(
        receive=inbox.get, sink=sink, log=log_module.Logger(io.StringIO()), exit=_exit, clock=time.monotonic))
    inbox.put(work.CallWork(0, lambda: pipeline.bind(work.work_kinds_of(adapter))))
    thread = threading.Thread(target=pipeline.run, name="pipeline-main", daemon=True)
    thread.start()
    # Session groups used in turn: with at most in_flight batches out, a group's previous batch has
    # answered before the group is sent again, as the scheduler keeps it.
    groups = in_flight + 1
    seqs: Dict[int, int] = {}
    warmup = WARMUP_ROUNDS * groups
    total = warmup + args.batches

    def send(j: int) -> None:
        group = j % groups
        seq = seqs.get(group, 0)
        seqs[group] = seq + 1
        items = [work.SequenceWorkItem(f"b{j}-{i}", f"{in_flight}-g{group}-s{i}", seq, audio,
                                       "new" if seq == 0 else "resident", b"", False, {})
                 for i in range(args.batch_size)]
        inbox.put(work.SequenceWork(1, f"b{j}", items))

    stages_before: Dict[str, float] = {}
    sent = 0
    for _ in range(min(in_flight, total)):
        send(sent)
        sent += 1
    started = 0.0
    errors = 0
    for answered in range(total):
        batch_id, failed = done.get(timeout=600)
        errors += failed
        if answered + 1 == warmup:
            started = time.perf_counter()
            stages_before = dict(adapter.stats().stage_ms)
        if sent < total:
            send(sent)
            sent += 1
    elapsed = time.perf_counter() - started
    chunks = args.batches * args.batch_size
    stage_ms = {stage: round((ms - stages_before.get(stage, 0.0)) / chunks, 4)
                for stage, ms in adapter.stats().stage_ms.items()}
    inbox.put(work.CloseWork(999))
    thread.join(60)
    per_batch_ms = elapsed * 1000 / args.batches
    forward_ms = args.forward_ms_base + args.forward_ms_per_session * args.batch_size
    return {"inFlight": in_flight, "batches": args.batches, "errors": errors,
            "batchesPerSecond": round(args.batches / elapsed, 2),
            "chunksPerSecond": round(args.batches * args.batch_size / elapsed, 1),
            "msPerBatch": round(per_batch_ms, 2), "forwardWaitMs": round(forward_ms, 2),
            "hostMsPerBatchBeyondWait": round(per_batch_ms - forward_ms, 2),
            # The adapter's own stage times per chunk over the timed batches ('forward' holds the wait).
            "stageMsPerChunk": stage_ms}


class _Sink:
    """Counts each sequence batch's failed items as its result arrives; nothing else is expected."""

    def __init__(self, done: "queue.Queue[Tuple[str, int]]") -> None:
        self._done = done

    def sequence_done(self, work: Any, outputs: Sequence[Any], compute_ms: float) -> None:
        failed = sum(1 for output in outputs if not hasattr(output, "state"))
        self._done.put((work.batch_id, failed))

    def stopped(self, work: Any) -> None:
        pass

    def rejected(self, work: Any, failure: Any) -> None:
        raise RuntimeError(f"{work.NAME} rejected: {failure}")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"unexpected sink call {name}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(f"{result['label'] or 'this tree'}: batches of {args.batch_size}, device wait "
          f"{args.forward_ms_base:g} + {args.forward_ms_per_session:g} ms per session")
    print("in flight | batches/s | chunks/s | ms per batch | of which host beyond the wait")
    for level in result["levels"]:
        print(f"{level['inFlight']:9d} | {level['batchesPerSecond']:9.2f} | {level['chunksPerSecond']:8.1f} | "
              f"{level['msPerBatch']:12.2f} | {level['hostMsPerBatchBeyondWait']:.2f}")
    if args.out:
        append_line(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
