"""``SortformerAdapter``: streaming Sortformer diarization behind the host's sequence contract
(``model_api.SequenceAdapter``): one session is one recording, each item its next chunk of audio.

Options (``LoadContext.options``; unknown keys fail the load):

| option | default | meaning |
| --- | --- | --- |
| ``config`` | ``"full"`` | ``"full"`` (diar_streaming_sortformer_4spk-v2 shapes, 117.7 M parameters) or ``"tiny"`` (CI); unused with checkpoint |
| ``checkpoint`` | none | a ``.nemo`` archive of a streaming Sortformer: its config and weights replace the random model (its speaker-cache settings always apply; its lengths unless ``preset`` or a length option is given) |
| ``seed`` | 0 | seed of the random weights |
| ``device`` | ``"auto"`` | ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` |
| ``dtype`` | ``"bf16"`` on CUDA, ``"fp32"`` on CPU | compute type of the network under autocast (front end, sigmoids and cache updates stay fp32) |
| ``preset`` | ``"chunk-15s"`` | latency preset: ``"chunk-15s"`` (186 + 1 frames, 14.96 s), ``"high"`` (10.0 s), ``"low"`` (1.04 s) |
| ``chunkLen`` | preset | frames (80 ms) per step |
| ``leftContext`` | preset | frames of left context per step |
| ``rightContext`` | preset | frames of right context (look-ahead) per step |
| ``fifoLen`` | preset | FIFO frames |
| ``spkcacheLen`` | preset | speaker-cache frames |
| ``updatePeriod`` | preset | frames moved from the FIFO to the speaker cache at a time once it overflows (at least the overflow) |
| ``postProcessing`` | ``"default"`` | threshold preset: ``"default"`` (0.5/0.5, no padding), ``"dihard3"`` or ``"callhome"`` (NeMo's v2 YAMLs) |
| ``onset`` | preset | probability above which speech starts |
| ``offset`` | preset | probability below which speech ends |
| ``padOnset`` | preset | seconds added before each segment |
| ``padOffset`` | preset | seconds added after each segment |
| ``minDurationOn`` | preset | segments shorter than this (seconds) are dropped |
| ``minDurationOff`` | preset | gaps shorter than this (seconds) are filled |
| ``cudaGraphs`` | true | capture one CUDA graph per batch size at warmup (CUDA only) |
| ``compileEncoder`` | false | ``torch.compile`` the subsampling and the conformer layers (torch >= 2.0 with Triton; compiles at warmup) |
| ``compileHead`` | false | ``torch.compile`` the projection, the Transformer layers and the sigmoids (torch >= 2.0 with Triton; compiles at warmup) |
| ``maxBatchSize`` | 64 | sessions per forward; graphs are captured for 1, 2, 3, 4, 6, 8, 12, ... up to it |
| ``maxItemSeconds`` | 60 | longest item (chunk) accepted; longer ones fail with invalid_audio |
"""
from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.load_options import is_int, is_number, resolve_device, with_defaults
from voxmux_host.model_api import (
    AdapterStats,
    ItemFailure,
    LoadContext,
    LoadInfo,
    SequenceFinish,
    SequenceInput,
    SequenceOutput,
    SequenceResultItem,
    WarmupInfo,
    seconds,
)
from voxmux_host.protocol import MAX_STATE_BYTES

from .config import CONFIGS, POST_PROCESSING, PRESETS, PostProcessingParams, SortformerConfig, StreamingParams
from .engine import StepEngine, new_context
from .model import SortformerModel, build_model, count_module_parameters
from .postprocess import PostState, SlotSegment, advance
from .session import SessionState, StateError

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_STREAMING_KEYS = {
    "chunkLen": "chunk_len",
    "leftContext": "left_context",
    "rightContext": "right_context",
    "fifoLen": "fifo_len",
    "spkcacheLen": "spkcache_len",
    "updatePeriod": "update_period",
}
_POST_KEYS = {
    "onset": "onset",
    "offset": "offset",
    "padOnset": "pad_onset",
    "padOffset": "pad_offset",
    "minDurationOn": "min_duration_on",
    "minDurationOff": "min_duration_off",
}
DEFAULT_OPTIONS: Dict[str, Any] = {
    "config": "full",
    "checkpoint": None,
    "seed": 0,
    "device": "auto",
    "dtype": None,
    "preset": "chunk-15s",
    **{key: None for key in _STREAMING_KEYS},
    "postProcessing": "default",
    **{key: None for key in _POST_KEYS},
    "cudaGraphs": True,
    "compileEncoder": False,
    "compileHead": False,
    "maxBatchSize": 64,
    "maxItemSeconds": 60,
}
#: Room kept in MAX_STATE_BYTES for the header and the post-processing carry.
STATE_HEADER_RESERVE = 64 * 1024
PROBE_TIMEOUT_S = 1.5


