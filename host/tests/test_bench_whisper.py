"""bench_whisper.py's dry run on the CPU (tiny config): both modes run and the report has their numbers; parts run alone."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_whisper  # noqa: E402
import bench_whisper_profile  # noqa: E402
from voxmux_host import fp8  # noqa: E402
from voxmux_host.models.whisper import model as whisper_model  # noqa: E402
from voxmux_host.models.whisper.config import LARGE_V3_TURBO  # noqa: E402


def test_dry_run_reports_naive_and_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--naive-clips", "1", "--iterations", "1", "--warmup", "0", "--tokens-per-audio-second",
                               "2", "--stage-repeats", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [m["mode"] for m in report["modes"]] == ["a-naive", "b-engine"]
    naive, engine = report["modes"]
    assert naive["speedupOverNaive"] == 1.0
    assert engine["batchSize"] == 2 and engine["encoderCallsPerBatch"] == 1  # two clips, one encoder call
    for mode in report["modes"]:
        assert mode["clipsPerSecond"] > 0 and math.isfinite(mode["latencyP95S"])
        assert 0 < mode["tokensPerSecond"]
    # Where a batch's time goes: the encoder and one decode step, for every captured batch size.
    stages = report["stages"]
    assert sorted(stages["encoderMs"]) == sorted(stages["stepMs"]) == ["1", "2"]
    assert all(ms > 0 for ms in [*stages["encoderMs"].values(), *stages["stepMs"].values()])
    printed = capsys.readouterr().out
    assert "x naive" in printed and "encoder ms" in printed


def test_speech_like_clip_is_seeded_and_bounded() -> None:
    a, b = bench_whisper.speech_like_clip(1.0, 3), bench_whisper.speech_like_clip(1.0, 3)
    assert a.shape == (16000,) and bool((a == b).all()) and float(a.abs().max()) <= 1.0


def test_parts_run_alone_and_each_is_written_as_it_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--stage-repeats", "10", "--parts", "variants", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["modes"] == [] and "stages" not in report
    assert sorted(report["encoderVariants"]["eager"]) == ["1", "2"]
    printed = capsys.readouterr().out
    assert "encoder eager, batch 2:" in printed and "encoder variants: done" in printed
    with pytest.raises(SystemExit):
        bench_whisper.main(["--device", "cpu", "--parts", "modes,everything", "--out", str(out)])


def test_the_ahead_part_runs_the_engine_with_and_without_step_ahead_on_the_same_clips(tmp_path: Path,
                                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--parts", "ahead", "--ahead-clips", "5", "--iterations", "2", "--warmup", "0",
                               "--out", str(out)]) == 0
    ahead = json.loads(out.read_text())["stepAhead"]
    assert (ahead["clips"], ahead["slots"], ahead["rounds"]) == (5, 2, 2)
    for side in ("plain", "ahead"):
        assert len(ahead[side]["seconds"]) == 2 and ahead[side]["clipsPerSecond"] > 0
    assert ahead["plain"]["tokens"] == ahead["ahead"]["tokens"], "the same transcripts"
    # Every window's end is read one step later: the engine ahead decodes more steps, at most one a window more.
    assert all(p < a <= p + 5 for p, a in zip(ahead["plain"]["decodeSteps"], ahead["ahead"]["decodeSteps"]))
    assert "step ahead x" in capsys.readouterr().out


def test_the_rules_part_times_the_eager_side_and_says_why_the_compiled_one_is_skipped_on_the_cpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "1,2",
                               "--parts", "rules", "--stage-repeats", "3", "--out", str(out)]) == 0
    rules = json.loads(out.read_text())["stepRules"]
    assert sorted(rules["eager"]) == ["1", "2"] and min(rules["eager"].values()) > 0 and rules["compiled"] == {}
    assert "CUDA graphs" in rules["skipped"]
    assert "rules compiled" in capsys.readouterr().out


def test_the_profile_part_on_the_cpu_reports_categories_and_explains_what_it_skips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "profile.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--batch-sizes", "1,2", "--parts", "profile",
                               "--encoder-variants", "eager,compiled,fp8", "--profile-batch-sizes", "1",
                               "--profile-calls", "2", "--profile-repeats", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["modes"] == [] and "stages" not in report
    profile = report["profile"]
    assert profile["timeOn"].startswith("cpu") and profile["calls"] == 2

    def check(summary: Dict[str, Any], categories: Sequence[str]) -> None:
        assert set(categories) <= set(summary["categories"])
        numbers = [summary[k] for k in ("wallMsPerCall", "wallMsPerCallUnprofiled", "kernelsPerCall", "kernelMsPerCall",
                                        "busyMsPerCall")]
        numbers += [v[k] for v in summary["categories"].values() for k in ("ms", "kernels", "share")]
        assert all(math.isfinite(x) and x >= 0 for x in numbers) and math.isfinite(summary["gapMsPerCall"])
        assert summary["kernelsPerCall"] > 0 and summary["kernelMsPerCall"] > 0
        assert sum(v["ms"] for v in summary["categories"].values()) == pytest.approx(summary["kernelMsPerCall"], rel=0.01)
        assert summary["top"] and all(row["category"] in summary["categories"] for row in summary["top"])

    # The encoder eager, by category (the attention is labelled); compiled and FP8 skipped with their reasons.
    encoder = profile["encoder"]
    check(encoder["eager"]["1"], bench_whisper_profile.ENCODER_CATEGORIES)
    eager = encoder["eager"]["1"]["categories"]
    assert eager["attention"]["ms"] > 0 and eager["GEMM"]["ms"] > 0 and eager["convolution"]["ms"] > 0
    assert eager["FP8 GEMM"]["ms"] == 0 and eager["quantization"]["ms"] == 0
    assert encoder["eager"]["1"]["blocks"] == "eager" and encoder["eager"]["1"]["productTflops"] > 0
    for variant in ("compiled", "fp8"):
        if "skipped" in encoder[variant]:
            assert "torch" in encoder[variant]["skipped"]
    # The products alone: F.linear at the encoder's shapes; FP8 skipped, with why.
    gemm = profile["gemm"]
    assert [(r["shape"], r["m"], r["k"], r["n"]) for r in gemm["rows"]] == [
        ("q/k/v/out", 1500, 64, 64), ("mlp in", 1500, 64, 256), ("mlp out", 1500, 256, 64)]
    assert all(r["linear"]["ms"] > 0 and r["linear"]["tflops"] >= 0 for r in gemm["rows"])
    assert "CUDA" in gemm["skipped"]["fp8"] and not any("scaledMm" in r for r in gemm["rows"])
    # Decode steps: every labelled part has time; the replay is skipped (no graphs on the CPU).
    for b in ("1", "2"):
        step = profile["step"][b]
        check(step["eager"], bench_whisper_profile.STEP_CATEGORIES)
        categories = step["eager"]["categories"]
        for part in ("self-attention", "cross-attention", "GEMM", "logits", "logit rules/argmax", "KV cache writes"):
            assert categories[part]["ms"] > 0, part
        assert "CUDA" in step["replay"]["skipped"]
        bytes_ = step["bytes"]
        assert bytes_["total"] == bytes_["weights"] + bytes_["crossKv"] + bytes_["selfKv"]
        assert step["stepMs"] > 0 and step["impliedGBPerS"] > 0 and "memoryBoundMs" not in step
    # Two slots read the weights once and twice the caches of one.
    one, two = profile["step"]["1"]["bytes"], profile["step"]["2"]["bytes"]
    assert two["weights"] == one["weights"] and two["crossKv"] == 2 * one["crossKv"] and two["selfKv"] == 2 * one["selfKv"]
    assert {s["what"] for s in profile["skipped"]} >= {"products fp8", "step 1 replay", "step 2 replay"}
    assert all(s["reason"] for s in profile["skipped"])
    tables = (tmp_path / profile["tables"]).read_text()
    assert "## encoder eager, 1 windows (eager blocks)" in tables and "## decode step, 2 slots, eager" in tables
    printed = capsys.readouterr().out
    assert "profile: done" in printed and "self-attn" in printed and "gemm    fp8 skipped" in printed
    assert fp8.quantize_rowwise.__name__ == "quantize_rowwise"  # the labels are gone
    assert whisper_model.attend.__name__ == "attend"


def test_kernels_are_told_apart_by_label_operator_and_name() -> None:
    from bench_profile_support import Kernel

    def category(name: str, *ops: str) -> str:
        return bench_whisper_profile.kernel_category(Kernel(name, 1.0, 0.0, ops), bench_whisper_profile._encoder_label)

    cutlass_fp8 = ("void cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<cutlass::gemm::kernel::"
                   "GemmUniversal<cute::tuple<int, int, int>, cutlass::float_e4m3_t>>>")
    assert category(cutlass_fp8) == "FP8 GEMM"
    assert category("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "aten::_scaled_mm") == "FP8 GEMM"
    assert category("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "aten::addmm", "aten::linear") == "GEMM"
    assert category("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64") == "GEMM"
    # The cast to FP8 of an eager quantization is labelled; its name alone does not make it a product.
    assert category("void at::native::direct_copy_kernel_cuda<c10::Float8_e4m3fn>", "aten::copy_",
                    "bench:quantize") == "quantization"
    assert category("void at::native::direct_copy_kernel_cuda<c10::Float8_e4m3fn>", "aten::copy_") == "copies/casts"
    assert category("triton_red_fused__to_copy_abs_amax_clamp_div_native_layer_norm_3") == "quantization"
    assert category("triton_per_fused__to_copy_add_native_layer_norm_1") == "norms/elementwise"
    assert category("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>") == "attention"
    assert category("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "aten::_efficient_attention_forward") == "attention"
    assert category("sm90_xmma_fprop_implicit_gemm_bf16", "aten::cudnn_convolution", "aten::conv1d") == "convolution"
    assert category("void at::native::vectorized_layer_norm_kernel<c10::BFloat16>", "aten::native_layer_norm") \
        == "norms/elementwise"
    assert category("Memcpy DtoD (Device -> Device)") == "copies/casts"
    assert category("some_kernel_nobody_knows") == "other"
    labels = bench_whisper_profile._step_labels(LARGE_V3_TURBO)
    step = [bench_whisper_profile.kernel_category(Kernel("fmha", 1.0, 0.0, ("aten::sdpa", f"bench:attention:{n}")), labels)
            for n in (448, 1500)]
    assert step == ["self-attention", "cross-attention"]
    assert bench_whisper_profile.kernel_category(Kernel("gemv2T_kernel", 1.0, 0.0, ("aten::mm", "bench:logits")), labels) == "logits"
    assert bench_whisper_profile.kernel_category(Kernel("index_put_kernel", 1.0, 0.0, ("aten::_index_put_impl_", "aten::index_put_")),
                                         labels) == "KV cache writes"


def test_a_graph_replay_takes_the_categories_of_the_eager_step_it_replays() -> None:
    """The GPU's path on a made-up profile: the eager step's kernels carry their operators and labels, the
    replay's (no operators) get them by their order; the replay's own prologue kernel stays unlabelled."""
    from types import SimpleNamespace

    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA

    def event(name: str, start: float, end: float, device: Any = cuda, parent: Any = None, kernels: Any = ()) -> Any:
        return SimpleNamespace(name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end),
                               is_async=False, cpu_parent=parent, is_user_annotation=False, self_cpu_time_total=0.0,
                               kernels=[SimpleNamespace(name=k, duration=d) for k, d in kernels])

    self_label = event("bench:attention:448", 0, 10, cpu)
    cross_label = event("bench:attention:1500", 10, 20, cpu)
    logits_label = event("bench:logits", 20, 30, cpu)
    rules_label = event("bench:rules", 30, 40, cpu)
    eager = [
        event("aten::addmm", 0, 1, cpu, None, [("gemv2T_kernel", 2.0)]),
        event("aten::_efficient_attention_forward", 1, 2, cpu, self_label, [("fmha_cutlassF_bf16", 3.0)]),
        event("aten::_index_put_impl_", 3, 4, cpu, None, [("index_put_kernel", 1.0)]),
        event("aten::_flash_attention_forward", 11, 12, cpu, cross_label, [("flash_fwd_splitkv_kernel", 5.0)]),
        event("aten::mm", 21, 22, cpu, logits_label, [("gemv2T_kernel", 4.0)]),
        event("aten::argmax", 31, 32, cpu, rules_label, [("reduce_kernel<ArgMaxOps>", 1.0)]),
        self_label, cross_label, logits_label, rules_label,
    ]
    eager += [event("gemv2T_kernel", 100, 102), event("fmha_cutlassF_bf16", 102, 105), event("index_put_kernel", 106, 107),
              event("flash_fwd_splitkv_kernel", 107, 112), event("gemv2T_kernel", 112, 116),
              event("reduce_kernel<ArgMaxOps>", 117, 118)]
    device = torch.device("cuda")
    linked = bench_whisper_profile.profile_kernels(SimpleNamespace(events=lambda: eager), device)
    assert [k.ops[-1] for k in linked] == ["aten::addmm", "bench:attention:448", "aten::_index_put_impl_",
                                          "bench:attention:1500", "bench:logits", "bench:rules"]
    replay = [event("FillFunctor", 0, 1), event("gemv2T_kernel", 1, 3), event("fmha_cutlassF_bf16", 3, 6),
              event("index_put_kernel", 6, 7), event("flash_fwd_splitkv_kernel", 7, 12), event("gemv2T_kernel", 12, 16),
              event("reduce_kernel<ArgMaxOps>", 16, 17)]
    replayed = bench_whisper_profile.profile_kernels(SimpleNamespace(events=lambda: replay), device, linked=linked)
    tables: List[str] = []
    summary = bench_whisper_profile.summarize(replayed, device, bench_whisper_profile.STEP_CATEGORIES,
                                      bench_whisper_profile._step_labels(LARGE_V3_TURBO), 1, 0.02, 0.018, 10, "replay", tables)
    ms = {c: v["ms"] for c, v in summary["categories"].items() if v["ms"] > 0}
    assert ms == {"GEMM": 0.002, "self-attention": 0.003, "KV cache writes": 0.001, "cross-attention": 0.005,
                  "logits": 0.004, "logit rules/argmax": 0.001, "copies/casts": 0.001}
    assert summary["kernelsPerCall"] == 7 and summary["busyMsPerCall"] == 0.017 and summary["gapMsPerCall"] == 0.003
    assert summary["linkedShare"] == pytest.approx(6 / 7, abs=1e-4)
    assert "| kernel | category | GPU ms | calls | share |" in tables


def test_the_products_fp8_side_with_stand_ins_for_the_fp8_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The FP8 rows of the products alone, with plain float stand-ins for float8 and torch._scaled_mm (this
    torch may have neither): every rate is there; a compile that fails, then a product that fails, are
    reported and the rest still runs."""
    import torch.nn.functional as F

    from voxmux_host.models.whisper.config import TINY

    def failing_compile(fn: Any, dynamic: bool) -> Any:
        def run(x: torch.Tensor) -> Any:
            raise RuntimeError("no working Triton")
        return run

    def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, bias: torch.Tensor,
                  out_dtype: torch.dtype, use_fast_accum: bool) -> torch.Tensor:
        return (a * scale_a) @ (b * scale_b.reshape(-1, 1).t()) + bias

    monkeypatch.setattr(bench_whisper_profile, "fp8_problems", lambda device, dtype: [])
    monkeypatch.setattr(torch, "compile", failing_compile, raising=False)
    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm, raising=False)
    monkeypatch.setattr(fp8, "fp8_weight_from", lambda w, b: fp8.Fp8Weight(w, torch.ones(1, w.shape[0]), b, w.dtype))
    monkeypatch.setattr(fp8, "quantize_rowwise", lambda x: (x, torch.ones(x.shape[0], 1)))
    monkeypatch.setattr(bench_whisper_profile, "_quantize_tensorwise", lambda x: (x, torch.ones(())))
    monkeypatch.setattr(fp8, "fp8_linear", lambda x, w: F.linear(x, w.weight, w.bias))
    result = bench_whisper_profile.gemm_products(TINY, [1, 2], torch.device("cpu"), torch.float32, 2)
    assert len(result["rows"]) == 6 and "fp8" not in result["skipped"]
    for row in result["rows"]:
        assert row["fp8Linear"]["ms"] > 0 and row["scaledMm"]["tflops"] > 0 and row["quantize"]["gbPerS"] > 0
        assert row["scaledMmTensorwise"]["tflops"] > 0
        assert row["fp8SpeedupProductAlone"] > 0 and row["fp8SpeedupWithQuantize"] > 0 and "quantizeCompiled" not in row
    assert "no working Triton" in result["skipped"]["quantizeCompiled"]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Invalid scaling configuration")

    monkeypatch.setattr(torch, "_scaled_mm", broken, raising=False)
    result = bench_whisper_profile.gemm_products(TINY, [1], torch.device("cpu"), torch.float32, 2)
    assert all(row["linear"]["ms"] > 0 and "scaledMm" not in row for row in result["rows"])
    assert "FP8 products failed at batch 1, q/k/v/out" in result["skipped"]["fp8"]
    assert "Invalid scaling configuration" in result["skipped"]["fp8"]


