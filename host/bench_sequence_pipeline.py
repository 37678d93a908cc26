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
import datetime
import importlib
import io
import json
import platform
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence, Tuple

import numpy as np

RATE = 16000
TURN_FRAMES = 40  # 3.2 s turns of one speaker in the synthetic predictions
WARMUP_ROUNDS = 2  # batches per session group not timed (caches filling, the first compression)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default=str(Path(__file__).resolve().parent),
                        help="folder holding the voxmux_host package to run (default: this one)")
    parser.add_argument("--config", default="full", help="adapter config: full (served shapes) or tiny (tests)")
    parser.add_argument("--dtype", default="bf16", help="storage dtype of the adapter (bf16 as on CUDA)")
    parser.add_argument("--batch-size", type=int, default=16, help="sessions per batch")
    parser.add_argument("--batches", type=int, default=40, help="timed batches per level")
    parser.add_argument("--in-flight", default="1,2", help="batches kept in the pipeline, comma-separated")
    parser.add_argument("--forward-ms-base", type=float, default=8.0, help="device wait per forward pass, ms")
    parser.add_argument("--forward-ms-per-session", type=float, default=0.5,
                        help="device wait per session of a forward pass, ms")
    parser.add_argument("--chunk-seconds", type=float, default=15.0)
    parser.add_argument("--label", default="", help="names the side in the output")
    parser.add_argument("--out", help="append the result as one JSON line to this file")
    return parser.parse_args(argv)


class _Exited(Exception):
    pass


def _exit(code: int) -> NoReturn:
    raise _Exited(code)


def run(args: argparse.Namespace) -> Dict[str, Any]:
    sys.path.insert(0, str(Path(args.host).resolve()))
    import torch

    torch.set_num_threads(1)
    host_module = importlib.import_module("voxmux_host.host")
    sys.setswitchinterval(host_module.GIL_SWITCH_INTERVAL_S)  # as the host process sets it
    adapter_module = importlib.import_module("voxmux_host.models.sortformer.adapter")
    model_api = importlib.import_module("voxmux_host.model_api")
    pipeline_module = importlib.import_module("voxmux_host.pipeline")
    work = importlib.import_module("voxmux_host.work")
    log_module = importlib.import_module("voxmux_host.log")

    adapter = adapter_module.SortformerAdapter()
    adapter.load(model_api.LoadContext("bench", "sortformer", {
        "config": args.config, "device": "cpu", "dtype": args.dtype, "maxBatchSize": args.batch_size}))
    engine = adapter._engine
    engine._forward = _waiting_forward(engine, torch, args.forward_ms_base, args.forward_ms_per_session)
    chunk = int(args.chunk_seconds * RATE)
    audio = (np.random.default_rng(0).standard_normal(chunk) * 3000).astype(np.int16)
    levels = []
    for in_flight in [int(n) for n in args.in_flight.split(",")]:
        levels.append(_level(args, in_flight, adapter, audio, pipeline_module, work, log_module))
    return {
        "label": args.label,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "config": args.config,
        "dtype": args.dtype,
        "batchSize": args.batch_size,
        "forwardMsBase": args.forward_ms_base,
        "forwardMsPerSession": args.forward_ms_per_session,
        "levels": levels,
    }


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


def _waiting_forward(engine: Any, torch: Any, base_ms: float, per_session_ms: float) -> Any:
    """Stands in for ``StepEngine._forward``: waits as the device would (a sleep releases the interpreter
    lock, as a blocking copy from the device does), then returns predictions where one speaker at a time
    is active (turns of TURN_FRAMES) over a little noise, random chunk embeddings and the chunk lengths.
    The outputs are made once per shape (the host only reads them), so the wait is the forward's time."""
    generator = torch.Generator().manual_seed(0)
    factor = engine.config.subsampling_factor
    d_model = engine.config.fc_d_model
    speakers = engine.config.n_speakers
    made: Dict[Tuple[int, int], Tuple[Any, Any]] = {}

    def outputs(b: int, t_chunk: int) -> Tuple[Any, Any]:
        if (b, t_chunk) not in made:
            n = engine.context_frames + t_chunk
            turns = torch.randint(0, speakers, (b, n // TURN_FRAMES + 1), generator=generator)
            active = torch.nn.functional.one_hot(turns.repeat_interleave(TURN_FRAMES, dim=1)[:, :n], speakers)
            preds = active.float() * 0.8 + torch.rand(b, n, speakers, generator=generator) * 0.15
            made[(b, t_chunk)] = (preds, torch.randn(b, t_chunk, d_model, generator=generator).to(engine.storage_dtype))
        return made[(b, t_chunk)]

    def forward(valid: List[int], frames: List[int], context_lengths: List[int]) -> Tuple[Any, Any, List[int]]:
        lengths = [-(-f // factor) for f in frames]
        preds, chunk = outputs(len(valid), max(lengths))
        time.sleep((base_ms + per_session_ms * len(valid)) / 1000)
        return preds, chunk, lengths

    return forward


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
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
