"""Microbenchmark of the Parakeet adapter on one device, without the host or HTTP.

For each mode (eager, graph) and batch size it runs batches of distinct speech-like clips, as the int16
PCM the host passes, through ``ParakeetAdapter.begin`` and the function it returns, one after the
other, and reports throughput (clips/s and audio seconds per second), per-batch latency p50/p95, the GPU
time split between encoder and decode, the time spent building texts (which the server's finisher thread
overlaps with the next batch), tokens and decode steps per clip, load and warmup time, graphs captured and
device memory; then the same batches pipelined as the host runs them (stager, main and finisher threads).
Prints a table and writes JSON.

    python3 host/bench_parakeet.py --device cuda --config full --batch-sizes 1,2,4,8,16 --out bench.json
    python3 host/bench_parakeet.py --device cpu --config tiny --clip-seconds 3 --iterations 2   # dry run
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, cast

import numpy as np
import numpy.typing as npt
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from voxmux_host.host import GIL_SWITCH_INTERVAL_S  # noqa: E402
from voxmux_host.model_api import BatchFinish, LoadContext, BatchInput  # noqa: E402
from voxmux_host.models.parakeet.adapter import ParakeetAdapter, ParakeetStats  # noqa: E402
from voxmux_host.models.parakeet.model import pcm16_from_float  # noqa: E402
from voxmux_host.models.parakeet.random_init import speech_like_noise  # noqa: E402
from voxmux_host.models.parakeet.staging import StagedClips  # noqa: E402


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def _parse_ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _memory(device: torch.device) -> Dict[str, int]:
    if device.type != "cuda":
        return {}
    return {
        "allocatedBytes": int(torch.cuda.memory_allocated(device)),
        "reservedBytes": int(torch.cuda.memory_reserved(device)),
        "peakAllocatedBytes": int(torch.cuda.max_memory_allocated(device)),
    }


def adapter_options(args: argparse.Namespace, cuda_graphs: bool, batch_sizes: List[int]) -> Dict[str, Any]:
    """The adapter's load options for the model the flags describe (the same for measuring and profiling)."""
    options: Dict[str, Any] = {
        "config": args.config,
        "device": args.device,
        "seed": args.seed,
        "cudaGraphs": cuda_graphs,
        "batchSizes": batch_sizes,
        "lengthBucketsMs": args.buckets_ms or [int(math.ceil(args.clip_seconds * 1000))],
        "decodeChunkSteps": args.chunk_steps,
    }
    if args.dtype:
        options["dtype"] = args.dtype
    if args.nemo:
        options["nemoPath"] = args.nemo
    if args.attention:
        options["attention"] = args.attention
    if args.matmul:
        options["matmul"] = args.matmul
    if args.kernels:
        options["experimentalKernels"] = args.kernels
    if args.compile_decode_step:
        options["compileDecodeStep"] = True
    if args.compile_encoder:
        options["compileEncoder"] = True
    if args.no_cudnn_benchmark:
        options["cudnnBenchmark"] = False
    return options


def run_pipelined(adapter: ParakeetAdapter, batch: List[BatchInput], iterations: int) -> float:
    """clips/s with the model host's threads: a stager stages each batch while the main thread runs the
    one before, and a finisher builds each batch's texts while the main thread runs the next; the
    host's GIL switch interval. What the server's instance can do at most, without the pipe and HTTP."""
    staged_batches: "queue.Queue[Optional[StagedClips]]" = queue.Queue(maxsize=1)
    finishing: "queue.Queue[Optional[BatchFinish]]" = queue.Queue()

    def stage() -> None:
        for _ in range(iterations):
            staged_batches.put(adapter.stage(batch))

    def finish() -> None:
        while True:
            done = finishing.get()
            if done is None:
                return
            done()

    previous = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        start = time.perf_counter()
        stager = threading.Thread(target=stage, name="stager")
        finisher = threading.Thread(target=finish, name="finisher")
        stager.start()
        finisher.start()
        for _ in range(iterations):
            finishing.put(adapter.begin(batch, staged_batches.get()))
        finishing.put(None)
        finisher.join()
        stager.join()
        return len(batch) * iterations / (time.perf_counter() - start)
    finally:
        sys.setswitchinterval(previous)