def test_the_encoder_profile_of_a_compiled_variant_labels_only_its_eager_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """With compile standing in (the blocks flagged compiled, still eager code): batches under
    COMPILED_MIN_WINDOWS are profiled with the labels, larger ones without (a compiled block would compile
    again); each variant is reported as it ends."""
    from voxmux_host.models.whisper.config import TINY
    from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS, AudioEncoder, build_model

    def stand_in_compile(self: AudioEncoder) -> None:
        self.is_compiled = True

    monkeypatch.setattr(bench_whisper_profile, "variant_problem", lambda variant, device, dtype: None)
    monkeypatch.setattr(AudioEncoder, "compile_", stand_in_compile)
    model = build_model(TINY)
    result: Dict[str, Any] = {}
    done: List[str] = []
    tables: List[str] = []
    bench_whisper_profile.profile_encoder(model, TINY, ["eager", "compiled"], [1, COMPILED_MIN_WINDOWS], torch.device("cpu"),
                                  torch.float32, 1, 5, tables, result, done.append)
    assert done == ["profile: encoder eager", "profile: encoder compiled"]
    assert [result["compiled"][b]["blocks"] for b in ("1", str(COMPILED_MIN_WINDOWS))] == ["eager", "compiled"]
    assert result["eager"][str(COMPILED_MIN_WINDOWS)]["blocks"] == "eager"
    for variant in ("eager", "compiled"):
        labelled = result[variant]["1"]["categories"]["attention"]["ms"]
        assert labelled > 0  # the labels make the CPU's plain attention (matmul, softmax) attention
    if not whisper_model.HAS_SDPA:  # unlabelled, the plain attention's matmul and softmax are not told apart
        assert result["compiled"][str(COMPILED_MIN_WINDOWS)]["categories"]["attention"]["ms"] == 0
    assert sum("## encoder" in line for line in tables) == 4


