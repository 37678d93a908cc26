"""The Whisper model pieces on the CPU (tiny config): mel filterbank, tokenizer, key-value cache against a full
recompute, and both checkpoint layouts written here and loaded back."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import pytest
import torch

from voxmux_host.models.whisper.checkpoints import (CheckpointError, hf_to_openai_name, load_hf_directory,
                                                    load_openai_checkpoint, openai_to_hf_name, read_safetensors,
                                                    save_hf_directory, save_openai_checkpoint, write_safetensors)
from voxmux_host.models.whisper.config import (LARGE_V3, LARGE_V3_TURBO, TINY, count_parameters, from_hf_config,
                                               to_hf_config)
from voxmux_host.models.whisper.features import hz_to_mel, log_mel_spectrogram, mel_filters, mel_to_hz
from voxmux_host.models.whisper.model import KVCache, WhisperModel, build_model
from voxmux_host.models.whisper.tokenizer import (LANGUAGES, WhisperTokenizer, special_tokens, synthetic_tokenizer,
                                                  tiny_tokenizer, tiny_vocabulary, write_tokenizer_files)


def test_configs_have_the_published_shapes() -> None:
    assert (LARGE_V3.n_mels, LARGE_V3.n_vocab, LARGE_V3.n_text_layer) == (128, 51866, 32)
    assert LARGE_V3_TURBO.n_text_layer == 4 and LARGE_V3_TURBO.n_audio_layer == 32
    # 1,543,490,560 and 808,878,080 with the encoder's 1500 x 1280 sinusoids, a buffer here
    assert count_parameters(LARGE_V3) + 1500 * 1280 == 1_543_490_560
    assert count_parameters(LARGE_V3_TURBO) + 1500 * 1280 == 808_878_080
    model = build_model(TINY)
    trainable = sum(p.numel() for p in model.parameters())
    assert trainable == count_parameters(TINY)
    assert from_hf_config(to_hf_config(LARGE_V3_TURBO)) == LARGE_V3_TURBO


def test_mel_filterbank_is_slaney_normalised() -> None:
    assert np.allclose(mel_to_hz(hz_to_mel(np.array([0.0, 500.0, 1000.0, 4000.0, 8000.0]))),
                       [0.0, 500.0, 1000.0, 4000.0, 8000.0])
    assert float(hz_to_mel(np.array(1000.0))) == pytest.approx(15.0)
    for n_mels in (80, 128):
        filters = mel_filters(n_mels)
        assert filters.shape == (n_mels, 201)
        assert (filters >= 0).all()
        # each triangle has area ~1 on the Hz axis (slaney normalisation: 2 / width times width / 2)
        areas = filters.sum(axis=1) * 40.0
        assert np.allclose(areas[n_mels // 2:], 1.0, atol=0.1)  # wide enough to sample
        peaks = filters.argmax(axis=1)
        assert (np.diff(peaks) >= 0).all()
    # OpenAI's mel_filters.npz, first filter of 80: its one non-zero bin
    assert mel_filters(80)[0, 1] == pytest.approx(0.02486259, rel=1e-5)


def test_log_mel_spectrogram_shape_and_range() -> None:
    audio = torch.sin(torch.arange(16000) * 2 * np.pi * 440 / 16000) * 0.5
    mel = log_mel_spectrogram(audio, 80)
    assert mel.shape == (80, (16000 + 480000) // 160)
    assert float(mel.max()) - float(mel.min()) <= 2.0 + 1e-5  # clamped at 8 below the maximum, / 4
    assert int(mel[:, 50].argmax()) == int(torch.from_numpy(mel_filters(80))[:, 11].argmax())  # 440 Hz ~ bin 11


def test_tokenizer_round_trips_and_places_special_tokens() -> None:
    tokenizer = tiny_tokenizer()
    for text in ("the quick brown fox", " Hello, world! 123", "ünïcødé — 漢字 x_y\n\ttabs  ", ""):
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert len(tokenizer.encode(" the")) == 1  # a merge of the corpus
    assert tokenizer.eot == 300 and tokenizer.sot == 301
    assert tokenizer.language_ids["en"] == 302 and tokenizer.language_ids["yue"] == 401
    assert (tokenizer.translate, tokenizer.transcribe, tokenizer.no_timestamps) == (402, 403, 407)
    assert tokenizer.timestamp_begin == 408 and tokenizer.n_vocab == TINY.n_vocab
    assert tokenizer.decode([tokenizer.sot, *tokenizer.encode("hi"), tokenizer.timestamp_begin + 5]) == "hi"
    assert tokenizer.sot_sequence("de", "translate") == [301, 304, 402]
    big = synthetic_tokenizer(51866)
    assert (big.eot, big.sot, big.transcribe, big.no_timestamps, big.timestamp_begin) == (
        50257, 50258, 50360, 50364, 50365)
    assert synthetic_tokenizer(51865).timestamp_begin == 50364  # 99 languages before large-v3
    assert len(LANGUAGES) == 100


@pytest.mark.parametrize("layout", ["vocab", "tokenizer.json"])
def test_tokenizer_files_load_in_both_layouts(tmp_path: Path, layout: str) -> None:
    vocab, merges, added = tiny_vocabulary()
    write_tokenizer_files(str(tmp_path), vocab, merges, added, layout=layout)
    loaded = WhisperTokenizer.from_directory(str(tmp_path))
    reference = tiny_tokenizer()
    text = " the cat sat, 42 times!"
    assert loaded.encode(text) == reference.encode(text)
    assert (loaded.eot, loaded.sot, loaded.transcribe, loaded.timestamp_begin) == (
        reference.eot, reference.sot, reference.transcribe, reference.timestamp_begin)


def test_tokenizer_places_specials_by_order_when_only_endoftext_is_listed(tmp_path: Path) -> None:
    vocab, merges, _ = tiny_vocabulary()
    write_tokenizer_files(str(tmp_path), {**vocab, "<|endoftext|>": 300}, merges, {})
    loaded = WhisperTokenizer.from_directory(str(tmp_path))
    assert loaded.timestamp_begin == special_tokens(300)["<|0.00|>"]


def test_tokenizer_folder_without_files_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tokenizer.json, or vocab.json and merges.txt"):
        WhisperTokenizer.from_directory(str(tmp_path))


def test_cached_decoding_equals_a_full_recompute() -> None:
    torch.manual_seed(0)
    model = build_model(TINY, seed=4)
    mel = torch.randn(3, 80, 3000)
    with torch.no_grad():
        xa = model.encoder(mel)
        tokens = torch.randint(0, TINY.n_vocab, (3, 9))
        full = model.decoder.forward_full(tokens, xa)
        cache = KVCache.allocate(TINY, 5, torch.device("cpu"), torch.float32)
        slots = torch.tensor([4, 0, 2])  # any slots, in any order
        model.decoder.fill_cross(cache, slots, xa)
        prefix = model.decoder.forward_cached(cache, tokens[:, :4], torch.arange(4).expand(3, 4), slots)
        stepped = [model.decoder.logits(prefix)]
        for position in range(4, 9):
            hidden = model.decoder.forward_cached(cache, tokens[:, position:position + 1],
                                                  torch.full((3, 1), position), slots)
            stepped.append(model.decoder.logits(hidden))
    assert torch.allclose(torch.cat(stepped, dim=1), full, atol=1e-4)


def test_a_cached_step_over_a_span_of_the_cache_equals_one_over_all_of_it() -> None:
    model = build_model(TINY, seed=4)
    with torch.no_grad():
        xa = model.encoder(torch.randn(2, 80, 3000))
        cache = KVCache.allocate(TINY, 2, torch.device("cpu"), torch.float32)
        rows = torch.arange(2)
        model.decoder.fill_cross(cache, rows, xa)
        model.decoder.forward_cached(cache, torch.randint(0, TINY.n_vocab, (2, 6)), torch.arange(6).expand(2, 6), rows)
        step = (torch.randint(0, TINY.n_vocab, (2, 1)), torch.tensor([[6], [3]]))
        whole = model.decoder.forward_cached(cache, *step)
        spanned = model.decoder.forward_cached(cache, *step, span=7)  # positions 0..6 hold every query's keys
        assert torch.allclose(spanned, whole, atol=1e-6)
        with pytest.raises(ValueError, match="Expected span with the cache's first slots"):
            model.decoder.forward_cached(cache, *step, slots=rows, span=7)


def _same_weights(a: WhisperModel, b: WhisperModel) -> bool:
    sb = b.state_dict()
    return all(torch.equal(t, sb[name]) for name, t in a.state_dict().items())


def test_openai_checkpoint_round_trip(tmp_path: Path) -> None:
    model = build_model(TINY, seed=7)
    path = str(tmp_path / "tiny.pt")
    save_openai_checkpoint(model, path)
    loaded = load_openai_checkpoint(path)
    assert loaded.config == TINY and _same_weights(model, loaded)


def test_hf_directory_round_trip(tmp_path: Path) -> None:
    model = build_model(TINY, seed=7)
    save_hf_directory(model, str(tmp_path))
    state = read_safetensors(str(tmp_path / "model.safetensors"))
    assert "model.encoder.layers.0.self_attn.k_proj.weight" in state
    assert "model.decoder.layers.1.encoder_attn_layer_norm.bias" in state
    assert "model.encoder.embed_positions.weight" in state
    loaded = load_hf_directory(str(tmp_path))
    assert _same_weights(model, loaded)


def test_hf_names_map_both_ways() -> None:
    for name in build_model(TINY).state_dict():
        assert hf_to_openai_name(openai_to_hf_name(name)) == name
    assert hf_to_openai_name("model.decoder.layers.3.fc1.weight") == "decoder.blocks.3.mlp.0.weight"
    assert hf_to_openai_name("encoder.layers.0.self_attn.q_proj.bias") == "encoder.blocks.0.attn.query.bias"
    assert hf_to_openai_name("model.decoder.something.weight") is None


def test_safetensors_bf16_and_sharded_folder(tmp_path: Path) -> None:
    model = build_model(TINY, seed=2)
    save_hf_directory(model, str(tmp_path / "one"))
    state = read_safetensors(str(tmp_path / "one" / "model.safetensors"))
    names = sorted(state)
    shard_dir = tmp_path / "shards"
    shard_dir.mkdir()
    (shard_dir / "config.json").write_text((tmp_path / "one" / "config.json").read_text())
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for file, part in halves.items():
        write_safetensors(str(shard_dir / file), {n: state[n].to(torch.bfloat16) for n in part})
    weight_map = {n: file for file, part in halves.items() for n in part}
    (shard_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    loaded = load_hf_directory(str(shard_dir))
    expected = model.state_dict()["decoder.token_embedding.weight"].to(torch.bfloat16).float()
    assert torch.equal(loaded.state_dict()["decoder.token_embedding.weight"], expected)


def test_a_checkpoint_that_does_not_fit_names_every_problem(tmp_path: Path) -> None:
    model = build_model(TINY, seed=1)
    state = {k: v for k, v in model.state_dict().items() if k != "decoder.ln.bias"}
    state["decoder.extra.weight"] = torch.zeros(2)
    state["encoder.conv1.bias"] = torch.zeros(63)
    path = str(tmp_path / "bad.pt")
    torch.save({"dims": TINY.to_dims(), "model_state_dict": state}, path)
    with pytest.raises(CheckpointError) as info:
        load_openai_checkpoint(path)
    message = str(info.value)
    assert "missing 1: decoder.ln.bias" in message
    assert "unexpected 1: decoder.extra.weight" in message
    assert "mismatched 1: encoder.conv1.bias (checkpoint [63], model [64])" in message
    torch.save({"weights": {}}, path)
    with pytest.raises(CheckpointError, match="dims and model_state_dict"):
        load_openai_checkpoint(path)


def test_hf_folder_problems(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="config.json"):
        load_hf_directory(str(tmp_path))
    model = build_model(TINY)
    save_hf_directory(model, str(tmp_path))
    os.remove(tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_hf_directory(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load_hf_directory(str(tmp_path))
    save_hf_directory(model, str(tmp_path))
    state = read_safetensors(str(tmp_path / "model.safetensors"))
    state["proj_out.weight"] = torch.zeros_like(state["model.decoder.embed_tokens.weight"])
    write_safetensors(str(tmp_path / "model.safetensors"), state)
    with pytest.raises(CheckpointError, match="not tied"):
        load_hf_directory(str(tmp_path))


def test_a_hf_checkpoint_problem_is_named_by_the_checkpoints_own_names(tmp_path: Path) -> None:
    """checkpoints.py's contract: a checkpoint that does not fit names every missing, unexpected and
    mismatched tensor. A Hugging Face folder without model.decoder.layer_norm.bias is told so by that name,
    not by model.py's 'decoder.ln.bias', which the folder never uses."""
    save_hf_directory(build_model(TINY), str(tmp_path))
    state = read_safetensors(str(tmp_path / "model.safetensors"))
    del state["model.decoder.layer_norm.bias"]
    write_safetensors(str(tmp_path / "model.safetensors"), state)
    with pytest.raises(CheckpointError) as info:
        load_hf_directory(str(tmp_path))
    assert "model.decoder.layer_norm.bias" in str(info.value)


