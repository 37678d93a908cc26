"""Where a Sortformer step's GPU time goes, per batch size, for several compile settings side by side in
one process: the forward pass as served (one CUDA-graph replay of the step's captured batch size), the
same step eager part by part (the subsampling, the 17 Conformer layers, the head: projection, 18
Transformer layers and sigmoids), the whole call as the host runs it (state bytes in, front end,
forward, cache updates, segments, state bytes out), and one eager step under torch.profiler (the
kernels by GPU time, and how many kernels a step launches).

Full shapes (diar_streaming_sortformer_4spk-v2), seeded random weights, bf16, preset ``chunk-15s``:
each step is a 15 s chunk with a full 188-frame speaker cache (the first two chunks of every session
fill it and are not timed). A setting is ``graphs`` (no compile), ``encoder`` (``compileEncoder``) or
``encoder+head`` (``compileEncoder`` and ``compileHead``). Needs CUDA.

    python3 host/bench_sortformer_forward.py --settings graphs,encoder,encoder+head \
        --batch-sizes 1,2,4,8,16,32,64 --profile-batch-sizes 1,16 --out forward.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import numpy.typing as npt
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_profile_support import device_kernels, kernel_rows, kernel_table, top  # noqa: E402
from voxmux_host.model_api import LoadContext, SequenceInput, SequenceOutput  # noqa: E402
from voxmux_host.models.parakeet.random_init import speech_like_noise  # noqa: E402
from voxmux_host.models.sortformer.adapter import SortformerAdapter  # noqa: E402
from voxmux_host.models.parakeet.encoder import time_mask  # noqa: E402
from voxmux_host.models.sortformer.engine import autocast_context  # noqa: E402
from voxmux_host.models.sortformer.model import SortformerModel  # noqa: E402

RATE = 16000
CHUNK_S = 15
SETTINGS: Dict[str, Dict[str, Any]] = {
    "graphs": {},
    "encoder": {"compileEncoder": True},
    "encoder+head": {"compileEncoder": True, "compileHead": True},
}


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="graphs,encoder,encoder+head", help=f"comma-separated, of {list(SETTINGS)}")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64")
    parser.add_argument("--profile-batch-sizes", default="1,16", help="eager steps profiled per setting ('' for none)")
    parser.add_argument("--repeats", type=int, default=20, help="timed replays (and eager parts) per batch size")
    parser.add_argument("--calls", type=int, default=4, help="timed whole calls per batch size")
    parser.add_argument("--out", help="write the result as JSON here (profiles beside it)")
    return parser.parse_args(argv)


def recording(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    return np.clip(speech_like_noise(seconds, seed) * 32768 * 3, -32768, 32767).astype(np.int16)


def gpu_ms(fn: Callable[[], Any], repeats: int) -> Dict[str, float]:
    """fn's GPU time by CUDA events around each call (median and min of ``repeats``, after one untimed)."""
    fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()  # type: ignore[no-untyped-call]
        fn()
        end.record()  # type: ignore[no-untyped-call]
        end.synchronize()  # type: ignore[no-untyped-call]
        times.append(float(start.elapsed_time(end)))  # type: ignore[no-untyped-call]
    return {"p50": round(float(np.median(times)), 3), "min": round(min(times), 3)}


def load(options: Dict[str, Any], max_batch: int) -> SortformerAdapter:
    adapter = SortformerAdapter()
    adapter.load(LoadContext("bench", "sortformer", {"config": "full", "device": "cuda", "dtype": "bf16",
                                                     "maxBatchSize": max_batch, **options}))
    adapter.warmup()
    return adapter


def served_model(adapter: SortformerAdapter) -> SortformerModel:
    model = adapter._model
    assert model is not None
    return model


def step_inputs(adapter: SortformerAdapter, batch: int) -> Dict[str, torch.Tensor]:
    """A full step's device inputs: mel frames of speech-like noise and a full speaker cache."""
    engine = adapter._require_engine()
    config = engine.config
    gen = torch.Generator(device="cuda").manual_seed(batch)
    frames = engine.window_feat_frames
    return {
        "feats": torch.randn(batch, frames, config.n_mels, device="cuda", generator=gen),
        "feat_lengths": torch.full((batch,), frames, dtype=torch.int64, device="cuda"),
        "context": torch.randn(batch, engine.context_frames, config.fc_d_model, device="cuda",
                               generator=gen).to(engine.storage_dtype),
        "context_lengths": torch.full((batch,), engine.context_frames, dtype=torch.int64, device="cuda"),
    }


def eager_parts(adapter: SortformerAdapter, batch: int, repeats: int) -> Dict[str, Dict[str, float]]:
    """The step's parts run eagerly one at a time (compiled where the setting compiles them)."""
    model = served_model(adapter)
    x = step_inputs(adapter, batch)
    encoder = model.encoder
    pre_encode = encoder._compiled_pre_encode or encoder.pre_encode
    layers = encoder._compiled_layers or encoder._run_layers
    head = model._compiled_head or model._head
    with torch.inference_mode(), autocast_context(model.device, model.compute_dtype):  # type: ignore[no-untyped-call]
        chunk, chunk_lengths = pre_encode(x["feats"], x["feat_lengths"])
        packed = torch.cat((x["context"].to(chunk.dtype), chunk), dim=1)
        pad = time_mask(x["context_lengths"] + chunk_lengths, packed.shape[1])
        h, pos_emb = encoder.pos_enc(packed)
        hidden = layers(h, pos_emb, pad)
        return {
            "subsampling": gpu_ms(lambda: pre_encode(x["feats"], x["feat_lengths"]), repeats),
            "conformer": gpu_ms(lambda: layers(h, pos_emb, pad), repeats),
            "head": gpu_ms(lambda: head(hidden, pad), repeats),
            "step": gpu_ms(lambda: model.forward_step(x["feats"], x["feat_lengths"], x["context"],
                                                      x["context_lengths"]), repeats),
        }


