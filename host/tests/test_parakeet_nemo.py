"""Loading Parakeet from ``.nemo`` archives that the tests build: plain and gzip tars, a SentencePiece
tokenizer trained here, and broken archives whose errors must name every offending tensor."""
from __future__ import annotations

import io
import tarfile
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch
import yaml

from voxmux_host.boot_stages import StageTimer
from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext, BatchInput, Transcript
from voxmux_host.models.parakeet.adapter import ParakeetAdapter
from voxmux_host.models.parakeet.config import TINY, count_parameters
from voxmux_host.models.parakeet import nemo as nemo_module
from voxmux_host.models.parakeet.model import build_model
from voxmux_host.models.parakeet.nemo import config_from_nemo, load_nemo_model
from voxmux_host.models.parakeet.model import pcm16_from_float
from voxmux_host.models.parakeet.random_init import speech_like_noise

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a stitch in time saves nine",
    "all that glitters is not gold",
    "speech recognition with token and duration transducers",
    "every encoder frame covers eighty milliseconds of audio",
]


def _nemo_config(tokenizer_ref: Optional[str]) -> Dict[str, Any]:
    """The tiny model's config in the layout of a Parakeet-TDT model_config.yaml."""
    c = TINY
    config: Dict[str, Any] = {
        "sample_rate": 16000,
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": 16000,
            "normalize": "per_feature",
            "window_size": 0.025,
            "window_stride": 0.01,
            "window": "hann",
            "features": c.n_mels,
            "n_fft": 512,
            "log": True,
            "frame_splicing": 1,
            "dither": 1e-05,
            "pad_to": 0,
            "pad_value": 0.0,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": c.n_mels,
            "feat_out": -1,
            "n_layers": c.n_layers,
            "d_model": c.d_model,
            "subsampling": "dw_striding",
            "subsampling_factor": 8,
            "subsampling_conv_channels": c.subsampling_channels,
            "causal_downsampling": False,
            "ff_expansion_factor": 4,
            "self_attention_model": "rel_pos",
            "n_heads": c.n_heads,
            "att_context_size": [-1, -1],
            "att_context_style": "regular",
            "xscaling": False,
            "untie_biases": True,
            "pos_emb_max_len": 5000,
            "conv_kernel_size": 9,
            "conv_norm_type": "batch_norm",
            "conv_context_size": None,
            "use_bias": False,
            "dropout": 0.1,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "normalization_mode": None,
            "random_state_sampling": False,
            "blank_as_pad": True,
            "vocab_size": c.vocab_size,
            "prednet": {"pred_hidden": c.pred_hidden, "pred_rnn_layers": 2, "t_max": None, "dropout": 0.2},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "log_softmax": None,
            "preserve_memory": False,
            "fuse_loss_wer": True,
            "num_classes": c.vocab_size,
            "num_extra_outputs": 5,
            "jointnet": {
                "joint_hidden": c.joint_hidden,
                "activation": "relu",
                "dropout": 0.2,
                "encoder_hidden": c.d_model,
                "pred_hidden": c.pred_hidden,
            },
        },
        "decoding": {
            "strategy": "greedy_batch",
            "model_type": "tdt",
            "durations": [0, 1, 2, 3, 4],
            "greedy": {"max_symbols": 10},
        },
    }
    if tokenizer_ref is not None:
        config["tokenizer"] = {
            "dir": None,
            "type": "bpe",
            "model_path": tokenizer_ref,
            "vocab_path": tokenizer_ref.replace("tokenizer.model", "vocab.txt"),
        }
    return config


def _train_tokenizer(vocab_size: int) -> bytes:
    sentencepiece = pytest.importorskip("sentencepiece")
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 20),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        bos_id=-1,
        eos_id=-1,
        minloglevel=2,
    )
    return buffer.getvalue()


def _write_nemo(
    path: Path,
    state_dict: Dict[str, torch.Tensor],
    config: Dict[str, Any],
    artifacts: Dict[str, bytes],
    mode: str = "w:",
) -> Path:
    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"./{name}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    weights = io.BytesIO()
    torch.save(state_dict, weights)
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        add(tar, "model_config.yaml", yaml.safe_dump(config).encode())
        add(tar, "model_weights.ckpt", weights.getvalue())
        for name, data in artifacts.items():
            add(tar, name, data)
    return path


