"""Microbenchmark of the Whisper engine on one device, without the host or HTTP: (a) naive, batch 1, eager,
a fresh key-value cache for every request (no reuse across requests), against (b) the engine, batches of
windows decoding together over its static cache with CUDA graphs of the step. Same clips, same weights,
same token budget (end-of-text forced at ``--tokens-per-audio-second``: random weights decode to arbitrary
lengths otherwise). Reports clips/s, audio seconds per second, tokens/s, per-batch latency p50/p95,
encoder calls and decode steps, and the encoder's time eager, compiled and with FP8 products side by side;
prints a table and writes JSON (each part as it ends: ``--parts`` picks them).

The ``profile`` part (not in the default) tells where the time goes, under torch.profiler: the encoder at
``--profile-batch-sizes`` in each of ``--encoder-variants`` (kernel time a call by category: GEMM, FP8 GEMM,
attention, quantization, norms/elementwise, copies/casts, convolution, other; kernel count, the device's busy
time against the wall time, the largest kernels, the products' TFLOP/s); the encoder's products alone at its
shapes (F.linear against fp8_linear, against torch._scaled_mm on operands quantized beforehand, and the
quantization alone, eager and compiled); and one decode step of each ``--batch-sizes`` slots, eager and as
its CUDA graph's replay (self-attention, cross-attention, GEMM, logits, logit rules/argmax, KV cache writes,
copies), with the bytes a step must read and the bandwidth its time implies. Kernel tables go to
OUT.profile.md beside the JSON. On the CPU, operators stand for kernels, and what cannot run there (compile,
FP8, graphs) is skipped with the reason in the report.

    python3 host/bench_whisper.py --device cuda --config large-v3-turbo --clip-seconds 45 --out engine.json
    python3 host/bench_whisper.py --device cuda --parts variants --batch-sizes 16,64 --out encoder.json  # the encoder alone
    python3 host/bench_whisper.py --device cuda --parts ahead --batch-sizes 64 --out ahead.json  # step_ahead against not
    python3 host/bench_whisper.py --device cuda --parts rules --batch-sizes 1,16,64 --out rules.json  # compile_rules against not
    python3 host/bench_whisper.py --device cuda --parts spans --batch-sizes 1,16,64 --out spans.json  # step_spans
    python3 host/bench_whisper.py --device cuda --parts attention --batch-sizes 16,64 --out attention.json  # SDPA backends
    python3 host/bench_whisper.py --device cuda --parts first --batch-sizes 1,8,64 --out first.json  # new shapes' cost
    python3 host/bench_whisper.py --device cuda --parts profile --batch-sizes 1,16,64 --profile-batch-sizes 1,16,64 \
        --out profile.json  # where the time goes (meant to take under 5 minutes, compiles included)
    python3 host/bench_whisper.py --device cpu --config tiny --clip-seconds 2 --batch-sizes 2 --naive-clips 1  # dry run
    python3 host/bench_whisper.py --device cpu --config tiny --batch-sizes 1,2 --parts profile \
        --encoder-variants eager,compiled,fp8 --profile-batch-sizes 1 --out profile.json  # the profile's dry run
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_whisper_profile import print_profile, profile_part  # noqa: E402
from bench_whisper_support import DTYPES, encoder_as, progress, sync, timed_ms, variant_problem  # noqa: E402
from voxmux_host.attention_kernels import attention_kernels, attention_kernels_missing, held_to  # noqa: E402
from voxmux_host.models.whisper.config import PRESETS  # noqa: E402
from voxmux_host.models.whisper.decoding import EngineOptions, RequestOptions, WhisperEngine  # noqa: E402
from voxmux_host.models.whisper.model import KVCache, build_model  # noqa: E402
from voxmux_host.models.whisper.tokenizer import synthetic_tokenizer, tiny_tokenizer  # noqa: E402


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


def speech_like_clip(seconds: float, seed: int) -> torch.Tensor:
    """Noise shaped like speech's envelope (syllable-rate amplitude modulation), in [-1, 1]."""
    generator = torch.Generator().manual_seed(seed)
    samples = int(seconds * 16000)
    t = torch.arange(samples, dtype=torch.float32) / 16000
    envelope = 0.5 + 0.5 * torch.sin(2 * np.pi * 4.0 * t + seed)
    return (torch.randn(samples, generator=generator) * 0.1 * envelope).clamp(-1, 1)