def replay_ms(adapter: SortformerAdapter, batch: int, repeats: int) -> Dict[str, Any]:
    engine = adapter._require_engine()
    size = next(g for g in engine.graph_batch_sizes if g >= batch)
    graph = engine._graphs[size].graph
    return {"graphSize": size, **gpu_ms(graph.replay, repeats)}


def whole_calls(adapter: SortformerAdapter, batch: int, calls: int) -> Dict[str, Any]:
    """Calls of ``batch`` sessions' next 15 s chunks through run_sequence; the first two fill the caches."""
    engine = adapter._require_engine()
    chunk = CHUNK_S * RATE
    audio = [recording((calls + 2) * CHUNK_S, 100 + i) for i in range(batch)]
    states: List[Optional[bytes]] = [None] * batch
    times: List[float] = []
    stages: Dict[str, float] = {}
    for k in range(calls + 2):
        items = [SequenceInput(f"r{i}-{k}", f"s{i}", k, audio[i][k * chunk:(k + 1) * chunk], states[i], False, {})
                 for i in range(batch)]
        before = engine.counters.stage_ms_copy()
        torch.cuda.synchronize()
        start = time.perf_counter()
        results = adapter.run_sequence(items)
        elapsed = (time.perf_counter() - start) * 1000
        for i, result in enumerate(results):
            assert isinstance(result, SequenceOutput), result
            states[i] = result.state
        if k >= 2:
            times.append(elapsed)
            for stage, ms in engine.counters.stage_ms_copy().items():
                stages[stage] = stages.get(stage, 0.0) + ms - before.get(stage, 0.0)
    return {"p50": round(float(np.median(times)), 3),
            "stageMsPerCall": {s: round(ms / len(times), 3) for s, ms in sorted(stages.items())}}


def profile_step(adapter: SortformerAdapter, batch: int, path: Path) -> Dict[str, Any]:
    """One eager step under torch.profiler: kernels by GPU time (a graph replays the same kernels)."""
    from torch.profiler import ProfilerActivity, profile

    model = served_model(adapter)
    x = step_inputs(adapter, batch)

    def step() -> None:
        with torch.inference_mode(), autocast_context(model.device, model.compute_dtype):  # type: ignore[no-untyped-call]
            model.forward_step(x["feats"], x["feat_lengths"], x["context"], x["context_lengths"])

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = device_kernels(prof)
    rows = kernel_rows(kernels)
    total_us = sum(r.us for r in rows)
    lines = [f"one eager step of {batch} sessions: {len(kernels)} kernels, {total_us / 1000:.2f} ms of kernel time", ""]
    path.write_text("\n".join(lines + kernel_table(rows, total_us, 40)) + "\n", encoding="utf-8")
    return {"kernels": len(kernels), "kernelMs": round(total_us / 1000, 3), "table": path.name,
            "top": [{"kernel": t["kernel"], "ms": round(t["ms"], 3), "calls": t["calls"]} for t in top(rows, 12)]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_sortformer_forward needs CUDA", file=sys.stderr)
        return 2
    settings = [s for s in args.settings.split(",") if s]
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        print(f"Unknown settings {unknown}: expected some of {list(SETTINGS)}", file=sys.stderr)
        return 2
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    profile_sizes = [int(b) for b in args.profile_batch_sizes.split(",") if b]
    out = Path(args.out) if args.out else None
    result: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
        "command": " ".join(sys.argv), "settings": {},
    }
    for name in settings:
        start = time.perf_counter()
        adapter = load(SETTINGS[name], max(batch_sizes))
        row: Dict[str, Any] = {"options": SETTINGS[name], "loadAndWarmupS": round(time.perf_counter() - start, 1),
                               "batches": {}, "profiles": {}}
        print(f"== {name}: loaded and warmed up in {row['loadAndWarmupS']} s", flush=True)
        print("batch | graph | replay ms p50 | per session | eager parts ms: subsampling / conformer / head / step "
              "| whole call ms | per session", flush=True)
        for batch in batch_sizes:
            replay = replay_ms(adapter, batch, args.repeats)
            parts = eager_parts(adapter, batch, max(3, args.repeats // 4))
            call = whole_calls(adapter, batch, args.calls)
            row["batches"][str(batch)] = {"replayMs": replay, "eagerPartsMs": parts, "callMs": call}
            print(f"{batch:5d} | {replay['graphSize']:5d} | {replay['p50']:13.2f} | {replay['p50'] / batch:11.3f} | "
                  + " / ".join(f"{parts[p]['p50']:.2f}" for p in ("subsampling", "conformer", "head", "step"))
                  + f" | {call['p50']:13.2f} | {call['p50'] / batch:.3f}", flush=True)
        for batch in profile_sizes:
            path = (out.parent if out else Path(".")) / f"{out.stem if out else 'forward'}.{name}.b{batch}.profile.md"
            profile = profile_step(adapter, batch, path)
            row["profiles"][str(batch)] = profile
            print(f"profile b{batch}: {profile['kernels']} kernels, {profile['kernelMs']} ms; top: "
                  + ", ".join(f"{t['kernel'][:40]} {t['ms']}" for t in profile["top"][:5]), flush=True)
        result["settings"][name] = row
        adapter.close()
        if out:
            out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
