"""The Whisper engine on CUDA: the decode step replayed from CUDA graphs equals the eager step, batched equals
one by one, bf16 against fp32 on large-v3-turbo shapes, and the adapter's warmup captures a graph per batch
size. Skipped without CUDA."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Any, Iterator, List

import pytest
import torch

from voxmux_host.attention_kernels import attention_kernels, attention_kernels_missing, held_to
from voxmux_host.fp8 import FP8_AVAILABLE, FP8_MIN_CAPABILITY
from voxmux_host.model_api import BatchInput, LoadContext, Transcript
from voxmux_host.models.whisper.adapter import WhisperAdapter
from voxmux_host.models.whisper.config import LARGE_V3_TURBO, N_FRAMES, TINY
from voxmux_host.models.whisper.decoding import EngineOptions, RequestOptions, WhisperEngine
from voxmux_host.models.whisper.model import COMPILED_MIN_WINDOWS, KVCache, WhisperModel, build_model
from voxmux_host.models.whisper.tokenizer import synthetic_tokenizer, tiny_tokenizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
DEVICE = torch.device("cuda", 0)


@pytest.fixture(scope="module")
def tiny() -> Iterator[WhisperModel]:
    yield build_model(TINY, seed=5).to(DEVICE)


def _audio(seconds: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(int(seconds * 16000), generator=generator) * 0.1


def _summary(results: List[Any]) -> List[Any]:
    return [(r.text, r.language, r.tokens, [(s.start, s.end) for s in r.segments]) for r in results]


def _engine(model: WhisperModel, dtype: torch.dtype, **options: Any) -> WhisperEngine:
    base: dict[str, Any] = {"slots": 8, "batch_sizes": (1, 2, 4, 8), "temperature_increment": 0.0,
                            "max_tokens_per_audio_second": 3.0, **options}
    return WhisperEngine(model, tiny_tokenizer(), DEVICE, dtype, EngineOptions(**base))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_graph_replay_equals_eager(tiny: WhisperModel, dtype: torch.dtype) -> None:
    model = tiny.to(dtype)
    audios = [_audio(s, i) for i, s in enumerate((3.0, 45.0, 12.0, 31.0, 1.0, 8.0))]
    requests = [RequestOptions(language="en"), RequestOptions(), RequestOptions(timestamps=False, language="de"),
                RequestOptions(language="fr", prompt="the cat"), RequestOptions(language="en"),
                RequestOptions(language="es", task="translate")]
    eager = _engine(model, dtype)
    graphed = _engine(model, dtype, use_graphs=True)
    assert graphed.capture_graphs() == 4
    expected = eager.transcribe(audios, requests)
    got = graphed.transcribe(audios, requests)
    assert graphed.counters.graph_replays > 0 and graphed.counters.eager_steps == 0
    assert _summary(got) == _summary(expected)
    assert _summary(graphed.transcribe(audios, requests)) == _summary(expected)  # replays again, same result


def test_batched_equals_one_by_one_fp32(tiny: WhisperModel) -> None:
    model = tiny.float()
    audios = [_audio(s, 10 + i) for i, s in enumerate((5.0, 40.0, 2.0))]
    requests = [RequestOptions(language="en")] * 3
    batched = _engine(model, torch.float32, use_graphs=True)
    batched.capture_graphs()
    alone = [_engine(model, torch.float32, slots=1, batch_sizes=(1,)).transcribe([a], [r])[0]
             for a, r in zip(audios, requests)]
    assert _summary(batched.transcribe(audios, requests)) == _summary(alone)


def test_bf16_follows_fp32_on_turbo_shapes() -> None:
    config = dataclasses.replace(LARGE_V3_TURBO, n_audio_layer=4)  # turbo widths, fewer encoder layers: quicker
    model = build_model(config, seed=1).to(DEVICE)
    mel = torch.randn(2, config.n_mels, N_FRAMES, device=DEVICE)
    tokens = torch.randint(0, 50257, (2, 6), device=DEVICE)
    with torch.no_grad():
        reference = model.decoder.forward_full(tokens, model.encoder(mel))
        half = model.to(torch.bfloat16)
        features = half.encoder(mel.to(torch.bfloat16))
        assert torch.isfinite(features).all()
        cache = KVCache.allocate(config, 2, DEVICE, torch.bfloat16)
        slots = torch.arange(2, device=DEVICE)
        half.decoder.fill_cross(cache, slots, features)
        hidden = half.decoder.forward_cached(cache, tokens, torch.arange(6, device=DEVICE).expand(2, 6), slots)
        logits = half.decoder.logits(hidden)
    cosine = torch.nn.functional.cosine_similarity(logits.flatten(1), reference.flatten(1), dim=-1)
    assert (cosine > 0.99).all(), cosine
    assert synthetic_tokenizer(config.n_vocab).n_vocab == config.n_vocab


def test_adapter_warmup_captures_a_graph_per_batch_size() -> None:
    adapter = WhisperAdapter()
    adapter.load(LoadContext("i0", "whisper", {"config": "tiny", "device": "cuda", "batchSizes": [1, 2, 4],
                                               "maxTokensPerAudioSecond": 3, "temperatureIncrement": 0}))
    assert adapter.warmup().graphs_captured == 3
    pcm = (_audio(5.0, 1).numpy() * 32768).astype("int16")
    outputs = adapter.run_batch([BatchInput("a", pcm, language="en"), BatchInput("b", pcm)])
    assert all(isinstance(o, Transcript) for o in outputs)
    assert adapter.stats().graph_replays > 0 and adapter.probe()
    adapter.close()


def test_the_adapter_warms_on_its_decoding_thread_at_load_and_serves_what_a_cold_one_does() -> None:
    """warmShapes with overlapEncoder on CUDA: the load warms every join shape, the front end and the
    encoder's own stream on the decoding thread, before warmup captures the graphs; the transcripts are a
    cold adapter's."""
    options = {"config": "tiny", "device": "cuda", "batchSizes": [1, 2, 4], "maxTokensPerAudioSecond": 3,
               "temperatureIncrement": 0, "overlapEncoder": True, "dtype": "fp32"}
    cold, warmed = WhisperAdapter(), WhisperAdapter()
    assert [s.stage for s in cold.load(LoadContext("i0", "whisper", options)).stages] == ["warmup"]
    info = warmed.load(LoadContext("i1", "whisper", {**options, "warmShapes": True}))
    assert [s.stage for s in info.stages] == ["warmup"]
    for adapter in (cold, warmed):
        warmup = adapter.warmup()
        assert warmup.graphs_captured == 3 and [s.stage for s in warmup.stages] == ["graph_capture"]
    pcms = [(_audio(s, 70 + i).numpy() * 32768).astype("int16") for i, s in enumerate((45.0, 3.0, 12.0))]
    inputs = [BatchInput("a", pcms[0], language="en"), BatchInput("b", pcms[1]),
              BatchInput("c", pcms[2], language="de")]
    assert warmed.run_batch(inputs) == cold.run_batch(inputs)
    assert warmed.stats().encoder_windows == cold.stats().encoder_windows  # type: ignore[attr-defined]
    cold.close()
    warmed.close()