def run_mode(args: argparse.Namespace, mode: str, clips: List[npt.NDArray[np.int16]]) -> Dict[str, Any]:
    device = torch.device(args.device)
    options = adapter_options(args, cuda_graphs=mode == "graph", batch_sizes=args.batch_sizes)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    adapter = ParakeetAdapter()
    start = time.perf_counter()
    load_info = adapter.load(LoadContext("bench", "parakeet", options))
    load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    warm = adapter.warmup()
    warmup_ms = (time.perf_counter() - start) * 1000
    runner = adapter._runner  # noqa: SLF001 - the benchmark reads the runner's GPU phase timings
    assert runner is not None
    result: Dict[str, Any] = {
        "mode": mode,
        "loadMs": round(load_ms, 1),
        "warmupMs": round(warmup_ms, 1),
        "graphsCaptured": warm.graphs_captured,
        "parameters": load_info.parameters,
        "loadInfo": {k: v for k, v in vars(load_info).items() if k != "stages"},
        "bootStages": [{"stage": s.stage, "ms": s.ms, "bytes": s.bytes} for s in load_info.stages],
        "memoryAfterWarmup": _memory(device),
        "batches": [],
    }
    for batch_size in args.batch_sizes:
        batch = [BatchInput(f"c{i}", clips[i % len(clips)]) for i in range(batch_size)]
        for _ in range(args.warmup_iterations):
            adapter.run_batch(batch)
        before = adapter.stats()
        runner.phase_times_ms = [] if device.type == "cuda" else None
        latencies: List[float] = []
        finish_ms: List[float] = []
        wall = time.perf_counter()
        for _ in range(args.iterations):
            t0 = time.perf_counter()
            finish = adapter.begin(batch)
            t1 = time.perf_counter()
            finish()
            latencies.append((time.perf_counter() - t0) * 1000)
            finish_ms.append((time.perf_counter() - t1) * 1000)
        wall_s = time.perf_counter() - wall
        after = adapter.stats()
        phases = runner.phase_times_ms or []
        runner.phase_times_ms = None
        pipelined = run_pipelined(adapter, batch, args.iterations)
        assert isinstance(before, ParakeetStats) and isinstance(after, ParakeetStats)
        clips_done = after.clips - before.clips
        row = {
            "batchSize": batch_size,
            "iterations": args.iterations,
            "clipsPerS": round(clips_done / wall_s, 2),
            "audioSecondsPerS": round((after.audio_seconds - before.audio_seconds) / wall_s, 1),
            "latencyP50Ms": round(_percentile(latencies, 50), 2),
            "latencyP95Ms": round(_percentile(latencies, 95), 2),
            "encoderMsP50": round(_percentile([p[0] for p in phases], 50), 2) if phases else None,
            "decodeMsP50": round(_percentile([p[1] for p in phases], 50), 2) if phases else None,
            # Building texts, words and segments: in the server, the host's finisher thread does this
            # while the next batch runs; here it runs in turn with the model.
            "finishMsP50": round(_percentile(finish_ms, 50), 2),
            # The same batches through the host's stager, main and finisher threads at once.
            "pipelinedClipsPerS": round(pipelined, 2),
            "tokensPerClip": round((after.tokens - before.tokens) / max(clips_done, 1), 1),
            "decodeStepsPerClip": round((after.decode_steps - before.decode_steps) / max(clips_done, 1), 1),
            "tokensPerAudioSecond": round(
                (after.tokens - before.tokens) / max(after.audio_seconds - before.audio_seconds, 1e-9), 2
            ),
            "graphReplays": after.graph_replays - before.graph_replays,
            "eagerBatches": after.eager_batches - before.eager_batches,
            "memory": _memory(device),
        }
        result["batches"].append(row)
        print(
            f"{mode:6} b={batch_size:<3} {row['clipsPerS']:>8} clips/s  p50 {row['latencyP50Ms']:>8} ms  "
            f"p95 {row['latencyP95Ms']:>8} ms  enc {row['encoderMsP50']} ms  dec {row['decodeMsP50']} ms  "
            f"finish {row['finishMsP50']} ms  pipelined {row['pipelinedClipsPerS']} clips/s  "
            f"tok/clip {row['tokensPerClip']}  steps/clip {row['decodeStepsPerClip']}",
            flush=True,
        )
    adapter.close()
    return result