def _run(engine: WhisperEngine, clips: List[torch.Tensor], device: torch.device) -> Dict[str, Any]:
    requests = [RequestOptions(language="en")] * len(clips)
    sync(device)
    start = time.perf_counter()
    results = engine.transcribe(clips, requests)
    sync(device)
    return {"seconds": time.perf_counter() - start, "tokens": sum(r.tokens for r in results)}


def run_benchmark(args: argparse.Namespace) -> Dict[str, Any]:
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    config = PRESETS[args.config]
    model = build_model(config, seed=args.seed).to(device=device, dtype=dtype).eval()
    tokenizer = tiny_tokenizer() if args.config == "tiny" else synthetic_tokenizer(config.n_vocab)
    clips = [speech_like_clip(args.clip_seconds, seed) for seed in range(max(args.batch_sizes + [args.naive_clips]))]
    common = dict(temperature_increment=0.0, max_tokens_per_audio_second=args.tokens_per_audio_second)
    report: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.node(), "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "config": args.config, "dtype": str(dtype).replace("torch.", ""), "clipSeconds": args.clip_seconds,
        "tokensPerAudioSecond": args.tokens_per_audio_second, "command": " ".join(sys.argv), "modes": [],
    }
    if "modes" in args.parts:
        _naive(report, model, tokenizer, clips, device, dtype, common, args)
    # (b) the engine: batches of each size, graphs captured once.
    slots = max(args.batch_sizes)
    sizes = tuple(sorted({1, 2, 4, 8, 16, 32, 64, slots} & set(range(1, slots + 1))))
    engine = WhisperEngine(model, tokenizer, device, dtype,
                           EngineOptions(slots=slots, batch_sizes=sizes, use_graphs=device.type == "cuda", **common))
    graphs = engine.capture_graphs()
    if "modes" in args.parts:
        _engine_modes(report, engine, clips, graphs, device, args)
    if "stages" in args.parts:
        report["stages"] = stage_times(engine, model, config, sizes, device, dtype, args.stage_repeats)
        progress(report, args.out, "stages")
    if "rules" in args.parts:
        report["stepRules"] = step_rules_times(engine, model, tokenizer, sizes, device, dtype, common, args.stage_repeats)
        progress(report, args.out, "step rules")
    if "spans" in args.parts:
        report["stepSpans"] = step_span_times(model, tokenizer, sizes, device, dtype, common, args.stage_repeats,
                                              engine.options.use_graphs)
        progress(report, args.out, "step spans")
    if "ahead" in args.parts:
        report["stepAhead"] = step_ahead(engine, model, tokenizer, clips, device, dtype, common, args)
        progress(report, args.out, "step ahead")
    if "variants" in args.parts:
        report["encoderVariants"] = encoder_variants(model, config, sizes, device, dtype, args.encoder_variants,
                                                     max(1, args.stage_repeats // 10))
        progress(report, args.out, "encoder variants")
    if "first" in args.parts:
        report["firstCalls"] = first_calls(model, config, args.batch_sizes, device, dtype)
        progress(report, args.out, "first calls")
    if "attention" in args.parts:
        report["encoderAttention"] = encoder_attention(config, sizes, device, dtype, max(1, args.stage_repeats // 5))
        progress(report, args.out, "encoder attention")
    if "profile" in args.parts:
        profile_part(report, engine, model, config, device, dtype, args)
    return report


def step_ahead(engine: WhisperEngine, model: Any, tokenizer: Any, clips: List[torch.Tensor], device: torch.device,
               dtype: torch.dtype, common: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    """The engine with each decode step launched before the previous step's tokens are read (step_ahead)
    against the engine without it: the same ``--ahead-clips`` clips through all the slots (joins of 8
    windows or after 50 ms, as the served engine), alternating, ``--iterations`` rounds each."""
    options = engine.options
    joins: Dict[str, Any] = {"join_min_windows": 8, "join_max_wait_s": 0.05}
    plain = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
        slots=options.slots, batch_sizes=options.batch_sizes, use_graphs=options.use_graphs, **joins, **common))
    ahead = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
        slots=options.slots, batch_sizes=options.batch_sizes, use_graphs=options.use_graphs, step_ahead=True,
        **joins, **common))
    plain.capture_graphs()
    ahead.capture_graphs()
    batch = [clips[i % len(clips)] for i in range(args.ahead_clips)]
    sides: Dict[str, Dict[str, List[float]]] = {"plain": {}, "ahead": {}}
    for round_ in range(args.warmup + args.iterations):
        for name, side in (("plain", plain), ("ahead", ahead)):
            steps = side.counters.decode_steps
            run = _run(side, batch, device)
            if round_ < args.warmup:
                continue
            rows = sides[name]
            rows.setdefault("seconds", []).append(run["seconds"])
            rows.setdefault("tokens", []).append(run["tokens"])
            rows.setdefault("decodeSteps", []).append(side.counters.decode_steps - steps)
    summary: Dict[str, Any] = {"clips": len(batch), "slots": options.slots, "rounds": args.iterations}
    for name, rows in sides.items():
        seconds = float(np.median(rows["seconds"]))
        summary[name] = {**rows, "medianSeconds": seconds, "clipsPerSecond": len(batch) / seconds,
                         "wallMsPerStep": seconds * 1000 / float(np.median(rows["decodeSteps"]))}
    summary["speedup"] = summary["ahead"]["clipsPerSecond"] / summary["plain"]["clipsPerSecond"]
    del plain, ahead
    return summary


def _naive(report: Dict[str, Any], model: Any, tokenizer: Any, clips: List[torch.Tensor], device: torch.device,
           dtype: torch.dtype, common: Dict[str, Any], args: argparse.Namespace) -> None:
    """(a) naive: one clip at a time, eager, a fresh cache per request."""
    latencies: List[float] = []
    tokens = 0
    for i in range(args.naive_clips + args.warmup):
        engine = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(slots=1, batch_sizes=(1,), **common))
        run = _run(engine, [clips[i % len(clips)]], device)
        if i >= args.warmup:
            latencies.append(run["seconds"])
            tokens += run["tokens"]
        del engine
    total = sum(latencies)
    report["modes"].append({
        "mode": "a-naive", "batchSize": 1, "clips": len(latencies), "clipsPerSecond": len(latencies) / total,
        "audioSecondsPerSecond": len(latencies) * args.clip_seconds / total, "tokensPerSecond": tokens / total,
        "latencyP50S": _percentile(latencies, 50), "latencyP95S": _percentile(latencies, 95),
    })
    progress(report, args.out, "naive")