@pytest.mark.skipif(attention_kernels() is None, reason=attention_kernels_missing())
def test_a_prefill_held_to_the_efficient_kernel_follows_torchs_choice_and_serves_the_same_transcripts() -> None:
    """prefillAttention efficient: on turbo shapes in bf16 the prefill's output follows torch's choice of
    kernel (cuDNN's on an H100 or H200); the adapter with it serves what one without it does."""
    config = dataclasses.replace(LARGE_V3_TURBO, n_audio_layer=1)
    model = build_model(config, seed=3).to(DEVICE, torch.bfloat16)
    slots = torch.arange(4, device=DEVICE)
    tokens = torch.randint(0, config.n_vocab, (4, 24), device=DEVICE)
    positions = torch.arange(24, device=DEVICE).expand(4, -1)
    hidden = []
    for held in (False, True):
        cache = KVCache.allocate(config, 4, DEVICE, torch.bfloat16)
        with torch.no_grad():
            model.decoder.fill_cross(cache, slots, torch.randn(4, config.n_audio_ctx, config.n_audio_state,
                                                               generator=torch.Generator().manual_seed(4))
                                     .to(DEVICE, torch.bfloat16))
            with held_to(("EFFICIENT_ATTENTION", "MATH")) if held else contextlib.nullcontext():
                hidden.append(model.decoder.forward_cached(cache, tokens, positions, slots).float())
    cosine = torch.nn.functional.cosine_similarity(hidden[0].flatten(1), hidden[1].flatten(1), dim=-1)
    assert (cosine > 0.999).all(), cosine
    options = {"config": "tiny", "device": "cuda", "batchSizes": [1, 2, 4], "maxTokensPerAudioSecond": 3,
               "temperatureIncrement": 0, "dtype": "fp32", "warmShapes": True}
    plain, efficient = WhisperAdapter(), WhisperAdapter()
    plain.load(LoadContext("i0", "whisper", options))
    efficient.load(LoadContext("i1", "whisper", {**options, "prefillAttention": "efficient"}))
    for adapter in (plain, efficient):
        adapter.warmup()
    pcms = [(_audio(s, 80 + i).numpy() * 32768).astype("int16") for i, s in enumerate((45.0, 3.0, 12.0))]
    inputs = [BatchInput("a", pcms[0], language="en"), BatchInput("b", pcms[1], prompt="the cat"),
              BatchInput("c", pcms[2])]
    assert efficient.run_batch(inputs) == plain.run_batch(inputs)
    plain.close()
    efficient.close()