def test_the_attention_part_times_each_sdpa_backend_or_says_why_not(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "attention.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--batch-sizes", "1,2", "--parts", "attention",
                               "--stage-repeats", "10", "--out", str(out)]) == 0
    attention = json.loads(out.read_text())["encoderAttention"]
    assert attention["shape"] == {"heads": 2, "frames": 1500, "headDim": 32}
    assert list(attention["backends"]) == ["default", *bench_whisper.ATTENTION_BACKENDS]
    for name, side in attention["backends"].items():
        # Each backend has its times, or the reason it could not run here (torch 1.13 has no backends to pick).
        if "skipped" in side:
            assert side["skipped"] and side["ms"] == {}, name
        else:
            assert sorted(side["ms"]) == ["1", "2"] and min(side["ms"].values()) > 0, name
            assert all(side["tflops"][b] > 0 for b in side["ms"]), name
    if not hasattr(torch.nn, "attention"):
        assert all("torch >= 2.3" in side["skipped"] for side in attention["backends"].values())
    assert "encoder attention" in capsys.readouterr().out


def test_the_first_calls_part_times_each_new_shape_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "first.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--batch-sizes", "1,3", "--parts", "first",
                               "--out", str(out)]) == 0
    first = json.loads(out.read_text())["firstCalls"]
    # Every encoder batch size up to the largest, not only the captured ones; on the CPU the encoder is eager.
    assert first["encoderVariant"] == "eager" and "compiled" in first["encoderVariantWhy"]
    assert sorted(first["encoder"], key=int) == ["1", "2", "3"]
    prefill = first["prefill"]
    assert sorted(prefill) == sorted(f"{b}x{t}" for b in (1, 3) for t in bench_whisper.FIRST_PREFILL_LENGTHS)
    for calls in [*first["encoder"].values(), *prefill.values()]:
        assert calls["firstMs"] > 0 and calls["againMs"] > 0
    assert first["encoderExcessMs"] == pytest.approx(sum(c["firstMs"] - c["againMs"] for c in first["encoder"].values()))
    # The prefill held to each attention kernel that keeps no per-shape plan, on shapes not met before.
    by_kernel = first["prefillByKernel"]
    assert list(by_kernel) == list(bench_whisper.FIRST_PREFILL_KERNELS)
    for name, side in by_kernel.items():
        if "skipped" in side:
            assert side["skipped"] and side["prefill"] == {}, name
            continue
        assert not set(side["prefill"]) & set(prefill), name
        assert all(calls["firstMs"] > 0 and calls["againMs"] > 0 for calls in side["prefill"].values()), name
    if not hasattr(torch.nn, "attention"):
        assert all("torch >= 2.3" in side["skipped"] for side in by_kernel.values())
    else:
        assert "prefill" in by_kernel["MATH"] and by_kernel["MATH"]["prefill"]  # the math kernel runs anywhere
    assert "first calls" in capsys.readouterr().out


def test_the_spans_part_times_a_step_over_the_whole_cache_and_over_its_first_positions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "spans.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--batch-sizes", "1,2", "--parts", "spans",
                               "--stage-repeats", "3", "--out", str(out)]) == 0
    spans = json.loads(out.read_text())["stepSpans"]
    assert spans["span"] == bench_whisper.STEP_SPAN and spans["replayed"] is False  # no CUDA graphs on the CPU
    assert sorted(spans["ms"]) == sorted([str(bench_whisper.STEP_SPAN), "448"])
    assert all(sorted(by_size) == ["1", "2"] and min(by_size.values()) > 0 for by_size in spans["ms"].values())
    assert "step ms over" in capsys.readouterr().out