@dataclass
class SortformerLoadInfo(LoadInfo):
    config: str = ""
    weights: str = ""  # "random" or the .nemo path
    dtype: str = ""
    preset: str = ""
    max_state_bytes: int = 0


@dataclass
class SortformerWarmupInfo(WarmupInfo):
    warmup_ms: int = 0


@dataclass
class SortformerStats(AdapterStats):
    ENGINE_COUNTERS: ClassVar[Tuple[str, ...]] = ("steps", "items", "audio_seconds")

    steps: int = 0
    items: int = 0
    audio_seconds: float = 0.0


def parse_options(raw: Dict[str, Any]) -> Tuple[Dict[str, Any], StreamingParams, PostProcessingParams]:
    options = with_defaults(raw, DEFAULT_OPTIONS, "sortformer")
    problems: List[str] = []
    if options["config"] not in CONFIGS:
        problems.append(f"Expected config to be one of {sorted(CONFIGS)}: got {options['config']!r}")
    if options["checkpoint"] is not None and not isinstance(options["checkpoint"], str):
        problems.append(f"Expected checkpoint to be a path: got {options['checkpoint']!r}")
    if options["dtype"] is not None and options["dtype"] not in _DTYPES:
        problems.append(f"Expected dtype to be one of {sorted(_DTYPES)}: got {options['dtype']!r}")
    if not is_int(options["seed"]) or options["seed"] < 0:
        problems.append(f"Expected seed to be a non-negative integer: got {options['seed']!r}")
    for key in ("cudaGraphs", "compileEncoder", "compileHead"):
        if not isinstance(options[key], bool):
            problems.append(f"Expected {key} to be true or false: got {options[key]!r}")
    for key in ("compileEncoder", "compileHead"):
        if options[key] is True and not hasattr(torch, "compile"):
            problems.append(f"{key} needs torch >= 2.0: this is torch {torch.__version__}")
    if not is_int(options["maxBatchSize"]) or options["maxBatchSize"] < 1:
        problems.append(f"Expected maxBatchSize to be a positive integer: got {options['maxBatchSize']!r}")
    if not is_number(options["maxItemSeconds"]) or options["maxItemSeconds"] <= 0:
        problems.append(f"Expected maxItemSeconds to be a positive number: got {options['maxItemSeconds']!r}")
    streaming = PRESETS.get(str(options["preset"]))
    if streaming is None:
        problems.append(f"Expected preset to be one of {sorted(PRESETS)}: got {options['preset']!r}")
        streaming = PRESETS["chunk-15s"]
    changes: Dict[str, Any] = {}
    for key, name in _STREAMING_KEYS.items():
        value = options[key]
        if value is None:
            continue
        if not is_int(value):
            problems.append(f"Expected {key} to be an integer: got {value!r}")
        else:
            changes[name] = value
    streaming = streaming.replace(**changes)
    post = POST_PROCESSING.get(str(options["postProcessing"]))
    if post is None:
        problems.append(f"Expected postProcessing to be one of {sorted(POST_PROCESSING)}: got "
                        f"{options['postProcessing']!r}")
        post = POST_PROCESSING["default"]
    post_changes: Dict[str, Any] = {}
    for key, name in _POST_KEYS.items():
        value = options[key]
        if value is None:
            continue
        if not is_number(value):
            problems.append(f"Expected {key} to be a number: got {value!r}")
        else:
            post_changes[name] = float(value)
    post = PostProcessingParams(**{**post.__dict__, **post_changes})
    problems.extend(post.problems())
    if problems:
        raise InstanceError("load_failed", "Invalid sortformer options: " + "; ".join(problems))
    return options, streaming, post


