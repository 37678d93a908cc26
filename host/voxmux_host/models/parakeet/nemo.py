"""Read a NeMo ``.nemo`` archive (Parakeet-TDT) without NeMo.

A ``.nemo`` file is a tar archive, plain or gzip-compressed, holding ``model_config.yaml`` (the model
section of the OmegaConf config), ``model_weights.ckpt`` (``torch.save`` of the flat state dict) and
artifacts named ``<uuid>_<basename>``, which the config references as ``nemo:<uuid>_<basename>``.
Members are matched by basename, since NeMo writes them as ``./name``.

Weights are read one of two ways (``weight_read``): ``parallel`` (the default) reads the weights
member's bytes straight out of a plain tar with several threads doing large reads into one buffer
(``voxmux_host.weight_read``) and unpickles them from memory, in place on torch 2.1+ (every tensor a
view of that buffer, no second copy; torch 1.13 copies them out); ``stream`` is the previous path, which
copies the member to a temporary file and ``torch.load``s it with ``mmap``. A gzip-compressed
archive cannot be read at offsets: ``parallel`` then decompresses the member into memory in one
stream. bench/gpu/boot.sh compares the two.

Every problem is reported at once, as an ``InstanceError('load_failed', ...)``: configuration values this
implementation cannot honour, and every missing, unexpected or wrongly shaped tensor.
"""
from __future__ import annotations

import inspect
import os
import posixpath
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from typing import Any, BinaryIO, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np
import torch

from voxmux_host.boot_stages import StageTimer
from voxmux_host.errors import InstanceError
from voxmux_host.weight_read import DEFAULT_THREADS, MemoryReader, read_range

from .config import ParakeetConfig
from .model import ParakeetModel, assign_checkpoint_, model_for_checkpoint
from .tokenizer import SentencePieceTokenizer

CONFIG_MEMBER = "model_config.yaml"
WEIGHTS_MEMBER = "model_weights.ckpt"
ARTIFACT_PREFIX = "nemo:"
#: How the weights member is read (module docstring).
WEIGHT_READS = ("parallel", "stream")
#: The first bytes of a compressed tar (gzip, bzip2, xz): no member can be read at an offset.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ")
#: Problems listed in full up to this many per kind; the count is always given.
MAX_LISTED = 1000


@dataclass
class NemoArchive:
    config: Dict[str, Any]
    state_dict: Dict[str, torch.Tensor]
    tokenizer_model: Optional[bytes]


def _fail(message: str) -> InstanceError:
    return InstanceError("load_failed", message)


def _member_index(tar: tarfile.TarFile) -> Dict[str, tarfile.TarInfo]:
    index: Dict[str, tarfile.TarInfo] = {}
    for info in tar.getmembers():
        if info.isfile():
            index[posixpath.basename(info.name)] = info
    return index