def test_groups_encoded_beside_the_graph_replays_give_the_same_transcripts(tiny: WhisperModel) -> None:
    """overlap_encoder on CUDA: groups that join while slots decode are encoded on their own stream (the
    steps replaying meanwhile) and give what the engine gives without it."""
    model = tiny.to(torch.float32)
    audios = [_audio(s, 20 + i) for i, s in enumerate((45.0, 3.0, 31.0, 12.0, 1.0, 8.0, 61.0, 2.0))]
    requests = [RequestOptions(language="en") for _ in audios]
    plain = _engine(model, torch.float32, use_graphs=True)
    overlapped = _engine(model, torch.float32, use_graphs=True, overlap_encoder=True)
    assert plain.capture_graphs() == 4 and overlapped.capture_graphs() == 4
    expected = plain.transcribe(audios[:1], requests[:1]) + plain.transcribe(audios[1:], requests[1:])
    first = overlapped.submit(audios[:1], requests[:1])
    overlapped.tick()
    overlapped.tick()
    rest = overlapped.submit(audios[1:], requests[1:])  # joins while the first decodes: encoded beside it
    while not (first.done and rest.done):
        overlapped.tick()
    assert overlapped.counters.graph_replays > 0
    assert _summary(overlapped.results(first) + overlapped.results(rest)) == _summary(expected)


@pytest.mark.parametrize("overlap_encoder", [False, True])
def test_steps_launched_ahead_of_the_host_give_the_same_transcripts(tiny: WhisperModel, overlap_encoder: bool) -> None:
    """step_ahead on CUDA: each replay launched before the last step's tokens (copied into pinned memory)
    are read gives the transcripts of the engine without it, with groups joining mid-decode."""
    model = tiny.to(torch.float32)
    audios = [_audio(s, 20 + i) for i, s in enumerate((45.0, 3.0, 31.0, 12.0, 1.0, 8.0, 61.0, 2.0))]
    requests = [RequestOptions(language="en") for _ in audios]
    plain = _engine(model, torch.float32, use_graphs=True)
    ahead = _engine(model, torch.float32, use_graphs=True, step_ahead=True, overlap_encoder=overlap_encoder)
    assert plain.capture_graphs() == 4 and ahead.capture_graphs() == 4
    expected = plain.transcribe(audios[:1], requests[:1]) + plain.transcribe(audios[1:], requests[1:])
    first = ahead.submit(audios[:1], requests[:1])
    ahead.tick()
    ahead.tick()
    rest = ahead.submit(audios[1:], requests[1:])
    while not (first.done and rest.done):
        ahead.tick()
    assert ahead.counters.graph_replays > 0
    assert _summary(ahead.results(first) + ahead.results(rest)) == _summary(expected)


def test_compiled_logit_rules_give_the_eager_rules_transcripts(tiny: WhisperModel) -> None:
    """compile_rules: the step's logit rules and choice compiled once per batch size at capture, replayed in the
    step's graphs, give the transcripts of the eager rules (float32; timestamps on and off, a prompt, a
    translation, a budget that forces end-of-text), and sampling at a temperature still runs."""
    model = tiny.to(torch.float32)
    audios = [_audio(s, 40 + i) for i, s in enumerate((45.0, 3.0, 12.0, 1.0, 8.0, 31.0))]
    requests = [RequestOptions(language="en"), RequestOptions(), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(timestamps=False, language="fr"), RequestOptions(language="es", task="translate"),
                RequestOptions(language="en")]
    eager = _engine(model, torch.float32, use_graphs=True)
    compiled = _engine(model, torch.float32, use_graphs=True, compile_rules=True)
    assert eager.capture_graphs() == 4 and compiled.capture_graphs() == 4
    assert _summary(compiled.transcribe(audios, requests)) == _summary(eager.transcribe(audios, requests))
    assert compiled.counters.graph_replays > 0 and compiled.counters.eager_steps == 0
    hot = compiled.transcribe(audios[:2], [RequestOptions(language="en", temperature=0.8)] * 2)
    assert all(r.tokens > 0 for r in hot)


def test_warmed_shapes_give_the_cold_engines_transcripts_with_graphs(tiny: WhisperModel) -> None:
    """warm_shapes on CUDA with the step's graphs: every join size's encoder call, detection and padded
    prefill met before serving; the transcripts are the cold engine's (float32; with a prompt, a
    translation, a clip detected without a language) and warming decodes no step."""
    model = tiny.to(torch.float32)
    audios = [_audio(s, 60 + i) for i, s in enumerate((45.0, 3.0, 12.0, 1.0, 8.0))]
    requests = [RequestOptions(language="en"), RequestOptions(), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(timestamps=False, language="fr"), RequestOptions(language="es", task="translate")]
    cold = _engine(model, torch.float32, use_graphs=True)
    warmed = _engine(model, torch.float32, use_graphs=True, warm_shapes=True)
    assert cold.capture_graphs() == warmed.capture_graphs() == 4
    assert warmed.warm_shapes() > 0 and warmed.counters.decode_steps == 0
    assert _summary(warmed.transcribe(audios, requests)) == _summary(cold.transcribe(audios, requests))