def test_a_hf_checkpoint_without_the_model_prefix_loads_and_is_named_by_its_names(tmp_path: Path) -> None:
    """WhisperModel's tensors are named encoder... and decoder..., WhisperForConditionalGeneration's model.encoder..."""
    model = build_model(TINY, seed=3)
    save_hf_directory(model, str(tmp_path))
    prefixed = read_safetensors(str(tmp_path / "model.safetensors"))
    state = {name[len("model."):]: tensor for name, tensor in prefixed.items()}
    write_safetensors(str(tmp_path / "model.safetensors"), state)
    assert _same_weights(model, load_hf_directory(str(tmp_path)))
    del state["decoder.layer_norm.bias"]
    write_safetensors(str(tmp_path / "model.safetensors"), state)
    with pytest.raises(CheckpointError, match=r"missing 1: decoder\.layer_norm\.bias$"):
        load_hf_directory(str(tmp_path))


def test_a_hf_checkpoint_with_an_untied_output_projection_and_another_problem_names_both(tmp_path: Path) -> None:
    """Every problem in one error: an output projection that is not the token embedding (here of another
    shape) is named beside a missing tensor."""
    save_hf_directory(build_model(TINY), str(tmp_path))
    state = read_safetensors(str(tmp_path / "model.safetensors"))
    del state["model.decoder.layer_norm.bias"]
    state["proj_out.weight"] = torch.zeros(10, TINY.n_text_state)
    write_safetensors(str(tmp_path / "model.safetensors"), state)
    with pytest.raises(CheckpointError) as info:
        load_hf_directory(str(tmp_path))
    assert "missing 1: model.decoder.layer_norm.bias" in str(info.value)
    assert "not tied 1: proj_out.weight" in str(info.value)