def _read_member(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(info)
    if handle is None:
        raise _fail(f"Could not read {info.name} from the archive")
    with handle:
        return handle.read()


def _torch_load(path: str) -> Any:
    kwargs: Dict[str, Any] = {"map_location": "cpu"}
    try:
        return torch.load(path, weights_only=True, mmap=True, **kwargs)  # torch >= 2.1
    except TypeError:
        return torch.load(path, weights_only=True, **kwargs)  # torch 1.13


def _is_compressed(path: str) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(6)
    return any(head.startswith(magic) for magic in _COMPRESSED_MAGIC)


def _load_extracted(tar: tarfile.TarFile, info: tarfile.TarInfo, extract_dir: Optional[str]) -> Any:
    """The previous path: the member copied to a temporary file, then ``torch.load`` with ``mmap``."""
    scratch = tempfile.mkdtemp(prefix="voxmux-nemo-", dir=extract_dir)
    try:
        weights_path = os.path.join(scratch, WEIGHTS_MEMBER)
        source = tar.extractfile(info)
        if source is None:
            raise _fail(f"Could not read {WEIGHTS_MEMBER} from the archive")
        with source, open(weights_path, "wb") as target:
            shutil.copyfileobj(source, target, length=16 << 20)
        try:
            return _torch_load(weights_path)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a load failure
            raise _fail(f"Could not load {WEIGHTS_MEMBER}: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _load_in_memory(path: str, tar: tarfile.TarFile, info: tarfile.TarInfo, threads: int) -> Any:
    """The member read into one buffer (in parallel from a plain tar), then unpickled from memory."""
    if _is_compressed(path):
        data = np.empty(info.size, dtype=np.uint8)
        source = tar.extractfile(info)
        if source is None:
            raise _fail(f"Could not read {WEIGHTS_MEMBER} from the archive")
        with source:
            got = source.readinto(data.data)  # type: ignore[attr-defined]
        if got != info.size:
            raise _fail(f"Could not read {WEIGHTS_MEMBER}: got {got} of {info.size} bytes")
    else:
        try:
            data = read_range(path, info.offset_data, info.size, threads=threads).data
        except (OSError, EOFError) as exc:
            raise _fail(f"Could not read {WEIGHTS_MEMBER} from {path}: {exc}") from exc
    if _CAN_LOAD_IN_PLACE:
        try:
            return _load_in_place(data)
        except Exception:  # noqa: BLE001 - torch.load below reports the problem, or loads what this could not
            pass
    try:
        return torch.load(cast(BinaryIO, MemoryReader(data)), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a load failure
        raise _fail(f"Could not load {WEIGHTS_MEMBER}: {exc}") from exc


#: torch 2.1+ can unpickle a checkpoint whose storages are slices of one storage (what
#: ``torch.load(mmap=True)`` uses for a file); torch 1.13 cannot, and copies every tensor out.
_CAN_LOAD_IN_PLACE = "overall_storage" in inspect.signature(torch.serialization._load).parameters


def _load_in_place(data: "np.ndarray[Any, np.dtype[np.uint8]]") -> Any:
    """Unpickle the checkpoint in ``data`` (a torch.save zip) with every tensor a view of ``data``:
    no second 2.5 GB allocation and copy, as ``torch.load`` from a buffer makes. The views keep
    ``data`` alive. Uses torch's own zip reader and weights-only unpickler, as ``torch.load`` does."""
    reader = torch._C.PyTorchFileReader(cast(BinaryIO, MemoryReader(data)))
    whole = torch.frombuffer(data, dtype=torch.uint8).untyped_storage()  # type: ignore[attr-defined]
    return torch.serialization._load(  # type: ignore[call-arg, no-untyped-call]
        reader,
        "cpu",
        torch._weights_only_unpickler,  # type: ignore[attr-defined]
        overall_storage=whole,
        encoding="utf-8",
    )


def read_nemo(
    path: str,
    extract_dir: Optional[str] = None,
    *,
    weight_read: str = "parallel",
    threads: int = DEFAULT_THREADS,
    timer: Optional[StageTimer] = None,
) -> NemoArchive:
    """Open the archive (plain tar or gzip), parse the config, load the weights and the tokenizer file.

    ``weight_read``: ``parallel`` or ``stream`` (module docstring), ``threads`` for ``parallel``;
    reading the weights is timed as the ``weight_read`` stage of ``timer``.
    """
    import yaml  # imported here: only needed for .nemo files

    if weight_read not in WEIGHT_READS:
        raise _fail(f"Expected weight_read to be one of {', '.join(WEIGHT_READS)}: got {weight_read!r}")
    timer = timer if timer is not None else StageTimer()
    if not os.path.isfile(path):
        raise _fail(f"Expected a .nemo file at {path}: no such file")
    try:
        tar = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise _fail(f"Expected {path} to be a tar or tar.gz .nemo archive: {exc}") from exc
    with tar:
        try:
            index = _member_index(tar)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise _fail(f"Could not list the members of {path} (truncated or corrupt?): {exc}") from exc
        missing = [name for name in (CONFIG_MEMBER, WEIGHTS_MEMBER) if name not in index]
        if missing:
            raise _fail(f"The archive {path} lacks {', '.join(missing)}: it holds {sorted(index)}")
        try:
            config = yaml.safe_load(_read_member(tar, index[CONFIG_MEMBER]).decode("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise _fail(f"Could not parse {CONFIG_MEMBER}: {exc}") from exc
        if not isinstance(config, dict):
            raise _fail(f"Expected {CONFIG_MEMBER} to hold a mapping: got {type(config).__name__}")
        tokenizer_model = _read_tokenizer(tar, index, config)
        info = index[WEIGHTS_MEMBER]
        with timer.stage("weight_read") as part:
            if weight_read == "parallel":
                state_dict = _load_in_memory(path, tar, info, threads)
            else:
                state_dict = _load_extracted(tar, info, extract_dir)
            part.bytes = info.size
    if isinstance(state_dict, Mapping) and "state_dict" in state_dict and isinstance(state_dict["state_dict"], Mapping):
        state_dict = state_dict["state_dict"]
    if not isinstance(state_dict, Mapping):
        raise _fail(f"Expected {WEIGHTS_MEMBER} to hold a state dict: got {type(state_dict).__name__}")
    return NemoArchive(config=config, state_dict=dict(state_dict), tokenizer_model=tokenizer_model)


def _read_tokenizer(tar: tarfile.TarFile, index: Dict[str, tarfile.TarInfo], config: Dict[str, Any]) -> Optional[bytes]:
    section = config.get("tokenizer")
    if not isinstance(section, dict):
        return None
    reference = section.get("model_path")
    if isinstance(reference, str) and reference:
        member = reference[len(ARTIFACT_PREFIX) :] if reference.startswith(ARTIFACT_PREFIX) else reference
        name = posixpath.basename(member)
        if name in index:
            return _read_member(tar, index[name])
        raise _fail(f"tokenizer.model_path names {reference}, which is not in the archive: it holds {sorted(index)}")
    candidates = sorted(name for name in index if name.endswith("tokenizer.model"))
    if candidates:
        return _read_member(tar, index[candidates[0]])
    raise _fail(
        f"The config has a tokenizer section but the archive holds no tokenizer.model: it holds {sorted(index)}"
    )


def _get(section: Any, key: str, default: Any = None) -> Any:
    return section.get(key, default) if isinstance(section, dict) else default


def config_from_nemo(cfg: Dict[str, Any]) -> ParakeetConfig:
    """Map NeMo's model config to a :class:`ParakeetConfig`, listing every value that is not supported.

    Absent keys take NeMo's class defaults (notably ``xscaling`` and ``use_bias`` default to true).
    The filterbank and window come from the checkpoint, so mel-scale options need no check here.
    """
    problems: List[str] = []

    def expect(name: str, value: Any, allowed: Tuple[Any, ...]) -> None:
        if value not in allowed:
            problems.append(f"{name} is {value!r}, supported: {', '.join(repr(a) for a in allowed)}")

    pre = cfg.get("preprocessor", {})
    enc = cfg.get("encoder", {})
    dec = cfg.get("decoder", {})
    joint = cfg.get("joint", {})
    decoding = cfg.get("decoding", {})
    for name, section in (("preprocessor", pre), ("encoder", enc), ("decoder", dec), ("joint", joint)):
        if not isinstance(section, dict):
            problems.append(f"the config has no {name} section")
    if problems:
        raise _fail("Unsupported .nemo model config: " + "; ".join(problems))

    sample_rate = int(_get(pre, "sample_rate", 16000))
    expect("preprocessor.normalize", _get(pre, "normalize", "per_feature"), ("per_feature",))
    expect("preprocessor.window", _get(pre, "window", "hann"), ("hann",))
    expect("preprocessor.log", _get(pre, "log", True), (True,))
    expect("preprocessor.frame_splicing", _get(pre, "frame_splicing", 1), (1,))
    expect("preprocessor.exact_pad", _get(pre, "exact_pad", False), (False,))
    expect("preprocessor.mag_power", float(_get(pre, "mag_power", 2.0)), (2.0,))
    expect("preprocessor.log_zero_guard_type", _get(pre, "log_zero_guard_type", "add"), ("add",))
    guard = _get(pre, "log_zero_guard_value", 2.0**-24)
    if not isinstance(guard, (int, float)):
        problems.append(f"preprocessor.log_zero_guard_value is {guard!r}, supported: a number")
        guard = 2.0**-24
    preemph = _get(pre, "preemph", 0.97)
    win_length = int(float(_get(pre, "window_size", 0.025)) * sample_rate)
    hop_length = int(float(_get(pre, "window_stride", 0.01)) * sample_rate)
    n_fft = _get(pre, "n_fft")
    n_fft = int(n_fft) if n_fft else 2 ** (win_length - 1).bit_length()
    n_mels = int(_get(pre, "features", _get(pre, "nfilt", 64)))

    expect("encoder.subsampling", _get(enc, "subsampling", "striding"), ("dw_striding",))
    expect("encoder.self_attention_model", _get(enc, "self_attention_model", "rel_pos"), ("rel_pos",))
    expect("encoder.causal_downsampling", _get(enc, "causal_downsampling", False), (False,))
    expect("encoder.untie_biases", _get(enc, "untie_biases", True), (True,))
    expect("encoder.conv_norm_type", _get(enc, "conv_norm_type", "batch_norm"), ("batch_norm",))
    expect("encoder.feat_out", _get(enc, "feat_out", -1), (-1, None))
    expect("encoder.reduction", _get(enc, "reduction", None), (None,))
    context = _get(enc, "att_context_size", None)
    if context is not None:
        first = context[0] if context and isinstance(context[0], (list, tuple)) else context
        if list(first) != [-1, -1]:
            problems.append(f"encoder.att_context_size is {context!r}, supported: [-1, -1] (full attention)")
    conv_context = _get(enc, "conv_context_size", None)
    kernel = int(_get(enc, "conv_kernel_size", 31))
    if conv_context not in (None, "None") and list(conv_context) != [(kernel - 1) // 2, (kernel - 1) // 2]:
        problems.append(f"encoder.conv_context_size is {conv_context!r}, supported: null (symmetric)")
    feat_in = int(_get(enc, "feat_in", n_mels))
    if feat_in != n_mels:
        problems.append(f"encoder.feat_in is {feat_in}, but the preprocessor makes {n_mels} features")
    d_model = int(_get(enc, "d_model", 256))
    channels = int(_get(enc, "subsampling_conv_channels", -1))

    vocab_size = int(_get(dec, "vocab_size", 0))
    prednet = _get(dec, "prednet", {})
    expect("decoder.blank_as_pad", _get(dec, "blank_as_pad", True), (True,))
    jointnet = _get(joint, "jointnet", {})
    expect("joint.jointnet.activation", str(_get(jointnet, "activation", "relu")).lower(), ("relu",))
    num_classes = int(_get(joint, "num_classes", vocab_size))
    if num_classes != vocab_size:
        problems.append(f"joint.num_classes is {num_classes}, but decoder.vocab_size is {vocab_size}")
    durations = _get(decoding, "durations", None) or _get(cfg.get("model_defaults", {}), "tdt_durations", None)
    if not durations:
        problems.append("decoding.durations is missing: only TDT models are supported")
        durations = [0, 1, 2, 3, 4]
    extra = int(_get(joint, "num_extra_outputs", len(durations)))
    if extra != len(durations):
        problems.append(f"joint.num_extra_outputs is {extra}, but there are {len(durations)} durations")
    max_symbols = _get(_get(decoding, "greedy", {}), "max_symbols", 10)

    if problems:
        raise _fail("Unsupported .nemo model config: " + "; ".join(problems))
    try:
        return ParakeetConfig(
            sample_rate_hz=sample_rate,
            n_mels=n_mels,
            n_fft=n_fft,
            win_length=win_length,
            hop_length=hop_length,
            preemph=float(preemph) if preemph is not None else 0.0,
            log_zero_guard=float(guard),
            d_model=d_model,
            n_layers=int(_get(enc, "n_layers", 17)),
            n_heads=int(_get(enc, "n_heads", 4)),
            ff_expansion=int(_get(enc, "ff_expansion_factor", 4)),
            subsampling_factor=int(_get(enc, "subsampling_factor", 4)),
            subsampling_channels=channels if channels > 0 else d_model,
            conv_kernel_size=kernel,
            use_bias=bool(_get(enc, "use_bias", True)),
            xscaling=bool(_get(enc, "xscaling", True)),
            vocab_size=vocab_size,
            pred_hidden=int(_get(prednet, "pred_hidden", 640)),
            pred_layers=int(_get(prednet, "pred_rnn_layers", 1)),
            joint_hidden=int(_get(jointnet, "joint_hidden", 640)),
            durations=tuple(int(d) for d in durations),
            max_symbols=int(max_symbols) if max_symbols else 10,
            joint_dropout_layer=bool(_get(jointnet, "dropout", 0.0)),
        )
    except ValueError as exc:
        raise _fail(f"Unsupported .nemo model config: {exc}") from exc


def check_state_dict(model: ParakeetModel, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Raise load_failed naming every missing, unexpected and wrongly shaped tensor."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    given = {name: tuple(t.shape) for name, t in state_dict.items() if isinstance(t, torch.Tensor)}
    not_tensors = sorted(name for name, t in state_dict.items() if not isinstance(t, torch.Tensor))
    missing = sorted(set(expected) - set(given))
    unexpected = sorted(set(given) - set(expected))
    mismatched = sorted(
        f"{name} (got {list(given[name])}, expected {list(expected[name])})"
        for name in set(expected) & set(given)
        if given[name] != expected[name]
    )
    parts = []
    for label, names in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("with a different shape", mismatched),
        ("not tensors", not_tensors),
    ):
        if names:
            more = f", ... ({len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
            listed = ", ".join(names[:MAX_LISTED]) + more
            parts.append(f"{len(names)} {label}: {listed}")
    if parts:
        raise _fail("The checkpoint does not match the model: " + "; ".join(parts))


def load_nemo_model(
    path: str,
    extract_dir: Optional[str] = None,
    *,
    weight_read: str = "parallel",
    threads: int = DEFAULT_THREADS,
    timer: Optional[StageTimer] = None,
) -> Tuple[ParakeetModel, Optional[SentencePieceTokenizer], ParakeetConfig]:
    """Build the model described by the archive's config and load its weights (CPU, fp32), timing the
    ``weight_read`` and ``model_build`` stages of ``timer``."""
    timer = timer if timer is not None else StageTimer()
    archive = read_nemo(path, extract_dir, weight_read=weight_read, threads=threads, timer=timer)
    config = config_from_nemo(archive.config)
    with timer.stage("model_build"):
        # Built on the meta device and given the checkpoint's tensors: no random initialisation,
        # no second 2.5 GB allocation, no copy (model.assign_checkpoint_).
        model = model_for_checkpoint(config)
        check_state_dict(model, archive.state_dict)
        assign_checkpoint_(model, archive.state_dict)
    tokenizer: Optional[SentencePieceTokenizer] = None
    if archive.tokenizer_model is not None:
        try:
            tokenizer = SentencePieceTokenizer(archive.tokenizer_model)
        except Exception as exc:  # noqa: BLE001 - sentencepiece raises plain RuntimeError/OSError
            raise _fail(f"Could not load the tokenizer model: {exc}") from exc
        if tokenizer.vocab_size != config.vocab_size:
            raise _fail(
                f"Expected a tokenizer of {config.vocab_size} pieces (decoder.vocab_size): got {tokenizer.vocab_size}"
            )
    return model, tokenizer, config
