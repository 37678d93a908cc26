"""``WhisperAdapter``: the Whisper engine (decoding.py) behind the host's batch contract
(``model_api.BatchAdapter``); the decoding runs on a thread of its own (service.py), where host batches
join whatever decodes.

Options (``LoadContext.options``; unknown keys fail the load):

| option | default | meaning |
| --- | --- | --- |
| ``config`` | ``"large-v3-turbo"`` | ``"large-v3"``, ``"large-v3-turbo"`` (4 decoder layers) or ``"tiny"`` (CI); unused with checkpointPath |
| ``checkpointPath`` | none | a Hugging Face folder (config.json, model.safetensors, tokenizer files) or OpenAI's ``.pt`` |
| ``tokenizerPath`` | none | a folder of Hugging Face tokenizer files, for a ``.pt`` or random weights (else: the folder's own; the generated tiny tokenizer for ``tiny``; made-up pieces otherwise) |
| ``seed`` | 0 | seed of the random weights and of temperature sampling on the CPU |
| ``device`` | ``"auto"`` | ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` |
| ``dtype`` | ``"bf16"`` on CUDA, ``"fp32"`` on CPU | compute type (``"fp64"``: tests); the front end and the logits stay fp32 |
| ``cudaGraphs`` | true | capture a CUDA graph of the decode step per batch size at warmup (CUDA only) |
| ``compileEncoder`` | false | ``torch.compile`` the encoder's blocks, batch size dynamic (torch >= 2.2 with Triton; compiles at load, one block's compilation serving all); batches under 4 windows stay eager |
| ``matmul`` | ``"bf16"`` | ``"bf16"`` or ``"fp8"``: the encoder's products as FP8 (e4m3) products with row-wise scales (voxmux_host/fp8.py); needs torch >= 2.5, a GPU of compute capability >= 8.9, dtype bf16 and ``compileEncoder`` |
| ``batchSizes`` | [1, 2, 4, 8, 16, 32, 64] | decode-step batch sizes captured; the largest is the number of cache slots |
| ``temperatureIncrement`` | 0.2 | fallback: retry a window this much hotter (up to 1.0); 0 turns fallback off |
| ``compressionRatioThreshold`` | 2.4 | fallback when a window's text compresses better than this (null: never) |
| ``logprobThreshold`` | -1.0 | fallback when a window's average token log-probability is below this (null: never) |
| ``noSpeechThreshold`` | 0.6 | a window is silence (skipped) when its no-speech probability is above this, unless its average log-probability is above ``logprobThreshold`` (null: never) |
| ``maxTokensPerAudioSecond`` | null | token budget per second of window audio, end-of-text forced there (benchmarks of random weights) |
| ``conditionOnPreviousText`` | true | each window's prompt holds the text of the windows before it |
| ``joinMinWindows`` | 1 | while slots decode, waiting windows join them only this many at a time (fewer where fewer slots are free): each join stalls every decoding slot for its encoder call (decoding.py) |
| ``joinMaxWaitMs`` | 0 | ... unless the oldest waiting window has waited this long |
| ``overlapEncoder`` | false | a group that joins while slots decode is encoded on a CUDA stream of its own, the decode steps going on meanwhile; it enters at the first step after (decoding.py) |
| ``stepAhead`` | false | each decode step is launched before the previous step's tokens are read, so that the host's work on them (ending windows, joins) overlaps a step on the GPU; a window's end is seen one step later (decoding.py) |
| ``languageDetection`` | ``"reference"`` | where a request names no language, a clip shorter than 30 s is detected on ``"reference"``: OpenAI's input, the clip followed by silence, one more window in its encoder call; ``"window"``: its own decode window (padded with 0.0), no extra window, as faster-whisper does (the language may differ where the two disagree) |
| ``compileRules`` | false | ``torch.compile`` the decode step's logit rules and token choice (torch >= 2.0 with Triton, ``cudaGraphs`` on a CUDA device: one compilation per batch size at warmup); the sampling noise stays outside |
| ``warmShapes`` | false | the load meets every shape a join of 1 to ``max(batchSizes)`` windows gives the eager code (encoder call, cross keys and values, language detection, the prefill padded to a few lengths), so that work done once per shape is not paid by the first requests; made at load on the decoding thread, where torch keeps cuDNN's attention graphs (decoding.py, service.py) |
| ``stepCacheSpans`` | [] | cache spans (positions below the model's ``n_text_ctx``) the decode step is also captured at: a step whose windows' positions all fall below one attends over that many positions of the self-attention cache instead of all of it (decoding.py) |
| ``prefillAttention`` | ``"auto"`` | the attention kernel of a join's eager decoder calls (language detection's first step, the prefill): ``"auto"``, torch's choice (on an H100 or H200 cuDNN's, which builds a graph per new shape, about 0.1 s); ``"efficient"``, the memory-efficient kernel, which keeps no plan per shape (torch >= 2.3, CUDA) (decoding.py) |
| ``probeTimeoutMs`` | 1500 | how long ``probe`` waits for its kernel |

Per request: ``language`` (an ISO 639-1 code the model knows; detected from the first 30 s when absent),
``prompt`` (previous-text conditioning), ``task`` (transcribe, or translate into English) and ``temperature``
(the first decoding's; fallback goes on from there). Word timestamps come from the decoder's cross-attention
(alignment.py), adjusted as OpenAI's ``add_word_timestamps`` adjusts them, which also moves the request's
segments to their words' bounds (word_adjustments.py); as in OpenAI's ``transcribe()``, a window that does not
end on a single timestamp is then followed from its last word's end, and a segment left with no duration is
cleared (decoding.py).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from voxmux_host.attention_kernels import attention_kernels, attention_kernels_missing
from voxmux_host.boot_stages import StageTimer
from voxmux_host.errors import InstanceError
from voxmux_host.fp8 import fp8_option_problems
from voxmux_host.load_options import is_int, is_number, resolve_device, with_defaults
from voxmux_host.model_api import (AdapterStats, BatchFinish, BatchInput, BatchOutput, ItemFailure, LoadContext,
                                   LoadInfo, Segment, SegmentDecoding, StagedBatch, Transcript, WarmupInfo, Word,
                                   seconds)

from .checkpoints import CheckpointError, load_hf_directory, load_openai_checkpoint
from .config import N_FRAMES, PRESETS, count_parameters
from .decoding import PREFILL_ATTENTION, TASKS, DecodedSegment, EngineOptions, RequestOptions, Transcription, WhisperEngine
from .features import pcm_to_float
from .model import COMPILED_MIN_WINDOWS, WhisperModel, build_model
from .service import DecodeService
from .tokenizer import LANGUAGES, WhisperTokenizer, synthetic_tokenizer, tiny_tokenizer

#: LANGUAGES: every language a Whisper tokenizer may know (the gateway's list: src/app/whisper-languages.ts).
__all__ = ["DEFAULT_OPTIONS", "LANGUAGES", "WhisperAdapter", "load_weights", "parse_options"]

DEFAULT_OPTIONS: Dict[str, Any] = {
    "config": "large-v3-turbo",
    "checkpointPath": None,
    "tokenizerPath": None,
    "seed": 0,
    "device": "auto",
    "dtype": None,
    "cudaGraphs": True,
    "compileEncoder": False,
    "matmul": "bf16",
    "batchSizes": [1, 2, 4, 8, 16, 32, 64],
    "temperatureIncrement": 0.2,
    "compressionRatioThreshold": 2.4,
    "logprobThreshold": -1.0,
    "noSpeechThreshold": 0.6,
    "maxTokensPerAudioSecond": None,
    "conditionOnPreviousText": True,
    "joinMinWindows": 1,
    "joinMaxWaitMs": 0,
    "overlapEncoder": False,
    "stepAhead": False,
    "compileRules": False,
    "warmShapes": False,
    "stepCacheSpans": [],
    "prefillAttention": "auto",
    "languageDetection": "reference",
    "probeTimeoutMs": 1500,
}
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}
MATMUL_KINDS = ("bf16", "fp8")
LANGUAGE_DETECTIONS = ("reference", "window")


@dataclass
class WhisperLoadInfo(LoadInfo):
    config: str = ""
    weights: str = ""  # "random", or the checkpoint path
    tokenizer: str = ""  # "tiny", "synthetic", or the folder read
    dtype: str = ""
    languages: int = 0
    multilingual: bool = True


@dataclass
class WhisperWarmupInfo(WarmupInfo):
    warmup_ms: int = 0
    memory_bytes: int = 0


@dataclass
class WhisperStats(AdapterStats):
    ENGINE_COUNTERS: ClassVar[Tuple[str, ...]] = ("clips", "windows", "fallbacks", "tokens", "decode_steps",
                                                  "encoder_calls", "encoder_windows", "audio_seconds")

    clips: int = 0
    windows: int = 0
    fallbacks: int = 0
    tokens: int = 0
    decode_steps: int = 0
    encoder_calls: int = 0
    #: 30 s inputs encoded: decode windows, and the language detection inputs of short clips.
    encoder_windows: int = 0
    audio_seconds: float = 0.0
    tokens_per_audio_second: float = 0.0


def parse_options(raw: Dict[str, Any]) -> Dict[str, Any]:
    """The options with defaults; InstanceError('load_failed') naming every problem."""
    options = with_defaults(raw, DEFAULT_OPTIONS, "whisper")
    problems = []
    if options["config"] not in PRESETS:
        problems.append(f"Expected config to be one of {sorted(PRESETS)}: got {options['config']!r}")
    for key in ("checkpointPath", "tokenizerPath"):
        if options[key] is not None and (not isinstance(options[key], str) or not options[key]):
            problems.append(f"Expected {key} to be a non-empty path: got {options[key]!r}")
    if options["dtype"] is not None and options["dtype"] not in _DTYPES:
        problems.append(f"Expected dtype to be one of {sorted(_DTYPES)}: got {options['dtype']!r}")
    sizes = options["batchSizes"]
    if not isinstance(sizes, list) or not sizes or not all(is_int(v) and 0 < v <= 1024 for v in sizes):
        problems.append(f"Expected batchSizes to be a non-empty list of integers from 1 to 1024: got {sizes!r}")
    spans = options["stepCacheSpans"]
    if not isinstance(spans, list) or not all(is_int(v) and 0 < v < 1024 for v in spans):
        problems.append(f"Expected stepCacheSpans to be a list of integers from 1 to 1023: got {spans!r}")
    for key in ("seed", "probeTimeoutMs", "joinMinWindows", "joinMaxWaitMs"):
        minimum = 0 if key in ("seed", "joinMaxWaitMs") else 1
        if not is_int(options[key]) or options[key] < minimum:
            problems.append(f"Expected {key} to be a {'non-negative' if minimum == 0 else 'positive'} integer: "
                            f"got {options[key]!r}")
    increment = options["temperatureIncrement"]
    if not is_number(increment) or not 0 <= increment <= 1:
        problems.append(f"Expected temperatureIncrement to be a number from 0 to 1: got {increment!r}")
    for key in ("compressionRatioThreshold", "logprobThreshold", "noSpeechThreshold"):
        if options[key] is not None and not is_number(options[key]):
            problems.append(f"Expected {key} to be a number or null: got {options[key]!r}")
    budget = options["maxTokensPerAudioSecond"]
    if budget is not None and (not is_number(budget) or budget <= 0):
        problems.append(f"Expected maxTokensPerAudioSecond to be a positive number or null: got {budget!r}")
    for key in ("cudaGraphs", "conditionOnPreviousText", "overlapEncoder", "stepAhead", "compileEncoder", "compileRules",
                "warmShapes"):
        if not isinstance(options[key], bool):
            problems.append(f"Expected {key} to be true or false: got {options[key]!r}")
    if options["compileEncoder"] is True and not hasattr(torch.nn.Module, "compile"):
        problems.append(f"compileEncoder needs torch >= 2.2: this is torch {torch.__version__}")
    if options["compileRules"] is True and not hasattr(torch, "compile"):
        problems.append(f"compileRules needs torch >= 2.0: this is torch {torch.__version__}")
    elif options["compileRules"] is True and options["cudaGraphs"] is not True:
        problems.append("compileRules needs cudaGraphs: true (the rules compile once per captured batch size)")
    if options["prefillAttention"] not in PREFILL_ATTENTION:
        problems.append(f"Expected prefillAttention to be one of {', '.join(PREFILL_ATTENTION)}: "
                        f"got {options['prefillAttention']!r}")
    elif options["prefillAttention"] != "auto" and attention_kernels() is None:
        problems.append(f"prefillAttention {options['prefillAttention']}: {attention_kernels_missing()}")
    if options["languageDetection"] not in LANGUAGE_DETECTIONS:
        problems.append(f"Expected languageDetection to be reference or window: got {options['languageDetection']!r}")
    if options["matmul"] not in MATMUL_KINDS:
        problems.append(f"Expected matmul to be bf16 or fp8: got {options['matmul']!r}")
    elif options["matmul"] == "fp8":
        problems.extend(fp8_option_problems(options))
    if problems:
        raise InstanceError("load_failed", "Invalid whisper options: " + "; ".join(problems))
    return options


def load_weights(options: Dict[str, Any]) -> Tuple[WhisperModel, WhisperTokenizer, str, str]:
    """The model and tokenizer the options name, with where each came from."""
    path = options["checkpointPath"]
    tokenizer: Optional[WhisperTokenizer] = None
    tokenizer_source = ""
    try:
        if path is None:
            model = build_model(PRESETS[str(options["config"])], seed=int(options["seed"]))
            weights = "random"
        elif os.path.isdir(path):
            model = load_hf_directory(path)
            weights = path
            if options["tokenizerPath"] is None:
                tokenizer, tokenizer_source = WhisperTokenizer.from_directory(path), path
        elif os.path.isfile(path):
            model = load_openai_checkpoint(path)
            weights = path
        else:
            raise InstanceError("load_failed", f"Expected checkpointPath to be a folder or a .pt file: {path} does "
                                               f"not exist")
        if options["tokenizerPath"] is not None:
            tokenizer_source = str(options["tokenizerPath"])
            tokenizer = WhisperTokenizer.from_directory(tokenizer_source)
    except (CheckpointError, ValueError, OSError) as exc:
        raise InstanceError("load_failed", str(exc)) from exc
    n_vocab = model.config.n_vocab
    if tokenizer is None:
        tiny = tiny_tokenizer()
        if tiny.n_vocab == n_vocab:
            tokenizer, tokenizer_source = tiny, "tiny"
        else:
            try:
                tokenizer, tokenizer_source = synthetic_tokenizer(n_vocab), "synthetic"
            except ValueError as exc:
                raise InstanceError("load_failed", f"No tokenizer for a vocabulary of {n_vocab}: {exc}") from exc
    if tokenizer.n_vocab != n_vocab:
        raise InstanceError("load_failed", f"Expected a tokenizer of {n_vocab} tokens (the model's vocabulary): "
                                           f"{tokenizer_source} has {tokenizer.n_vocab}")
    return model, tokenizer, weights, tokenizer_source


class WhisperAdapter:
    """A ``voxmux_host.model_api.BatchAdapter``: ``begin`` hands the batch to the decoding thread
    (service.py), where it joins whatever decodes; its function waits for the transcripts."""

    work_kinds: ClassVar[Tuple[str, ...]] = ("batch",)

    def __init__(self) -> None:
        self._options: Dict[str, Any] = {}
        self._engine: Optional[WhisperEngine] = None
        self._service: Optional[DecodeService] = None
        self._device = torch.device("cpu")
        self._warmup_ms = 0
        self._clips = 0
        self._audio_seconds = 0.0
        self._probe_lock = threading.Lock()
        #: Set while warmup captures graphs: a kernel launched from the probe thread then would break the capture.
        self._capturing = threading.Event()

    @property
    def engine(self) -> WhisperEngine:
        if self._engine is None:
            raise InstanceError("model_failed", "The whisper adapter is not loaded")
        return self._engine

    def load(self, ctx: LoadContext) -> LoadInfo:
        options = parse_options(dict(ctx.options))
        self._options = options
        device = resolve_device(str(options["device"]))
        self._device = device
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dtype_name = options["dtype"] or ("bf16" if device.type == "cuda" else "fp32")
        model, tokenizer, weights, tokenizer_source = load_weights(options)
        model = model.to(device=device, dtype=_DTYPES[dtype_name]).eval()
        if options["matmul"] == "fp8":
            model.encoder.build_fp8_()
        if options["compileEncoder"]:
            model.encoder.compile_()
        sizes = tuple(sorted(set(int(b) for b in options["batchSizes"])))
        spans = tuple(sorted(set(int(n) for n in options["stepCacheSpans"])))
        if spans and spans[-1] >= model.config.n_text_ctx:
            raise InstanceError("load_failed", f"Expected stepCacheSpans below the model's {model.config.n_text_ctx} "
                                               f"text positions: got {spans[-1]}")
        if options["prefillAttention"] != "auto" and device.type != "cuda":
            raise InstanceError("load_failed", f"prefillAttention {options['prefillAttention']} picks a CUDA kernel: "
                                               f"got device {device}")
        if options["compileRules"] and device.type != "cuda":
            raise InstanceError("load_failed", f"compileRules needs a CUDA device (it runs in the step's CUDA graphs): "
                                               f"got device {device}")
        engine_options = EngineOptions(
            slots=sizes[-1], batch_sizes=sizes, use_graphs=bool(options["cudaGraphs"]) and device.type == "cuda",
            temperature_increment=float(options["temperatureIncrement"]),
            compression_ratio_threshold=options["compressionRatioThreshold"],
            logprob_threshold=options["logprobThreshold"], no_speech_threshold=options["noSpeechThreshold"],
            max_tokens_per_audio_second=options["maxTokensPerAudioSecond"],
            condition_on_previous_text=bool(options["conditionOnPreviousText"]), seed=int(options["seed"]),
            join_min_windows=int(options["joinMinWindows"]), join_max_wait_s=int(options["joinMaxWaitMs"]) / 1000,
            overlap_encoder=bool(options["overlapEncoder"]), step_ahead=bool(options["stepAhead"]),
            compile_rules=bool(options["compileRules"]), warm_shapes=bool(options["warmShapes"]), step_spans=spans,
            prefill_attention=str(options["prefillAttention"]), detect_on_window=options["languageDetection"] == "window")
        engine = self._engine = WhisperEngine(model, tokenizer, device, _DTYPES[dtype_name], engine_options)
        # Compilation and the decoding thread's first calls happen here, while sibling instances may still
        # serve; warmup(), under the exclusive-warmup gate, only captures the step's graphs.
        timer = StageTimer()
        if options["compileEncoder"]:
            with timer.stage("compile"):
                self._compile_encoder()
        with timer.stage("warmup"):
            self._service = DecodeService(engine)
            warm = engine.warm_shapes if options["warmShapes"] else engine.warm_first_calls
            try:
                self._service.call(warm).result()
            except BaseException:
                self._service.close()
                self._service = None
                raise
        return WhisperLoadInfo(
            stages=timer.take(), device=str(device), parameters=count_parameters(model.config),
            memory_bytes=self._memory_bytes(),
            config=str(options["config"]) if weights == "random" else "checkpoint", weights=weights,
            tokenizer=tokenizer_source, dtype=dtype_name, languages=len(tokenizer.languages),
            multilingual=model.is_multilingual)

    def warmup(self) -> WarmupInfo:
        engine = self.engine
        timer = StageTimer()
        start = time.perf_counter()
        with self._probe_lock:
            self._capturing.set()
        try:
            # The decoding thread waits, idle, while the graphs are captured (graphs: none without CUDA).
            if engine.options.use_graphs:
                with timer.stage("graph_capture"):
                    graphs = engine.capture_graphs()
            else:
                graphs = 0
        finally:
            self._capturing.clear()
        self._warmup_ms = int((time.perf_counter() - start) * 1000)
        return WhisperWarmupInfo(stages=timer.take(), graphs_captured=graphs, warmup_ms=self._warmup_ms,
                                 memory_bytes=self._memory_bytes())

    @torch.no_grad()
    def _compile_encoder(self) -> None:
        """The compiled encoder's one compilation (batch size dynamic; smaller batches stay eager), at load."""
        engine = self.engine
        mel = torch.zeros(COMPILED_MIN_WINDOWS, engine.config.n_mels, N_FRAMES, device=engine.device, dtype=engine.dtype)
        engine.model.encoder(mel)

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
            self._service = None
        self._engine = None
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    def languages(self) -> Tuple[str, ...]:
        return self.engine.tokenizer.languages

    # ---------------------------------------------------------------- batches
    def stage(self, inputs: Sequence[BatchInput]) -> Optional[StagedBatch]:
        return None

    def run_batch(self, inputs: Sequence[BatchInput]) -> List[BatchOutput]:
        return self.begin(inputs, None)()

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        if staged is not None:
            staged.release()
        service = self._service
        if service is None:
            raise InstanceError("model_failed", "The whisper adapter is not loaded")
        results: List[Optional[BatchOutput]] = [None] * len(inputs)
        audios: List[torch.Tensor] = []
        requests: List[RequestOptions] = []
        indices: List[int] = []
        for i, item in enumerate(inputs):
            failure = self._validate(item)
            if failure is not None:
                results[i] = failure
                continue
            audios.append(pcm_to_float(np.ascontiguousarray(item.audio)))
            requests.append(RequestOptions(task=item.task, language=item.language, prompt=item.prompt or None,
                                           temperature=float(item.temperature), word_timestamps=item.word_timestamps,
                                           piece=item.piece))
            indices.append(i)
        if not audios:
            outputs = [r for r in results if r is not None]
            return lambda: outputs
        pending = service.submit(audios, requests)

        def finish() -> List[BatchOutput]:
            try:
                done = pending.result()
            except Exception as exc:  # noqa: BLE001 - only OOM becomes per-request failures
                if not _is_oom(exc):
                    raise
                if self._device.type == "cuda":
                    torch.cuda.empty_cache()
                for i in indices:
                    results[i] = ItemFailure("out_of_memory", f"Out of device memory running a batch of {len(indices)}")
            else:
                for i, transcription in zip(indices, done):
                    results[i] = _to_transcript(transcription, inputs[i])
                self._clips += len(done)
                self._audio_seconds += sum(t.duration_s for t in done)
            return [r for r in results if r is not None]

        return finish

    def _validate(self, item: BatchInput) -> Optional[ItemFailure]:
        audio = item.audio
        if not isinstance(audio, np.ndarray) or audio.ndim != 1 or audio.dtype != np.int16:
            return ItemFailure("invalid_audio", f"Expected mono 16-bit PCM as a 1-D int16 array: got "
                                                f"{getattr(audio, 'dtype', None)} of shape {getattr(audio, 'shape', None)}")
        if audio.shape[0] == 0:
            return ItemFailure("invalid_audio", "Expected at least one sample: got 0")
        if item.task not in TASKS:
            return ItemFailure("unsupported_option", f"Expected task transcribe or translate: got {item.task!r}")
        if not 0.0 <= item.temperature <= 1.0:
            return ItemFailure("unsupported_option", f"Expected temperature from 0 to 1: got {item.temperature!r}")
        languages = self.engine.tokenizer.languages
        if item.language is not None and item.language not in languages:
            return ItemFailure("unsupported_option", f"Expected language to be one of this model's {len(languages)} "
                                                     f"ISO 639-1 codes (en, de, ...): got {item.language!r}")
        return None

    # ---------------------------------------------------------------- health
    def stats(self) -> AdapterStats:
        engine = self._engine
        counters = engine.counters if engine is not None else None
        tokens = counters.tokens if counters else 0
        return WhisperStats(
            memory_bytes=self._memory_bytes(),
            eager_batches=counters.eager_steps if counters else 0,
            graph_replays=counters.graph_replays if counters else 0,
            clips=self._clips, windows=counters.windows if counters else 0,
            fallbacks=counters.fallbacks if counters else 0, tokens=tokens,
            decode_steps=counters.decode_steps if counters else 0,
            encoder_calls=counters.encoder_calls if counters else 0,
            encoder_windows=counters.encoder_windows if counters else 0, audio_seconds=self._audio_seconds,
            tokens_per_audio_second=tokens / self._audio_seconds if self._audio_seconds else 0.0)

    def probe(self) -> bool:
        """A one-element kernel on a stream of its own, waited for up to probeTimeoutMs (not while warmup
        captures graphs); False on timeout or error."""
        timeout_s = int(self._options.get("probeTimeoutMs", 1500)) / 1000.0
        try:
            with self._probe_lock:
                if self._capturing.is_set():
                    return True  # never launch work while graphs are being captured
                if self._device.type != "cuda":
                    return bool(torch.ones(1).add_(1).item() == 2.0)
                stream = torch.cuda.Stream(device=self._device)  # type: ignore[no-untyped-call]
                with torch.cuda.stream(stream):
                    torch.ones(1, device=self._device).add_(1)
                    event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                    event.record(stream)  # type: ignore[no-untyped-call]
                deadline = time.monotonic() + timeout_s
                while not event.query():  # type: ignore[no-untyped-call]
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.001)
                return True
        except Exception:  # noqa: BLE001 - any failure of the probe means the device is not healthy
            return False

    def _memory_bytes(self) -> int:
        if self._device.type == "cuda":
            return int(torch.cuda.memory_allocated(self._device))
        engine = self._engine
        if engine is None:
            return 0
        tensors = list(engine.model.parameters()) + list(engine.model.buffers())
        return int(sum(t.numel() * t.element_size() for t in tensors)) + engine.cache.nbytes


def _to_transcript(transcription: Transcription, request: BatchInput) -> Transcript:
    """The protocol's transcript; a translation's language is its text's, English."""
    segments = tuple(Segment(start=seconds(s.start), end=seconds(s.end), text=s.text, decoding=_decoding(s))
                     for s in transcription.segments)
    language = "en" if request.task == "translate" else transcription.language
    words = tuple(Word(word=w, start=seconds(start), end=seconds(end)) for w, start, end in transcription.words)
    return Transcript(text=transcription.text, language=language, duration_s=seconds(transcription.duration_s),
                      segments=segments, words=words if request.word_timestamps else None)


def _decoding(segment: DecodedSegment) -> SegmentDecoding:
    """How the segment was decoded, as verbose_json reports it (log-probabilities and ratios rounded to 6
    digits: the wire carries them as JSON numbers)."""
    return SegmentDecoding(seek=segment.seek, tokens=tuple(segment.tokens), temperature=round(segment.temperature, 6),
                           avg_logprob=round(segment.avg_logprob, 6),
                           compression_ratio=round(segment.compression_ratio, 6),
                           no_speech_prob=round(segment.no_speech_prob, 6))


def _is_oom(exc: BaseException) -> bool:
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)