def test_the_encoder_attention_quantizes_its_input_once_for_query_key_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """With FP8 products (float stand-ins for float8 and torch._scaled_mm, which need a GPU), each encoder
    block quantizes four inputs, not six: the query, key and value share one quantization of the block's
    normalized input; the output follows the plain products."""
    from voxmux_host import fp8

    model = build_model(TINY, seed=3)
    mel = torch.randn(2, 80, 3000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model.encoder(mel)
    quantized: List[int] = []

    def quantize(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        quantized.append(x.shape[-1])
        return x, torch.ones(x.shape[0], 1)

    def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                  bias: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None,
                  use_fast_accum: bool = False) -> torch.Tensor:
        out = (a * scale_a) @ (b * scale_b)
        return out if bias is None else out + bias

    monkeypatch.setattr(fp8, "quantize_rowwise", quantize)
    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm, raising=False)
    for linear in model.encoder.linears():
        linear.fp8 = fp8.Fp8Weight(linear.weight.detach(), torch.ones(1, linear.out_features),
                                   None if linear.bias is None else linear.bias.detach(), linear.weight.dtype)
    with torch.no_grad():
        got = model.encoder(mel)
    assert torch.allclose(got, expected, atol=1e-5)
    d = TINY.n_audio_state
    assert quantized == [d, d, d, 4 * d] * TINY.n_audio_layer  # query/key/value once, output, MLP in, MLP out