@pytest.fixture(scope="module")
def tiny_state() -> Dict[str, torch.Tensor]:
    return build_model(TINY, seed=11).state_dict()


@pytest.fixture(scope="module")
def tokenizer_bytes() -> bytes:
    return _train_tokenizer(TINY.vocab_size)


def _archive(tmp_path: Path, state: Dict[str, torch.Tensor], tokenizer: Optional[bytes], mode: str = "w:") -> Path:
    artifacts: Dict[str, bytes] = {}
    ref = None
    if tokenizer is not None:
        name = f"{uuid.uuid4().hex}_tokenizer.model"
        artifacts[name] = tokenizer
        artifacts[name.replace("tokenizer.model", "vocab.txt")] = b"unused\n"
        ref = f"nemo:{name}"
    suffix = ".nemo" if mode == "w:" else ".gz.nemo"
    return _write_nemo(tmp_path / f"tiny{suffix}", state, _nemo_config(ref), artifacts, mode)


@pytest.mark.parametrize("mode", ["w:", "w:gz"])
def test_loads_weights_config_and_tokenizer(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], tokenizer_bytes: bytes, mode: str
) -> None:
    path = _archive(tmp_path, tiny_state, tokenizer_bytes, mode)
    model, tokenizer, config = load_nemo_model(str(path))
    assert config == TINY
    loaded = model.state_dict()
    assert set(loaded) == set(tiny_state)
    for name, tensor in tiny_state.items():
        assert torch.equal(loaded[name], tensor), name
    assert tokenizer is not None and tokenizer.vocab_size == TINY.vocab_size
    assert tokenizer.decode([5, 6]) != ""


@pytest.mark.parametrize("mode", ["w:", "w:gz"])
def test_parallel_and_stream_weight_reads_load_the_same_weights_and_time_the_read(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], mode: str
) -> None:
    path = _archive(tmp_path, tiny_state, None, mode)
    loaded = {}
    for weight_read in ("parallel", "stream"):
        timer = StageTimer()
        model, _, _ = load_nemo_model(str(path), weight_read=weight_read, threads=3, timer=timer)
        loaded[weight_read] = model.state_dict()
        stages = timer.take()
        assert [s.stage for s in stages] == ["weight_read", "model_build"]
        with tarfile.open(path, "r:*") as tar:
            assert stages[0].bytes == tar.getmember("./model_weights.ckpt").size
    for name, tensor in tiny_state.items():
        assert torch.equal(loaded["parallel"][name], tensor) and torch.equal(loaded["stream"][name], tensor), name
    with pytest.raises(InstanceError, match="weight_read"):
        load_nemo_model(str(path), weight_read="mmap")