def max_state_bytes(config: SortformerConfig, params: StreamingParams, storage_dtype: torch.dtype) -> int:
    """The largest session state the configuration can produce (header reserve included): speaker cache
    and FIFO (embeddings and predictions), the silence profile and the audio a step may still need."""
    esize = torch.finfo(storage_dtype).bits // 8
    frames = params.spkcache_len + params.fifo_len
    window = params.chunk_window_frames * config.samples_per_frame + config.n_fft + config.hop_length + 1
    return (frames * (config.fc_d_model * esize + config.n_speakers * 4) + config.fc_d_model * 4 + window * 2
            + STATE_HEADER_RESERVE)


def _check_streaming(config: SortformerConfig, params: StreamingParams, storage_dtype: torch.dtype) -> int:
    """The largest state of the configuration; load_failed listing every problem of the parameters."""
    problems = params.problems(config.n_speakers)
    limit = max_state_bytes(config, params, storage_dtype)
    if limit > MAX_STATE_BYTES:
        problems.append(f"a session state could reach {limit} bytes, over the {MAX_STATE_BYTES} allowed: "
                        f"shorten chunkLen, rightContext, fifoLen or spkcacheLen")
    if problems:
        raise InstanceError("load_failed", "Invalid sortformer streaming parameters: " + "; ".join(problems))
    return limit