def _engine_modes(report: Dict[str, Any], engine: WhisperEngine, clips: List[torch.Tensor], graphs: int,
                  device: torch.device, args: argparse.Namespace) -> None:
    """(b) the engine: batches of each size."""
    for size in args.batch_sizes:
        batch = clips[:size]
        for _ in range(args.warmup):
            _run(engine, batch, device)
        before = dict(vars(engine.counters))
        runs = [_run(engine, batch, device) for _ in range(args.iterations)]
        after = vars(engine.counters)
        seconds = [r["seconds"] for r in runs]
        total = sum(seconds)
        report["modes"].append({
            "mode": "b-engine", "batchSize": size, "clips": size * len(runs), "graphs": graphs,
            "clipsPerSecond": size * len(runs) / total, "audioSecondsPerSecond": size * len(runs) * args.clip_seconds / total,
            "tokensPerSecond": sum(r["tokens"] for r in runs) / total,
            "latencyP50S": _percentile(seconds, 50), "latencyP95S": _percentile(seconds, 95),
            "decodeStepsPerBatch": (after["decode_steps"] - before["decode_steps"]) / len(runs),
            "encoderCallsPerBatch": (after["encoder_calls"] - before["encoder_calls"]) / len(runs),
            "graphReplays": after["graph_replays"] - before["graph_replays"],
        })
        progress(report, args.out, f"engine batch {size}")
    naive = report["modes"][0]["clipsPerSecond"]
    for mode in report["modes"]:
        mode["speedupOverNaive"] = mode["clipsPerSecond"] / naive