@pytest.mark.parametrize("weight_read", ["parallel", "stream"])
def test_a_truncated_archive_fails_with_load_failed(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], weight_read: str
) -> None:
    path = _archive(tmp_path, tiny_state, None)
    data = path.read_bytes()
    with tarfile.open(path, "r:") as tar:
        member = tar.getmember("./model_weights.ckpt")
    path.write_bytes(data[: member.offset_data + member.size // 2])  # cut inside the weights
    with pytest.raises(InstanceError, match="truncated") as caught:
        load_nemo_model(str(path), weight_read=weight_read)
    assert caught.value.code == "load_failed"


def test_adapter_reports_its_boot_stages(tmp_path: Path, tiny_state: Dict[str, torch.Tensor]) -> None:
    path = _archive(tmp_path, tiny_state, None)
    adapter = ParakeetAdapter()
    info = adapter.load(LoadContext("i0", "parakeet", {"nemoPath": str(path), "device": "cpu", "weightReadThreads": 2}))
    assert [s.stage for s in info.stages] == ["weight_read", "model_build", "device_upload", "warmup"]
    assert info.stages[0].bytes > 0 and info.stages[2].bytes > 0
    assert [s.stage for s in adapter.warmup().stages] == ["warmup"]  # no graphs on the CPU
    adapter.close()
    with pytest.raises(InstanceError, match="weightRead"):
        ParakeetAdapter().load(LoadContext("i0", "parakeet", {"nemoPath": str(path), "weightRead": "fast"}))


def test_adapter_transcribes_with_a_nemo_archive(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], tokenizer_bytes: bytes
) -> None:
    path = _archive(tmp_path, tiny_state, tokenizer_bytes)
    adapter = ParakeetAdapter()
    info = adapter.load(LoadContext("i0", "parakeet", {"nemoPath": str(path), "device": "cpu"}))
    assert info.parameters == count_parameters(TINY)
    assert getattr(info, "tokenizer") == "sentencepiece"
    adapter.warmup()
    out = adapter.run_batch([BatchInput("a", pcm16_from_float(speech_like_noise(3.0, 1)), word_timestamps=True)])
    assert isinstance(out[0], Transcript)
    assert out[0].words is not None
    assert " ".join(w.word for w in out[0].words).replace(" ", "") == out[0].text.replace(" ", "")
    adapter.close()


def test_corrupted_archive_names_every_bad_tensor(tmp_path: Path, tiny_state: Dict[str, torch.Tensor]) -> None:
    broken = dict(tiny_state)
    del broken["encoder.layers.1.conv.depthwise_conv.weight"]
    del broken["joint.pred.bias"]
    broken["encoder.layers.0.self_attn.linear_q.weight"] = torch.zeros(3, 3)
    broken["encoder.layers.0.feed_forward1.linear1.bias"] = torch.zeros(TINY.d_ff)
    path = _archive(tmp_path, broken, None)
    with pytest.raises(InstanceError) as info:
        load_nemo_model(str(path))
    err = info.value
    assert err.code == "load_failed"
    for name in (
        "encoder.layers.1.conv.depthwise_conv.weight",
        "joint.pred.bias",
        "encoder.layers.0.self_attn.linear_q.weight",
        "encoder.layers.0.feed_forward1.linear1.bias",
    ):
        assert name in err.message
    assert "2 missing" in err.message and "1 unexpected" in err.message and "1 with a different shape" in err.message
    assert f"expected [{TINY.d_model}, {TINY.d_model}]" in err.message


def test_adapter_load_failure_is_load_failed(tmp_path: Path, tiny_state: Dict[str, torch.Tensor]) -> None:
    broken = {k: v for k, v in tiny_state.items() if not k.startswith("joint.")}
    path = _archive(tmp_path, broken, None)
    with pytest.raises(InstanceError) as info:
        ParakeetAdapter().load(LoadContext("i0", "parakeet", {"nemoPath": str(path), "device": "cpu"}))
    assert info.value.code == "load_failed" and "joint.joint_net.2.weight" in info.value.message


def test_unsupported_config_lists_every_problem() -> None:
    config = _nemo_config(None)
    config["encoder"]["subsampling"] = "striding"
    config["encoder"]["att_context_size"] = [70, 13]
    config["preprocessor"]["normalize"] = "all_features"
    config["decoding"].pop("durations")
    with pytest.raises(InstanceError) as info:
        config_from_nemo(config)
    message = info.value.message
    assert info.value.code == "load_failed"
    for fragment in ("encoder.subsampling", "att_context_size", "preprocessor.normalize", "durations"):
        assert fragment in message


def test_nemo_defaults_apply_to_absent_keys() -> None:
    config = _nemo_config(None)
    del config["encoder"]["xscaling"], config["encoder"]["use_bias"]
    config["joint"]["jointnet"]["dropout"] = 0.0
    parsed = config_from_nemo(config)
    assert parsed.xscaling is True and parsed.use_bias is True  # NeMo's class defaults
    assert parsed.joint_dropout_layer is False  # output layer at joint_net.1


def test_missing_members_and_bad_files_fail_clearly(tmp_path: Path, tiny_state: Dict[str, torch.Tensor]) -> None:
    not_tar = tmp_path / "x.nemo"
    not_tar.write_bytes(b"not a tar")
    with pytest.raises(InstanceError, match="tar"):
        load_nemo_model(str(not_tar))
    with pytest.raises(InstanceError, match="no such file"):
        load_nemo_model(str(tmp_path / "absent.nemo"))
    only_config = tmp_path / "only.nemo"
    with tarfile.open(only_config, "w:") as tar:
        data = yaml.safe_dump(_nemo_config(None)).encode()
        info = tarfile.TarInfo("./model_config.yaml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(InstanceError, match="model_weights.ckpt"):
        load_nemo_model(str(only_config))
    missing_tokenizer = _write_nemo(tmp_path / "t.nemo", tiny_state, _nemo_config("nemo:abc_tokenizer.model"), {})
    with pytest.raises(InstanceError, match="abc_tokenizer.model"):
        load_nemo_model(str(missing_tokenizer))


def test_a_checkpoint_load_builds_on_meta_runs_no_init_and_matches_the_copying_load(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxmux_host.models.parakeet import model as model_module

    path = _archive(tmp_path, tiny_state, None)
    reference = build_model(TINY, seed=None)  # the previous path: uninitialised storage, then a copy
    reference.load_state_dict(tiny_state, strict=True)
    reference.eval()  # in training mode BatchNorm would update its statistics on every run
    # Below: no random init, no uninitialised CPU storage (to_empty), no nn.Module init off the meta device.

    built_on: List[str] = []
    inits: List[Any] = []
    original_init = model_module.ParakeetModel.__init__

    def recording_init(self: Any, config: Any, device: Any = None) -> None:
        built_on.append(str(device))
        original_init(self, config, device)

    monkeypatch.setattr(model_module.ParakeetModel, "__init__", recording_init)
    monkeypatch.setattr(model_module, "init_random_weights_", lambda *a, **k: inits.append(a))
    monkeypatch.setattr(torch.nn.Module, "to_empty", lambda *a, **k: inits.append("to_empty"))
    resets: List[str] = []
    classes: Tuple[Any, ...] = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.LayerNorm, torch.nn.LSTM, torch.nn.Embedding)
    for cls in classes:
        original = cls.reset_parameters

        def counting(self: Any, original: Any = original) -> None:
            if any(p.device.type != "meta" for p in self.parameters(recurse=False)):
                resets.append(type(self).__name__)
            original(self)

        monkeypatch.setattr(cls, "reset_parameters", counting)
    for weight_read in ("parallel", "stream"):
        model, _, _ = load_nemo_model(str(path), weight_read=weight_read)
        assert built_on == ["meta"] and inits == [] and resets == [], weight_read
        built_on.clear()
        loaded = model.state_dict()
        assert {n: (t.dtype, t.device.type) for n, t in loaded.items()} == {
            n: (t.dtype, t.device.type) for n, t in reference.state_dict().items()
        }
        for name, tensor in reference.state_dict().items():
            assert torch.equal(loaded[name], tensor), name
        assert all(p.requires_grad for p in model.parameters())
        clip = pcm16_from_float(speech_like_noise(1.5, seed=4))
        model.eval()
        assert model.transcribe_ids([clip]) == reference.transcribe_ids([clip])


def test_a_checkpoint_of_another_dtype_is_cast_on_load(tmp_path: Path, tiny_state: Dict[str, torch.Tensor]) -> None:
    half = {name: t.half() if t.is_floating_point() else t for name, t in tiny_state.items()}
    model, _, _ = load_nemo_model(str(_write_nemo(tmp_path / "half.nemo", half, _nemo_config(None), {})))
    for name, tensor in model.state_dict().items():
        assert tensor.dtype == tiny_state[name].dtype and torch.equal(tensor, half[name].to(tensor.dtype)), name


def test_the_in_memory_read_falls_back_to_torch_load(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    nemo = nemo_module

    def broken(data: Any) -> Any:
        raise RuntimeError("no in-place load here")

    monkeypatch.setattr(nemo, "_CAN_LOAD_IN_PLACE", True)
    monkeypatch.setattr(nemo, "_load_in_place", broken)
    model, _, _ = load_nemo_model(str(_archive(tmp_path, tiny_state, None)))
    for name, tensor in tiny_state.items():
        assert torch.equal(model.state_dict()[name], tensor), name


@pytest.mark.skipif(not nemo_module._CAN_LOAD_IN_PLACE, reason="torch 2.1+ unpickles in place; 1.13 copies")
def test_the_in_memory_read_leaves_tensors_in_the_read_buffer(
    tmp_path: Path, tiny_state: Dict[str, torch.Tensor]
) -> None:
    from voxmux_host.models.parakeet.nemo import read_nemo

    archive = read_nemo(str(_archive(tmp_path, tiny_state, None)))
    storages = {t.untyped_storage().data_ptr() for t in archive.state_dict.values() if t.numel()}  # type: ignore[attr-defined]
    assert len(storages) < len(archive.state_dict) / 2  # views of one buffer, not one storage per tensor
    for name, tensor in tiny_state.items():
        assert torch.equal(archive.state_dict[name], tensor), name