def graph_batch_sizes(max_batch_size: int) -> List[int]:
    """The batch sizes captured as CUDA graphs: the powers of two and 1.5 times each from 2 on (1, 2, 3,
    4, 6, 8, 12, ...) below ``max_batch_size``, then ``max_batch_size``. A batch runs at the smallest size
    that holds it: with these, a size at most about 1.5 times its own (about 2 times with powers of two
    alone)."""
    sizes = []
    size = 1
    while size < max_batch_size:
        sizes.append(size)
        if size >= 2 and size * 3 // 2 < max_batch_size:
            sizes.append(size * 3 // 2)
        size *= 2
    sizes.append(max_batch_size)
    return sizes


class SortformerAdapter:
    """A ``voxmux_host.model_api.SequenceAdapter`` for speaker diarization."""

    work_kinds: ClassVar[Tuple[str, ...]] = ("sequence",)

    def __init__(self) -> None:
        self._model: Optional[SortformerModel] = None
        self._engine: Optional[StepEngine] = None
        self._config: Optional[SortformerConfig] = None
        self._params: Optional[StreamingParams] = None
        self._post = PostProcessingParams()
        self._options: Dict[str, Any] = {}
        self._device = torch.device("cpu")
        self._fingerprint = ""
        self._storage_dtype = torch.float32
        self._items = 0
        self._audio_seconds = 0.0
        self._probe_lock = threading.Lock()
        self._probe_buffer: Optional[torch.Tensor] = None

    # ---------------------------------------------------------------- lifecycle
    def load(self, ctx: LoadContext) -> LoadInfo:
        options, params, post = parse_options(dict(ctx.options))
        device = resolve_device(str(options["device"]))
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dtype_name = str(options["dtype"] or ("bf16" if device.type == "cuda" else "fp32"))
        dtype = _DTYPES[dtype_name]
        storage_dtype = dtype
        if options["checkpoint"]:
            from .nemo import load_nemo_model  # imported here: needs pyyaml

            model, config, nemo_params = load_nemo_model(str(options["checkpoint"]))
            if nemo_params is not None:
                if any(ctx.options.get(k) is not None for k in ("preset", *_STREAMING_KEYS)):
                    params = params.replace(**nemo_params.cache_settings())
                else:
                    params = nemo_params
            weights = str(options["checkpoint"])
            limit = _check_streaming(config, params, storage_dtype)
        else:
            config = CONFIGS[str(options["config"])]
            limit = _check_streaming(config, params, storage_dtype)  # before the (slow) random weights
            model = build_model(config, seed=int(options["seed"]))
            weights = "random"
        model.prepare_for_inference_(device, dtype)
        if options["compileEncoder"]:
            model.encoder.compile_layers()
        if options["compileHead"]:
            model.compile_head()
        self._model, self._config, self._params, self._post = model, config, params, post
        self._options, self._device, self._storage_dtype = options, device, storage_dtype
        self._engine = StepEngine(model, params, device, int(options["maxBatchSize"]), storage_dtype)
        self._fingerprint = _fingerprint(config, params, post, storage_dtype, weights, int(options["seed"]))
        if device.type == "cuda":
            self._probe_buffer = torch.zeros(1, device=device)
        return SortformerLoadInfo(
            device=str(device),
            parameters=count_module_parameters(config),
            memory_bytes=self._memory_bytes(),
            config=str(options["config"]) if weights == "random" else "nemo",
            weights=weights,
            dtype=dtype_name,
            preset=str(options["preset"]),
            max_state_bytes=limit,
        )

    def warmup(self) -> WarmupInfo:
        engine = self._require_engine()
        start = time.perf_counter()
        captured = 0
        if self._device.type == "cuda" and self._options.get("cudaGraphs", True):
            captured = engine.capture_graphs(graph_batch_sizes(engine.max_batch_size))
        return SortformerWarmupInfo(graphs_captured=captured, warmup_ms=int((time.perf_counter() - start) * 1000))

    def stats(self) -> AdapterStats:
        engine = self._engine
        if engine is None:
            return SortformerStats()
        return SortformerStats(memory_bytes=self._memory_bytes(), eager_batches=engine.counters.eager_batches,
                               graph_replays=engine.counters.graph_replays, steps=engine.counters.steps,
                               items=self._items, audio_seconds=self._audio_seconds,
                               stage_ms=engine.counters.stage_ms_copy())

    def probe(self) -> bool:
        if self._device.type != "cuda" or self._probe_buffer is None:
            return self._model is not None
        with self._probe_lock:
            stream = torch.cuda.Stream(self._device)  # type: ignore[no-untyped-call]
            with torch.cuda.stream(stream):  # type: ignore[no-untyped-call]
                self._probe_buffer.add_(1.0)
                event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                event.record(stream)  # type: ignore[no-untyped-call]
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            while not event.query():  # type: ignore[no-untyped-call]
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.001)
        return True

    def close(self) -> None:
        if self._engine is not None:
            self._engine.drop_graphs()
        self._engine = None
        self._model = None
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    # ---------------------------------------------------------------- sequence
    def begin_sequence(self, items: Sequence[SequenceInput]) -> SequenceFinish:
        """Main thread: every item's state read and its steps' forward passes; what is left (the last
        step's cache updates, the segments and the new state bytes) is the returned function's, which the
        host runs on its finisher thread while the next batch begins."""
        engine = self._require_engine()
        config, _ = self._require_config()
        results: List[Union[SequenceOutput, ItemFailure, None]] = [None] * len(items)
        mark = time.perf_counter()
        states: List[SessionState] = []
        indices: List[int] = []
        limits: List[int] = []
        for i, item in enumerate(items):
            prepared = self._prepare(item, config)
            if isinstance(prepared, ItemFailure):
                results[i] = prepared
                continue
            state, max_speakers = prepared
            states.append(state)
            indices.append(i)
            limits.append(max_speakers)
        engine.counters.add_ms("prepare", mark)
        pending = engine.begin(states)
        self._items += len(items)

        def finish() -> List[SequenceResultItem]:
            predictions = pending.finish()
            mark = time.perf_counter()
            for state, i, limit, steps in zip(states, indices, limits, predictions):
                probs = (np.concatenate(steps, axis=0) if steps
                         else np.zeros((0, config.n_speakers), dtype=np.float32))
                probs = probs.copy()
                probs[:, limit:] = 0.0
                results[i] = self._finish(items[i], state, probs, config)
            engine.counters.add_ms("finish", mark)
            return [r for r in results if r is not None]

        return finish

    def run_sequence(self, items: Sequence[SequenceInput]) -> List[SequenceResultItem]:
        """:meth:`begin_sequence` and its finish in one call."""
        return self.begin_sequence(items)()

    def _prepare(self, item: SequenceInput, config: SortformerConfig) -> Union[Tuple[SessionState, int], ItemFailure]:
        audio = np.asarray(item.audio)
        if audio.dtype != np.int16 or audio.ndim != 1:
            return ItemFailure("invalid_audio", f"Expected 16 kHz mono int16 audio: got {audio.dtype} of shape "
                                                f"{list(audio.shape)}")
        limit_s = float(self._options["maxItemSeconds"])
        if audio.shape[0] > limit_s * config.sample_rate_hz:
            return ItemFailure("invalid_audio", f"Expected a chunk of at most {limit_s:g} s: got "
                                                f"{audio.shape[0] / config.sample_rate_hz:.3f} s")
        options = item.options or {}
        bad = [key for key in ("minSpeakers", "maxSpeakers")
               if key in options and options[key] is not None and (not is_int(options[key]) or options[key] < 1)]
        if bad:
            return ItemFailure("unsupported_option", f"Expected {' and '.join(bad)} to be integers >= 1: got "
                                                     f"{[options[k] for k in bad]}")
        max_speakers = min(int(options.get("maxSpeakers") or config.n_speakers), config.n_speakers)
        offset = options.get("chunkOffsetS")
        if offset is not None and (not is_number(offset) or not math.isfinite(offset) or offset < 0):
            return ItemFailure("unsupported_option", f"Expected chunkOffsetS to be a number >= 0: got {offset!r}")
        if item.state is None:
            # No state after item 0: every earlier item failed (the scheduler has no checkpoint yet).
            state = SessionState(fingerprint=self._fingerprint,
                                 context=new_context(config, self._storage_dtype),
                                 post=PostState(n_slots=config.n_speakers))
        else:
            try:
                state = SessionState.from_bytes(bytes(item.state), self._fingerprint, config.n_speakers)
            except StateError as exc:
                return ItemFailure("session_state_missing", f"Session {item.session_id}: {exc}")
            if state.finished:
                return ItemFailure("invalid_audio", f"Session {item.session_id} already ended (an earlier item was last)")
        # The chunk starts at chunkOffsetS in the session. Audio the state has not had before it is that
        # of failed items (the state is the last successful item's): it counts in the session's time, and
        # the engine hears it as silence, so every later frame keeps its place on the session's clock.
        missing = 0 if offset is None else int(round(float(offset) * config.sample_rate_hz)) - state.samples
        if missing < 0:
            return ItemFailure("unsupported_option",
                               f"Expected chunkOffsetS of session {item.session_id} to be at least "
                               f"{state.samples / config.sample_rate_hz:g} s (the audio it has had): got {offset!r}")
        self._audio_seconds += audio.shape[0] / config.sample_rate_hz
        if missing:
            audio = np.concatenate((np.zeros(missing, dtype=np.int16), audio))
        if audio.shape[0]:
            state.pending = np.concatenate((state.pending, audio))
            state.samples += int(audio.shape[0])
        state.finished = bool(item.is_last)
        return state, max_speakers

    def _finish(self, item: SequenceInput, state: SessionState, probs: npt.NDArray[np.float32],
                config: SortformerConfig) -> Union[SequenceOutput, ItemFailure]:
        final, provisional = advance(state.post, probs.astype(np.float32), self._post, config.frame_seconds,
                                     item.is_last)
        # A slot gets the next speaker id when it first shows, final or provisional (segments only grow or
        # merge once shown, so ids follow the order of first appearance).
        for _, _, slot in sorted(final + provisional, key=lambda s: (s[0], s[2])):
            if slot not in state.speakers:
                state.speakers.append(slot)
        output = {
            "finalized": [_segment(s, state.speakers) for s in final],
            "provisional": [_segment(s, state.speakers) for s in provisional],
            "speakers": len(state.speakers),
        }
        data = state.to_bytes()
        if len(data) > MAX_STATE_BYTES:
            return ItemFailure("state_too_large", f"Session {item.session_id}: the state would be {len(data)} bytes, "
                                                  f"over {MAX_STATE_BYTES}")
        return SequenceOutput(output=output, state=data)

    # ---------------------------------------------------------------- helpers
    def _require_engine(self) -> StepEngine:
        if self._engine is None:
            raise InstanceError("model_failed", "The sortformer model is not loaded")
        return self._engine

    def _require_config(self) -> Tuple[SortformerConfig, StreamingParams]:
        if self._config is None or self._params is None:
            raise InstanceError("model_failed", "The sortformer model is not loaded")
        return self._config, self._params

    def _memory_bytes(self) -> int:
        if self._device.type == "cuda":
            return int(torch.cuda.memory_allocated(self._device))
        model = self._model
        if model is None:
            return 0
        return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def _segment(segment: SlotSegment, speakers: List[int]) -> Dict[str, Any]:
    start, end, slot = segment
    return {"start": seconds(start), "end": seconds(end), "speaker": speakers.index(slot)}


def _fingerprint(config: SortformerConfig, params: StreamingParams, post: PostProcessingParams,
                 storage_dtype: torch.dtype, weights: str, seed: int) -> str:
    """Names what a state depends on; a state from another configuration is refused."""
    text = repr((config, params, post, str(storage_dtype), weights if weights != "random" else f"random:{seed}"))
    return "sortformer:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