@torch.no_grad()
def stage_times(engine: WhisperEngine, model: Any, config: Any, sizes: Sequence[int], device: torch.device,
                dtype: torch.dtype, repeats: int) -> Dict[str, Any]:
    """Where a batch's time goes: the encoder on b padded 30 s windows, and one decode step (the replayed
    graph, or the eager step) for b slots, each in milliseconds."""
    encoder: Dict[str, float] = {}
    step: Dict[str, float] = {}
    for b in sizes:
        mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
        encoder[str(b)] = timed_ms(lambda: model.encoder(mel), device, max(1, repeats // 10))
        step[str(b)] = timed_ms(lambda: engine._run_step(b), device, repeats)
    return {"encoderMs": encoder, "stepMs": step, "repeats": repeats}


@torch.no_grad()
def step_rules_times(engine: WhisperEngine, model: Any, tokenizer: Any, sizes: Sequence[int], device: torch.device,
                     dtype: torch.dtype, common: Dict[str, Any], repeats: int) -> Dict[str, Any]:
    """One decode step for b slots, the replayed graph, with the logit rules eager (``engine``) and compiled
    (compile_rules: a second engine on the same model, CUDA only), alternating per batch size; milliseconds.
    Elsewhere only the eager side runs, and the report says why."""
    times: Dict[str, Any] = {"eager": {}, "compiled": {}}
    compiled = None
    if engine.options.use_graphs:
        options = engine.options
        compiled = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
            slots=options.slots, batch_sizes=options.batch_sizes, use_graphs=True, compile_rules=True, **common))
        start = time.perf_counter()
        compiled.capture_graphs()
        times["compiledCaptureSeconds"] = time.perf_counter() - start  # the rules' compilations included
    else:
        times["skipped"] = "compile_rules runs in CUDA graphs: not on this device"
    for b in sizes:
        for name, side in (("eager", engine), ("compiled", compiled)):
            if side is not None:
                times[name][str(b)] = timed_ms(lambda: side._run_step(b), device, repeats)
    return times


#: The cache span the spans part times a step over, besides the whole cache (the bench's pieces decode at
#: most about 70 tokens after a prompt of 3 or 4).
STEP_SPAN = 128


@torch.no_grad()
def step_span_times(model: Any, tokenizer: Any, sizes: Sequence[int], device: torch.device, dtype: torch.dtype,
                    common: Dict[str, Any], repeats: int, use_graphs: bool) -> Dict[str, Any]:
    """One decode step for b slots over the whole self-attention cache and over its first
    :data:`STEP_SPAN` positions (step_spans), the two alternating per size, ms: replayed from their CUDA
    graphs where there are graphs, eager elsewhere."""
    n_ctx = model.config.n_text_ctx
    span = min(STEP_SPAN, n_ctx - 1)
    spanned = WhisperEngine(model, tokenizer, device, dtype, EngineOptions(
        slots=max(sizes), batch_sizes=tuple(sizes), use_graphs=use_graphs, step_spans=(span,), **common))
    spanned.capture_graphs()
    times: Dict[str, Any] = {"span": span, "replayed": bool(spanned.graphs), "ms": {str(n_ctx): {}, str(span): {}}}
    for b in sizes:
        for s in (n_ctx, span):
            graph = spanned.graphs.get((b, s))
            step = graph.replay if graph is not None else (lambda: spanned._step(b, s))
            times["ms"][str(s)][str(b)] = timed_ms(step, device, repeats)
    return times


@torch.no_grad()
def encoder_variants(model: Any, config: Any, sizes: Sequence[int], device: torch.device, dtype: torch.dtype,
                     variants: Sequence[str], repeats: int) -> Dict[str, Dict[str, float]]:
    """The encoder's time on b padded 30 s windows, side by side: ``eager``; ``compiled`` (compileEncoder:
    batches under COMPILED_MIN_WINDOWS run eager, as served); ``fp8`` (compiled, with the products in FP8:
    matmul fp8). Runs last: it changes the model's encoder."""
    times: Dict[str, Dict[str, float]] = {}
    for variant in variants:
        encoder_as(model, config, variant, device, dtype)
        times[variant] = {}
        for b in sizes:
            mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
            times[variant][str(b)] = timed_ms(lambda: model.encoder(mel), device, repeats)
            print(f"encoder {variant}, batch {b}: {times[variant][str(b)]:.2f} ms", flush=True)
    return times


#: Prompt lengths (tokens) of the decoder's prefill in the first-calls part: a bare start-of-transcript
#: sequence, a short prompt, a long one.
FIRST_PREFILL_LENGTHS = (3, 24, 96)
#: The attention kernels the first-calls part also holds the prefill to (torch.nn.attention.SDPBackend), each
#: on prompts a token longer than the last's: kernels that keep no plan per shape, unlike cuDNN's, whose
#: graph torch builds for each new shape.
FIRST_PREFILL_KERNELS = ("EFFICIENT_ATTENTION", "MATH")