def print_table(report: Dict[str, Any]) -> None:
    header = (
        f"{'mode':6} {'batch':>5} {'clips/s':>9} {'audio s/s':>10} {'p50 ms':>9} {'p95 ms':>9} {'enc ms':>8} "
        f"{'dec ms':>8} {'tok/clip':>9} {'steps/clip':>10} {'tok/s':>6} {'peak GiB':>9}"
    )
    print()
    print(
        f"Parakeet {report['config']} on {report['deviceName']}, {report['clipSeconds']} s clips, "
        f"dtype {report['dtype']}"
    )
    print(header)
    print("-" * len(header))
    for mode in report["modes"]:
        for row in mode["batches"]:
            peak = row["memory"].get("peakAllocatedBytes")
            print(
                f"{mode['mode']:6} {row['batchSize']:>5} {row['clipsPerS']:>9} {row['audioSecondsPerS']:>10} "
                f"{row['latencyP50Ms']:>9} {row['latencyP95Ms']:>9} {str(row['encoderMsP50']):>8} "
                f"{str(row['decodeMsP50']):>8} {row['tokensPerClip']:>9} {row['decodeStepsPerClip']:>10} "
                f"{row['tokensPerAudioSecond']:>6} {(peak / 2**30 if peak else 0):>9.2f}"
            )
    for mode in report["modes"]:
        print(
            f"{mode['mode']}: load {mode['loadMs']} ms, warmup {mode['warmupMs']} ms, "
            f"{mode['graphsCaptured']} graphs, memory after warmup {mode['memoryAfterWarmup']}"
        )