def test_steps_replayed_over_shorter_cache_spans_give_the_same_transcripts(tiny: WhisperModel) -> None:
    """step_spans: a graph per batch size and span (8, 32 and the whole cache), each step replaying the
    shortest that holds its windows' positions, gives the transcripts of the whole-cache graphs (float32;
    with step_ahead too, which launches a step before the last is read)."""
    model = tiny.to(torch.float32)
    audios = [_audio(s, 70 + i) for i, s in enumerate((45.0, 3.0, 12.0, 1.0, 31.0))]
    requests = [RequestOptions(language="en"), RequestOptions(language="de", prompt="the cat"),
                RequestOptions(timestamps=False, language="fr"), RequestOptions(language="en"),
                RequestOptions(language="es", task="translate")]
    whole = _engine(model, torch.float32, use_graphs=True)
    assert whole.capture_graphs() == 4
    expected = _summary(whole.transcribe(audios, requests))
    for step_ahead in (False, True):
        spanned = _engine(model, torch.float32, use_graphs=True, step_spans=(8, 32), step_ahead=step_ahead)
        assert spanned.capture_graphs() == 12
        assert _summary(spanned.transcribe(audios, requests)) == expected
        assert spanned.counters.eager_steps == 0


def test_the_compiled_encoder_follows_the_eager_one() -> None:
    """compileEncoder: the compiled encoder (batch size dynamic) gives the eager encoder's output at the
    compiled size and at a larger one that reuses it (a batch of 1 stays eager); its four blocks share
    their compilation (at most two graphs in all, not one or two per block)."""
    if not hasattr(torch.nn.Module, "compile"):
        pytest.skip("needs torch >= 2.2")
    dynamo = importlib.import_module("torch._dynamo")  # torch >= 2.0, past this machine's type stubs
    counters = importlib.import_module("torch._dynamo.utils").counters

    config = dataclasses.replace(TINY, n_audio_layer=4)
    model = build_model(config, seed=3).to(DEVICE).eval()
    mels = {b: torch.randn(b, config.n_mels, N_FRAMES, device=DEVICE) for b in (COMPILED_MIN_WINDOWS, 1, 6)}
    dynamo.reset()
    before = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        eager = {b: model.encoder(mel) for b, mel in mels.items()}
        model.encoder.compile_()
        for b, mel in mels.items():
            torch.testing.assert_close(model.encoder(mel), eager[b], rtol=1e-4, atol=1e-4)
    graphs = counters["stats"]["unique_graphs"] - before
    assert graphs <= 2, f"{graphs} graphs compiled for {config.n_audio_layer} blocks at 2 batch sizes"


def test_fp8_encoder_products_follow_bf16_and_the_adapter_serves_with_them() -> None:
    """matmul fp8: the encoder's products as FP8 keep its output frames close to bf16's (cosine >= 0.98 on
    the tiny model's random weights), and an adapter with compileEncoder and matmul fp8 transcribes."""
    if not FP8_AVAILABLE or torch.cuda.get_device_capability(DEVICE) < FP8_MIN_CAPABILITY:
        pytest.skip("needs torch >= 2.5 and a GPU with FP8 tensor cores")
    model = build_model(TINY, seed=3).to(DEVICE, torch.bfloat16).eval()
    mel = torch.randn(3, TINY.n_mels, N_FRAMES, device=DEVICE, dtype=torch.bfloat16)
    with torch.no_grad():
        expected = model.encoder(mel).float()
        model.encoder.build_fp8_()
        got = model.encoder(mel).float()
    cosine = torch.nn.functional.cosine_similarity(got.flatten(0, 1), expected.flatten(0, 1), dim=-1)
    assert float(cosine.min()) >= 0.98, cosine.min()
    adapter = WhisperAdapter()
    adapter.load(LoadContext("i0", "whisper", {"config": "tiny", "device": "cuda", "batchSizes": [1, 2],
                                               "maxTokensPerAudioSecond": 3, "temperatureIncrement": 0,
                                               "compileEncoder": True, "matmul": "fp8"}))
    adapter.warmup()
    pcm = (_audio(5.0, 1).numpy() * 32768).astype("int16")
    outputs = adapter.run_batch([BatchInput("a", pcm, language="en"), BatchInput("b", pcm, language="en")])
    assert all(isinstance(o, Transcript) for o in outputs)
    adapter.close()