@torch.no_grad()
def first_calls(model: Any, config: Any, sizes: Sequence[int], device: torch.device,
                dtype: torch.dtype) -> Dict[str, Any]:
    """What a shape costs the first time it is seen, as serving meets it: the encoder (compiled as served
    where it can be, batches under COMPILED_MIN_WINDOWS eager) on each batch size from 1 to the largest of
    ``sizes`` (``--batch-sizes``) windows, and the decoder's prefill of b joining windows (each of
    ``sizes``) with prompts of each of :data:`FIRST_PREFILL_LENGTHS` tokens, then held to each of
    :data:`FIRST_PREFILL_KERNELS` on shapes not met before; each called twice in a row, milliseconds. A first
    call much slower than the second is work done once per shape (a compilation, a library's plan or
    autotuning) that a request meeting that shape pays, unless warmup met it first."""
    problem = variant_problem("compiled", device, dtype) or (
        None if device.type == "cuda" else "the compiled encoder runs on CUDA only")
    variant, why = ("eager", problem) if problem is not None else ("compiled", "as served")
    encoder_as(model, config, variant, device, dtype)
    report: Dict[str, Any] = {"encoderVariant": variant, "encoderVariantWhy": why, "encoder": {}, "prefill": {}}

    def twice(fn: Any) -> Dict[str, float]:
        calls = []
        for _ in range(2):
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            calls.append((time.perf_counter() - start) * 1000)
        return {"firstMs": calls[0], "againMs": calls[1]}

    for b in range(1, max(sizes) + 1):
        mel = torch.randn(b, config.n_mels, 3000, device=device, dtype=dtype)
        report["encoder"][str(b)] = twice(lambda: model.encoder(mel))
    report["encoderExcessMs"] = sum(c["firstMs"] - c["againMs"] for c in report["encoder"].values())
    cache = KVCache.allocate(config, max(sizes), device, dtype)

    def prefills(offset: int) -> Dict[str, Dict[str, float]]:
        calls = {}
        for b in sizes:
            for length in (n + offset for n in FIRST_PREFILL_LENGTHS):
                tokens = torch.randint(0, config.n_vocab, (b, length), device=device)
                positions = torch.arange(length, device=device).expand(b, -1)
                slots = torch.arange(b, device=device)
                calls[f"{b}x{length}"] = twice(lambda: model.decoder.forward_cached(cache, tokens, positions, slots))
        return calls

    report["prefill"] = prefills(0)
    report["prefillByKernel"] = {}
    for k, name in enumerate(FIRST_PREFILL_KERNELS, start=1):
        side: Dict[str, Any] = {"prefill": {}}
        report["prefillByKernel"][name] = side
        try:
            with held_to((name,)):
                side["prefill"] = prefills(k)
        except RuntimeError as error:
            side["skipped"] = str(error).splitlines()[0] if str(error) else type(error).__name__
    encoder_as(model, config, "eager", device, dtype)
    return report


#: The fused attention kernels that torch's scaled_dot_product_attention can be held to
#: (torch.nn.attention.SDPBackend), in the order the attention part times them.
ATTENTION_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


@torch.no_grad()
def encoder_attention(config: Any, sizes: Sequence[int], device: torch.device, dtype: torch.dtype,
                      repeats: int) -> Dict[str, Any]:
    """The encoder's self-attention over b padded 30 s windows (all heads, one layer) as torch picks its
    kernel (``default``: what the model runs) and held to each of :data:`ATTENTION_BACKENDS` in turn, on
    query, key and value laid out as the model makes them (a [b, frames, state] product viewed as heads);
    milliseconds and TFLOP/s (4 b heads frames^2 head_dim). A backend that cannot run here says why."""
    heads, frames = config.n_audio_head, config.n_audio_ctx
    head_dim = config.n_audio_state // heads
    report: Dict[str, Any] = {"shape": {"heads": heads, "frames": frames, "headDim": head_dim}, "backends": {}}
    attention_module = attention_kernels()
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    for name in ("default", *ATTENTION_BACKENDS):
        side: Dict[str, Any] = {"ms": {}, "tflops": {}}
        report["backends"][name] = side
        if sdpa is None or (name != "default" and attention_module is None):
            side["skipped"] = attention_kernels_missing()
            continue
        for b in sizes:
            q, k, v = (torch.randn(b, frames, config.n_audio_state, device=device, dtype=dtype)
                       .view(b, frames, heads, head_dim).transpose(1, 2) for _ in range(3))
            try:
                with held_to((name,)) if name != "default" else contextlib.nullcontext():
                    ms = timed_ms(lambda: sdpa(q, k, v), device, repeats)
            except RuntimeError as error:
                side["ms"], side["tflops"] = {}, {}
                side["skipped"] = str(error).splitlines()[0] if str(error) else type(error).__name__
                break
            side["ms"][str(b)] = ms
            side["tflops"][str(b)] = 4 * b * heads * frames * frames * head_dim / (ms / 1000) / 1e12
    return report