def profile_eager_batch(args: argparse.Namespace, clips: List[npt.NDArray[np.int16]], path: Path) -> Dict[str, Any]:
    """One batch without CUDA graphs under torch.profiler: GPU time per operator (a CUDA graph replays the
    same kernels, without the launch gaps), written as a table to ``path``; returns the top operators.

    The batch runs twice before it is profiled and nothing else runs on this model, so compiled parts
    are compiled for its shape alone (static shapes), as they are in graph mode with one batch size and
    one bucket. (A model that first ran other shapes recompiles with dynamic sizes, and some of
    Inductor's kernels are then much slower: its masked position bias took 552 us per layer on an H200,
    where the project's Triton kernel for it takes 101 us.)"""
    from torch.profiler import ProfilerActivity, profile

    # The same model as the measured modes (compiled parts included), without graphs, so that each
    # kernel shows up on its own.
    options = adapter_options(args, cuda_graphs=False, batch_sizes=[args.profile_batch])
    adapter = ParakeetAdapter()
    adapter.load(LoadContext("profile", "parakeet", options))
    batch = [BatchInput(f"p{i}", clips[i % len(clips)]) for i in range(args.profile_batch)]
    for _ in range(2):
        adapter.run_batch(batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        adapter.run_batch(batch)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    averages = prof.key_averages()
    sample = averages[0] if len(averages) else None
    if not torch.cuda.is_available():
        key = "self_cpu_time_total"  # a CPU run: time per operator on the CPU
    elif sample is not None and hasattr(sample, "self_device_time_total"):
        key = "self_device_time_total"
    else:
        key = "self_cuda_time_total"
    table = averages.table(sort_by=key, row_limit=45)
    path.write_text(f"one batch without graphs of {args.profile_batch} x {args.clip_seconds} s clips\n{table}\n")
    rows = sorted(averages, key=lambda e: cast(float, getattr(e, key)), reverse=True)
    total_us = sum(getattr(e, key) for e in averages)
    adapter.close()
    return {
        "batchSize": args.profile_batch,
        # gpuMs* are CPU times on a machine without CUDA (timeOn says which).
        "timeOn": "cpu" if key == "self_cpu_time_total" else "gpu",
        "gpuMsTotal": round(total_us / 1000, 2),
        "top": [
            {"op": e.key, "gpuMs": round(getattr(e, key) / 1000, 2), "calls": e.count}
            for e in rows[:25]
            if getattr(e, key) > 0
        ],
        "table": path.name,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--config", default="full", choices=["full", "tiny"])
    parser.add_argument("--nemo", default=None, help="a .nemo archive instead of random weights")
    parser.add_argument("--dtype", default=None, choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--attention", default=None, choices=["auto", "sdpa", "manual"])
    parser.add_argument("--matmul", default=None, choices=["bf16", "fp8"], help="fp8 needs --compile-encoder")
    parser.add_argument(
        "--kernels",
        default=None,
        choices=["torch", "triton"],
        help="triton: the encoder's own Triton kernels (the experimental option experimentalKernels)",
    )
    parser.add_argument("--batch-sizes", type=_parse_ints, default=[1, 2, 4, 8, 16])
    parser.add_argument(
        "--buckets-ms",
        type=_parse_ints,
        default=None,
        help="length buckets captured (default: the clip's own length only); several make the compiled encoder's time dimension dynamic, as the adapter's default buckets do",
    )
    parser.add_argument("--clip-seconds", type=float, default=45.0)
    parser.add_argument("--modes", default="eager,graph", help="comma-separated: eager, graph")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup-iterations", type=int, default=2)
    parser.add_argument("--chunk-steps", type=int, default=8)
    parser.add_argument("--compile-decode-step", action="store_true", help="torch.compile the decode step")
    parser.add_argument("--compile-encoder", action="store_true", help="torch.compile the conformer layers")
    parser.add_argument("--no-cudnn-benchmark", action="store_true", help="keep cuDNN's heuristic algorithms")
    parser.add_argument("--distinct-clips", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench-parakeet.json", help="where to write the JSON report")
    parser.add_argument(
        "--profile-batch",
        type=int,
        default=0,
        help="also profile one batch of this size without graphs (same compile flags) with torch.profiler: writes OUT.profile.txt",
    )
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any(m not in ("eager", "graph") for m in modes):
        parser.error(f"Expected modes from eager, graph: got {args.modes}")
    if args.buckets_ms and max(args.buckets_ms) < args.clip_seconds * 1000:
        parser.error(f"Expected a bucket of at least the clip's {args.clip_seconds} s: got --buckets-ms {args.buckets_ms}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("CUDA is not available; use --device cpu")
    if device.type == "cpu" and "graph" in modes:
        print("graph mode needs CUDA: on the CPU it runs eagerly", flush=True)

    clips = [pcm16_from_float(speech_like_noise(args.clip_seconds, 1000 + i)) for i in range(args.distinct_clips)]
    report: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "config": args.config if not args.nemo else f"nemo:{args.nemo}",
        "device": str(device),
        "deviceName": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "dtype": args.dtype or ("bf16" if device.type == "cuda" else "fp32"),
        "clipSeconds": args.clip_seconds,
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "modes": [],
    }
    for mode in modes:
        report["modes"].append(run_mode(args, mode, clips))
    if args.profile_batch > 0:
        report["profile"] = profile_eager_batch(args, clips, Path(args.out).with_suffix(".profile.txt"))
    print_table(report)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