# ---------------------------------------------------------------------------------------------- profile
#: The profile part wraps parts of the model in torch.profiler labels (record_function) named with this
#: prefix, in eager code only, so that their kernels can be told apart: the attention (named with the keys'
#: length: the decoder's self-attention reads the text context, its cross-attention the audio), the
#: activations' FP8 quantization, the decoder's logits and the logit rules (suppressions, timestamp rules,
#: the budget, log-softmax, argmax).

def print_table(report: Dict[str, Any]) -> None:
    print(f"whisper {report['config']} {report['dtype']} on {report['gpu'] or 'cpu'}, {report['clipSeconds']} s clips, "
          f"{report['tokensPerAudioSecond']} tokens per audio second")
    print(f"{'mode':<10} {'batch':>5} {'clips/s':>9} {'audio s/s':>10} {'tokens/s':>10} {'p50 s':>8} {'p95 s':>8} {'x naive':>8}")
    for m in report["modes"]:
        print(f"{m['mode']:<10} {m['batchSize']:>5} {m['clipsPerSecond']:>9.2f} {m['audioSecondsPerSecond']:>10.1f} "
              f"{m['tokensPerSecond']:>10.0f} {m['latencyP50S']:>8.3f} {m['latencyP95S']:>8.3f} {m['speedupOverNaive']:>8.1f}")
    stages = report.get("stages")
    if stages is not None:
        print("batch  encoder ms (b windows)  step ms (b slots)")
        for b, ms in stages["encoderMs"].items():
            print(f"{b:>5} {ms:>22.2f} {stages['stepMs'][b]:>18.3f}")
    rules = report.get("stepRules")
    if rules is not None:
        print("batch  step ms, rules eager  step ms, rules compiled" + (f"  ({rules['skipped']})" if "skipped" in rules else ""))
        for b, ms in rules["eager"].items():
            print(f"{b:>5} {ms:>20.3f} {rules['compiled'].get(b, float('nan')):>23.3f}")
    variants = report.get("encoderVariants")
    if variants:
        print("batch  " + "  ".join(f"encoder ms {v:>8}" for v in variants))
        for b in next(iter(variants.values())):
            print(f"{b:>5}  " + "  ".join(f"{variants[v][b]:>19.2f}" for v in variants))
    ahead = report.get("stepAhead")
    if ahead is not None:
        print(f"{ahead['clips']} clips through {ahead['slots']} slots, median of {ahead['rounds']}: "
              + ", ".join(f"{name} {ahead[name]['clipsPerSecond']:.2f} clips/s ({ahead[name]['wallMsPerStep']:.3f} ms of wall time a step)"
                          for name in ("plain", "ahead"))
              + f"; step ahead x{ahead['speedup']:.3f}")
    spans = report.get("stepSpans")
    if spans is not None:
        whole, short = (spans["ms"][k] for k in spans["ms"])
        print(f"batch  step ms over {' and '.join(spans['ms'])} cache positions"
              + (" (replayed)" if spans["replayed"] else " (eager)"))
        for b in whole:
            print(f"{b:>5} {whole[b]:>12.3f} {short[b]:>12.3f}")
    first = report.get("firstCalls")
    if first is not None:
        slow = {b: c for b, c in first["encoder"].items() if c["firstMs"] > 2 * c["againMs"]}
        print(f"first calls, encoder {first['encoderVariant']} ({first['encoderVariantWhy']}): "
              f"{first['encoderExcessMs']:.0f} ms more than again over {len(first['encoder'])} batch sizes; "
              f"first at least twice again at {len(slow)} of them")
        for b, c in first["encoder"].items():
            print(f"  encoder {b:>3} windows: first {c['firstMs']:8.1f} ms, again {c['againMs']:8.1f} ms")
        for shape, c in first["prefill"].items():
            print(f"  prefill {shape:>8}: first {c['firstMs']:8.1f} ms, again {c['againMs']:8.1f} ms")
        for name, side in first["prefillByKernel"].items():
            if "skipped" in side:
                print(f"  prefill held to {name}: skipped: {side['skipped']}")
            for shape, c in side["prefill"].items():
                print(f"  prefill {shape:>8} ({name}): first {c['firstMs']:8.1f} ms, again {c['againMs']:8.1f} ms")
    attention = report.get("encoderAttention")
    if attention is not None:
        shape = attention["shape"]
        print(f"encoder attention ({shape['heads']} heads x {shape['frames']} frames x {shape['headDim']}), ms (TFLOP/s):")
        for name, side in attention["backends"].items():
            times = "  ".join(f"b{b} {ms:.3f} ({side['tflops'][b]:.0f})" for b, ms in side["ms"].items())
            print(f"{name:<20} {times or 'skipped: ' + side['skipped']}")
    profile = report.get("profile")
    if profile is not None:
        print_profile(profile)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--config", default="large-v3-turbo", choices=sorted(PRESETS))
    parser.add_argument("--dtype", default=None, choices=sorted(DTYPES))
    parser.add_argument("--clip-seconds", type=float, default=45.0)
    parser.add_argument("--tokens-per-audio-second", type=float, default=3.0)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16, 32, 64])
    parser.add_argument("--naive-clips", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stage-repeats", type=int, default=50, help="decode steps timed per batch size")
    parser.add_argument("--encoder-variants", type=lambda s: [v for v in s.split(",") if v], default=None,
                        help="eager,compiled,fp8 (default: all three on CUDA, eager on the CPU)")
    parser.add_argument("--parts", type=lambda s: [p for p in s.split(",") if p], default=["modes", "stages", "variants"],
                        help="modes (naive and engine throughput), stages (encoder and step times), rules "
                             "(a replayed step with its logit rules eager and compiled), spans (a step over the whole "
                             "cache and over its first 128 positions), first (each encoder batch "
                             "size and prefill shape called twice: what a new shape costs), attention (the encoder's "
                             "self-attention held to each SDPA backend), variants "
                             "(the encoder eager, compiled, fp8), ahead (the engine with and without step_ahead), "
                             "profile (kernel time by category of the encoder's variants, its products alone and "
                             "decode steps, under torch.profiler); default modes,stages,variants; each is written "
                             "to --out as it ends")
    parser.add_argument("--ahead-clips", type=int, default=128, help="clips through the engine in the ahead part")
    parser.add_argument("--profile-batch-sizes", type=lambda s: [int(x) for x in s.split(",") if x], default=[1, 16],
                        help="profile part: the encoder's batch sizes (windows) profiled in each variant, and the "
                             "products' shapes (batch x 1500 rows); its decode steps are those of --batch-sizes")
    parser.add_argument("--profile-calls", type=int, default=3, help="profile part: calls under the profiler each")
    parser.add_argument("--profile-repeats", type=int, default=20,
                        help="profile part: timed calls of each product and decode step, without the profiler")
    parser.add_argument("--profile-top", type=int, default=25, help="profile part: kernels listed in the JSON each")
    parser.add_argument("--out", default="bench-whisper.json")
    args = parser.parse_args(argv)
    if args.encoder_variants is None:
        args.encoder_variants = ["eager", "compiled", "fp8"] if args.device.startswith("cuda") else ["eager"]
    unknown = set(args.encoder_variants) - {"eager", "compiled", "fp8"}
    if unknown:
        parser.error(f"unknown encoder variants: {sorted(unknown)}")
    unknown = set(args.parts) - {"modes", "stages", "rules", "spans", "first", "attention", "variants", "ahead", "profile"}
    if unknown:
        parser.error(f"unknown parts: {sorted(unknown)}")
    torch.manual_seed(args.seed)
    report = run_benchmark(args)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
