"""``ParakeetAdapter``: the Parakeet-TDT model behind the host's batch contract (``model_api.BatchAdapter``).

Options (``LoadContext.options``; unknown keys fail the load):

| option | default | meaning |
| --- | --- | --- |
| ``config`` | ``"full"`` | ``"full"`` (Parakeet-TDT-0.6B-v2 shapes) or ``"tiny"`` (CI); unused with nemoPath |
| ``nemoPath`` | none | a ``.nemo`` archive: its config, weights and tokenizer replace the random model |
| ``weightRead`` | ``"parallel"`` | how the ``.nemo`` weights are read: ``"parallel"`` (large reads on several threads into one buffer, unpickled from memory) or ``"stream"`` (the previous path: extracted to a temporary file, then ``torch.load`` with mmap); nemo.py |
| ``weightReadThreads`` | 8 | threads of a ``"parallel"`` read |
| ``tokenizerPath`` | none | a SentencePiece ``.model`` for a random-weights model (else a synthetic vocabulary) |
| ``seed`` | 0 | seed of the random weights |
| ``device`` | ``"auto"`` | ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` |
| ``dtype`` | ``"bf16"`` on CUDA, ``"fp32"`` on CPU | compute type of the network (front end and argmax stay fp32) |
| ``cudaGraphs`` | true | capture CUDA graphs at warmup (CUDA only) |
| ``batchSizes`` | [1, 2, 4, 8, 16] | batch sizes captured; larger batches are split |
| ``lengthBucketsMs`` | [5000, 15000, 30000, 45000, 60000] | length buckets captured; longer clips run eagerly |
| ``decodeChunkSteps`` | 8 | decode steps per graph replay (one host check per chunk) |
| ``cudnnBenchmark`` | true | let cuDNN time its convolution algorithms for each graph shape while the model loads |
| ``compileEncoder`` | false | ``torch.compile`` the conformer layers (torch >= 2.0 with Triton; compiles while the model loads) |
| ``compileDecodeStep`` | false | ``torch.compile`` the decode step (torch >= 2.0 with Triton; compiles while the model loads) |
| ``attention`` | ``"auto"`` | ``"sdpa"`` (needs torch >= 2.0), ``"manual"`` or ``"auto"`` (sdpa where available) |
| ``matmul`` | ``"bf16"`` | ``"bf16"`` or ``"fp8"``: the encoder's large matrix products as FP8 (e4m3) GEMMs with row-wise scales; needs torch >= 2.5, a GPU of compute capability >= 8.9, dtype bf16 and ``compileEncoder``; on one H200 the encoder took 6.5 % less time; accuracy on a trained checkpoint not checked |
| ``experimentalKernels`` | ``"torch"`` | experimental (experimental.py): ``"torch"`` or ``"triton"``, the attention's position bias and the convolution module's GLU, depthwise convolution, BatchNorm and SiLU as the project's own Triton kernels (kernels.py); needs a CUDA device, torch >= 2.4 with Triton and a convolution kernel size of 9; lost in the server with one bucket, may pay off where the compiled encoder sees several length buckets (docs/operations.md) |
| ``probeTimeoutMs`` | 1500 | how long ``probe`` waits for its kernel (keep it below the host's probe timeout) |
| ``simulateHang`` | false | tests only: ``true`` or ``"hang"`` makes ``probe`` time out, ``"fail"`` makes it fail |
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from voxmux_host.boot_stages import StageTimer
from voxmux_host.errors import InstanceError
from voxmux_host.load_options import is_int, resolve_device, with_defaults
from voxmux_host.model_api import (
    AdapterStats,
    BatchFinish,
    BatchInput,
    BatchOutput,
    ItemFailure,
    LoadContext,
    LoadInfo,
    Segment,
    StagedBatch,
    Transcript,
    WarmupInfo,
    Word,
    seconds,
)

from .config import PRESETS, ParakeetConfig, count_parameters
from .decoder import DecodedItem
from .encoder import ATTENTION_IMPLS, HAS_SDPA, MATMUL_KINDS
from .experimental import EXPERIMENTAL_DEFAULTS, apply_experimental, experimental_problems, kernels_in_use
from voxmux_host.fp8 import fp8_option_problems
from .model import ParakeetModel, build_model
from .runner import ParakeetRunner, RunnerOptions, elapsed_ms
from .staging import StagedClips
from .tokenizer import SentencePieceTokenizer, SyntheticTokenizer, Tokenizer

LANGUAGE = "en"
SENTENCE_END = (".", "?", "!")
DEFAULT_OPTIONS: Dict[str, Any] = {
    "config": "full",
    "nemoPath": None,
    "weightRead": "parallel",
    "weightReadThreads": 8,
    "tokenizerPath": None,
    "seed": 0,
    "device": "auto",
    "dtype": None,
    "cudaGraphs": True,
    "batchSizes": [1, 2, 4, 8, 16],
    "lengthBucketsMs": [5000, 15000, 30000, 45000, 60000],
    "decodeChunkSteps": 8,
    "compileDecodeStep": False,
    "compileEncoder": False,
    "cudnnBenchmark": True,
    "attention": "auto",
    "matmul": "bf16",
    "probeTimeoutMs": 1500,
    "simulateHang": False,
    **EXPERIMENTAL_DEFAULTS,
}
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass
class ParakeetLoadInfo(LoadInfo):
    config: str = ""
    weights: str = ""  # "random" or the .nemo path
    tokenizer: str = ""  # "synthetic" or "sentencepiece"
    dtype: str = ""
    attention: str = ""
    matmul: str = ""
    kernels: str = ""


@dataclass
class ParakeetWarmupInfo(WarmupInfo):
    warmup_ms: int = 0
    graph_pool_bytes: int = 0
    memory_bytes: int = 0


@dataclass
class ParakeetStats(AdapterStats):
    ENGINE_COUNTERS: ClassVar[Tuple[str, ...]] = ("clips", "tokens", "decode_steps", "audio_seconds")

    clips: int = 0
    tokens: int = 0
    decode_steps: int = 0
    audio_seconds: float = 0.0
    tokens_per_clip: float = 0.0
    decode_steps_per_clip: float = 0.0
    tokens_per_audio_second: float = 0.0
    graphs_captured: int = 0
    warmup_ms: int = 0


def _parse_options(raw: Dict[str, Any]) -> Dict[str, Any]:
    options = with_defaults(raw, DEFAULT_OPTIONS, "parakeet")
    problems = []
    if options["config"] not in PRESETS:
        problems.append(f"Expected config to be one of {sorted(PRESETS)}: got {options['config']!r}")
    if options["dtype"] is not None and options["dtype"] not in _DTYPES:
        problems.append(f"Expected dtype to be one of {sorted(_DTYPES)}: got {options['dtype']!r}")
    if options["attention"] not in ("auto", *ATTENTION_IMPLS):
        problems.append(f"Expected attention to be auto, sdpa or manual: got {options['attention']!r}")
    if options["attention"] == "sdpa" and not HAS_SDPA:
        problems.append(f"attention sdpa needs torch >= 2.0: this is torch {torch.__version__}")
    if options["matmul"] not in MATMUL_KINDS:
        problems.append(f"Expected matmul to be bf16 or fp8: got {options['matmul']!r}")
    if options["matmul"] == "fp8":
        problems.extend(fp8_option_problems(options))
    for key in ("batchSizes", "lengthBucketsMs"):
        value = options[key]
        if not isinstance(value, list) or not value or not all(is_int(v) and v > 0 for v in value):
            problems.append(f"Expected {key} to be a non-empty list of positive integers: got {value!r}")
    if options["weightRead"] not in ("parallel", "stream"):
        problems.append(f"Expected weightRead to be parallel or stream: got {options['weightRead']!r}")
    for key in ("seed", "decodeChunkSteps", "probeTimeoutMs", "weightReadThreads"):
        if not is_int(options[key]) or options[key] < (0 if key == "seed" else 1):
            kind = "non-negative" if key == "seed" else "positive"
            problems.append(f"Expected {key} to be a {kind} integer: got {options[key]!r}")
    if not isinstance(options["cudnnBenchmark"], bool):
        problems.append(f"Expected cudnnBenchmark to be true or false: got {options['cudnnBenchmark']!r}")
    for key in ("compileDecodeStep", "compileEncoder"):
        if not isinstance(options[key], bool):
            problems.append(f"Expected {key} to be true or false: got {options[key]!r}")
        elif options[key] and not hasattr(torch, "compile"):
            problems.append(f"{key} needs torch >= 2.0: this is torch {torch.__version__}")
    if options["simulateHang"] not in (False, True, "hang", "fail"):
        problems.append(f"Expected simulateHang to be false, true, 'hang' or 'fail': got {options['simulateHang']!r}")
    problems.extend(experimental_problems(options))
    if problems:
        raise InstanceError("load_failed", "Invalid parakeet options: " + "; ".join(problems))
    return options


def _tensor_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers (what the device upload moved, in their final type)."""
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def _is_oom(exc: BaseException) -> bool:
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc)


class ParakeetAdapter:
    """A ``voxmux_host.model_api.BatchAdapter``: ``stage`` (pinned staging), ``begin`` (the model) and the
    finish it returns (texts, words, segments)."""

    work_kinds: ClassVar[Tuple[str, ...]] = ("batch",)

    def __init__(self) -> None:
        self._options: Dict[str, Any] = {}
        self._model: Optional[ParakeetModel] = None
        self._runner: Optional[ParakeetRunner] = None
        self._tokenizer: Optional[Tokenizer] = None
        self._config: Optional[ParakeetConfig] = None
        self._device = torch.device("cpu")
        self._warmup_ms = 0
        self._probe_buffer: Optional[torch.Tensor] = None
        self._probe_side_buffer: Optional[torch.Tensor] = None
        self._probe_lock = threading.Lock()

    # ---------------------------------------------------------------- lifecycle
    def load(self, ctx: LoadContext) -> LoadInfo:
        options = _parse_options(dict(ctx.options))
        self._options = options
        timer = StageTimer()
        device = resolve_device(str(options["device"]))
        self._device = device
        if device.type == "cuda":
            with timer.stage("device_init"):
                torch.cuda.set_device(device)
                torch.cuda.synchronize(device)  # creates the context here, so that it is timed apart
        dtype_name = options["dtype"] or ("bf16" if device.type == "cuda" else "fp32")
        dtype = _DTYPES[dtype_name]

        tokenizer: Optional[Tokenizer] = None
        if options["nemoPath"]:
            from .nemo import load_nemo_model  # imported here: needs pyyaml

            model, nemo_tokenizer, config = load_nemo_model(
                str(options["nemoPath"]),
                weight_read=str(options["weightRead"]),
                threads=int(options["weightReadThreads"]),
                timer=timer,
            )
            tokenizer = nemo_tokenizer
            weights = str(options["nemoPath"])
        else:
            config = PRESETS[str(options["config"])]
            with timer.stage("model_build"):
                model = build_model(config, seed=int(options["seed"]))
            weights = "random"
        if tokenizer is None and options["tokenizerPath"]:
            path = str(options["tokenizerPath"])
            try:
                tokenizer = SentencePieceTokenizer.from_file(path)
            except (OSError, RuntimeError) as exc:
                raise InstanceError("load_failed", f"Could not load tokenizerPath {path}: {exc}") from exc
            if tokenizer.vocab_size != config.vocab_size:
                raise InstanceError(
                    "load_failed",
                    f"Expected a tokenizer of {config.vocab_size} pieces: got {tokenizer.vocab_size} in {path}",
                )
        if tokenizer is None:
            tokenizer = SyntheticTokenizer(config.vocab_size)

        attention = str(options["attention"])
        if attention == "auto":
            attention = "sdpa" if HAS_SDPA else "manual"
        model.encoder.set_attention_impl(attention)
        with timer.stage("device_upload") as part:
            model.prepare_for_inference_(device, dtype)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            part.bytes = _tensor_bytes(model)
        model.encoder.set_matmul(str(options["matmul"]))
        apply_experimental(model, options)
        if options["compileDecodeStep"]:
            model.greedy.compile_step()
        if options["compileEncoder"]:
            model.encoder.compile_layers()
        self._model, self._config, self._tokenizer = model, config, tokenizer
        self._runner = ParakeetRunner(
            model,
            device,
            RunnerOptions(
                batch_sizes=tuple(int(b) for b in options["batchSizes"]),
                bucket_durations_ms=tuple(int(b) for b in options["lengthBucketsMs"]),
                use_graphs=bool(options["cudaGraphs"]) and device.type == "cuda",
                chunk_steps=int(options["decodeChunkSteps"]),
                cudnn_benchmark=bool(options["cudnnBenchmark"]),
            ),
        )
        if device.type == "cuda":
            with torch.cuda.stream(self._runner.stream):
                self._probe_buffer = torch.zeros(1, device=device)
            with torch.cuda.stream(self._runner.side_stream):
                self._probe_side_buffer = torch.zeros(1, device=device)
            torch.cuda.synchronize(device)
        # Compilation, cuDNN timing and every graph shape's first runs happen here, while sibling
        # instances may still serve; warmup(), under the exclusive-warmup gate, only captures.
        with timer.stage("warmup"):
            self._runner.prepare()
        return ParakeetLoadInfo(
            stages=timer.take(),
            device=str(device),
            parameters=count_parameters(config),
            memory_bytes=self._memory_bytes(),
            config=str(options["config"]) if weights == "random" else "nemo",
            weights=weights,
            tokenizer="synthetic" if isinstance(tokenizer, SyntheticTokenizer) else "sentencepiece",
            dtype=dtype_name,
            attention=attention,
            matmul=str(options["matmul"]),
            kernels=kernels_in_use(options),
        )

    def warmup(self) -> WarmupInfo:
        runner = self._require_runner()
        timer = StageTimer()
        start = time.perf_counter()
        # Without graphs (CPU, cudaGraphs off) the warmup is one eager run: not a capture.
        with timer.stage("graph_capture" if runner.uses_graphs else "warmup"):
            graphs = runner.warmup()
        self._warmup_ms = elapsed_ms(start)
        return ParakeetWarmupInfo(
            stages=timer.take(),
            graphs_captured=graphs,
            warmup_ms=self._warmup_ms,
            graph_pool_bytes=runner.graph_pool_bytes,
            memory_bytes=self._memory_bytes(),
        )

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        self._runner = None
        self._model = None
        self._probe_buffer = None
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    # ---------------------------------------------------------------- batches
    def run_batch(self, batch: Sequence[BatchInput]) -> List[BatchOutput]:
        """The whole batch in one call (tests, benchmarks)."""
        return self.begin(batch)()

    def stage(self, batch: Sequence[BatchInput]) -> Optional[StagedClips]:
        """On the host's stager thread: the batch's clips copied into a pinned staging buffer, in the
        layout the graphs read (see ``ParakeetRunner.stage``). None when a request would fail
        validation (begin then copies the valid ones itself) or before load."""
        runner = self._runner
        if runner is None:
            return None
        clips: List[npt.NDArray[np.int16]] = []
        for request in batch:
            clip, problem = self._validate(request)
            if clip is None or problem is not None:
                return None
            clips.append(clip)
        return runner.stage(clips)

    def begin(self, batch: Sequence[BatchInput], staged: Optional[StagedBatch] = None) -> BatchFinish:
        """The model's part on this thread; the texts, words and segments in the function returned.

        ``staged``: what :meth:`stage` made of this batch (released here in every case). The
        function returned reads only the decoded tokens, the clips' lengths and the tokenizer and
        config, which do not change after load: the host calls it on its finisher thread, while the
        next batch runs here.
        """
        try:
            runner = self._require_runner()
        except BaseException:
            if staged is not None:
                staged.release()
            raise
        if staged is not None and not isinstance(staged, StagedClips):
            staged.release()
            staged = None
        results: List[Optional[BatchOutput]] = [None] * len(batch)
        clips: List[npt.NDArray[np.int16]] = []
        indices: List[int] = []
        for i, request in enumerate(batch):
            clip, problem = self._validate(request)
            if problem is not None:
                results[i] = ItemFailure(code="invalid_audio", message=problem)
            else:
                clips.append(clip)  # type: ignore[arg-type]
                indices.append(i)
        if staged is not None and len(clips) != len(batch):
            staged.release()  # staged only when every request is valid
            staged = None
        if clips:
            try:
                complete = runner.begin(clips, staged=staged)
            except Exception as exc:  # noqa: BLE001 - only OOM becomes per-request failures
                if not _is_oom(exc):
                    raise
                self._fail_out_of_memory(batch, indices, results)
            else:

                def finish() -> List[BatchOutput]:
                    try:
                        decoded = complete()
                    except Exception as exc:  # noqa: BLE001 - only OOM becomes per-request failures
                        if not _is_oom(exc):
                            raise
                        self._fail_out_of_memory(batch, indices, results)
                    else:
                        for i, clip, item in zip(indices, clips, decoded):
                            results[i] = self._to_output(batch[i], clip, item)
                    return [r for r in results if r is not None]

                return finish
        elif staged is not None:
            staged.release()
        done = [r for r in results if r is not None]
        return lambda: done

    def _fail_out_of_memory(
        self,
        batch: Sequence[BatchInput],
        indices: List[int],
        results: List[Optional[BatchOutput]],
    ) -> None:
        if self._device.type == "cuda":
            torch.cuda.empty_cache()
        for i in indices:
            results[i] = ItemFailure(
                code="out_of_memory",
                message=f"Out of device memory running a batch of {len(indices)} clips",
            )

    def _validate(self, request: BatchInput) -> Tuple[Optional[npt.NDArray[np.int16]], Optional[str]]:
        """The clip as the runner takes it (int16, contiguous), or why the request fails with invalid_audio.

        int16 samples are always finite, so there is nothing to check in the values themselves.
        """
        audio = request.audio
        if not isinstance(audio, np.ndarray) or audio.ndim != 1:
            shape = getattr(audio, "shape", None)
            return None, f"Expected mono audio as a 1-D int16 array: got shape {shape}"
        if audio.dtype != np.int16:
            return None, f"Expected 16-bit PCM samples (int16): got {audio.dtype}"
        if audio.shape[0] == 0:
            return None, "Expected at least one sample: got 0"
        return np.ascontiguousarray(audio), None

    def _to_output(self, request: BatchInput, clip: npt.NDArray[np.int16], item: DecodedItem) -> Transcript:
        tokenizer, config = self._tokenizer, self._config
        assert tokenizer is not None and config is not None
        duration_s = clip.shape[0] / config.sample_rate_hz
        text = tokenizer.decode(item.tokens)
        words = words_from_tokens(tokenizer, item, config.frame_seconds, duration_s)
        return Transcript(
            text=text,
            language=LANGUAGE,
            duration_s=seconds(duration_s),
            segments=tuple(segments_from_words(words, text, duration_s)),
            words=tuple(words) if request.word_timestamps else None,
        )

    # ---------------------------------------------------------------- health
    def stats(self) -> AdapterStats:
        runner = self._runner
        counters = runner.counters if runner is not None else None
        clips = counters.clips if counters else 0
        sample_rate = self._config.sample_rate_hz if self._config else 16000
        audio_seconds = counters.audio_samples / sample_rate if counters else 0.0
        return ParakeetStats(
            memory_bytes=self._memory_bytes(),
            eager_batches=counters.eager_batches if counters else 0,
            graph_replays=counters.graph_replays if counters else 0,
            clips=clips,
            tokens=counters.tokens if counters else 0,
            decode_steps=counters.decode_steps if counters else 0,
            audio_seconds=audio_seconds,
            tokens_per_clip=(counters.tokens / clips) if counters and clips else 0.0,
            decode_steps_per_clip=(counters.decode_steps / clips) if counters and clips else 0.0,
            tokens_per_audio_second=(counters.tokens / audio_seconds) if counters and audio_seconds else 0.0,
            graphs_captured=runner.graphs_captured if runner is not None else 0,
            warmup_ms=self._warmup_ms,
        )

    def probe(self) -> bool:
        """Launch a one-element kernel and wait for it (event query loop), up to probeTimeoutMs.

        When idle the kernel goes on the instance's stream, so it completes only if that stream makes
        progress. While a batch runs it goes on a side stream of the same device instead: a kernel queued
        behind a long batch would time out on a healthy GPU, and the batch itself is watched by the
        supervisor's batch time limit. Never launched while a CUDA graph is being captured. False on
        timeout or on any error.
        """
        timeout_s = int(self._options.get("probeTimeoutMs", DEFAULT_OPTIONS["probeTimeoutMs"])) / 1000.0
        mode = self._options.get("simulateHang", False)
        if mode == "fail":
            return False
        try:
            with self._probe_lock:
                if mode in (True, "hang"):
                    return self._wait(lambda: False, timeout_s)
                runner = self._runner
                if self._device.type != "cuda" or runner is None or self._probe_buffer is None:
                    return bool(torch.ones(1).add_(1).item() == 2.0)
                with runner.launch_lock:
                    if runner.is_capturing:
                        return True  # never launch work while graphs are being captured
                    busy = runner.is_busy
                    stream = runner.side_stream if busy else runner.stream
                    with torch.cuda.stream(stream):
                        target = self._probe_side_buffer if busy else self._probe_buffer
                        target.add_(1.0)  # type: ignore[union-attr]
                        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                        event.record(stream)  # type: ignore[no-untyped-call]
                return self._wait(event.query, timeout_s)
        except Exception:  # noqa: BLE001 - any failure of the probe means the device is not healthy
            return False

    @staticmethod
    def _wait(is_done: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        delay = 0.0002
        while True:
            if is_done():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.01)

    # ---------------------------------------------------------------- helpers
    def _require_runner(self) -> ParakeetRunner:
        if self._runner is None:
            raise InstanceError("model_failed", "The parakeet adapter is not loaded")
        return self._runner

    def _memory_bytes(self) -> int:
        if self._device.type == "cuda":
            return int(torch.cuda.memory_allocated(self._device))
        if self._model is None:
            return 0
        tensors = list(self._model.parameters()) + list(self._model.buffers())
        return int(sum(t.numel() * t.element_size() for t in tensors))


def words_from_tokens(tokenizer: Tokenizer, item: DecodedItem, frame_s: float, duration_s: float) -> List[Word]:
    """Group tokens into words at pieces that start with '\u2581'; times from the token frames.

    A word starts at its first token's frame and ends at its last token's frame plus that token's
    duration (at least one frame), clamped to the clip. The first token always opens a word. This runs
    on the instance's main thread between batches, for every clip: it indexes the tokenizer's word-start
    flags and decodes each word's slice once.
    """
    tokens, frames, durations = item.tokens, item.frames, item.durations
    if not tokens:
        return []
    is_start = tokenizer.word_starts()
    bounds = [k for k in range(1, len(tokens)) if is_start[tokens[k]]]
    bounds.insert(0, 0)
    bounds.append(len(tokens))
    decode = tokenizer.decode
    words: List[Word] = []
    for first, stop in zip(bounds, bounds[1:]):
        text = decode(tokens[first:stop]).strip()
        if text:
            last = stop - 1
            start = min(frames[first] * frame_s, duration_s)
            end = min((frames[last] + max(durations[last], 1)) * frame_s, duration_s)
            words.append(Word(word=text, start=round(start, 3), end=round(max(end, start), 3)))
    return words


def segments_from_words(words: Sequence[Word], text: str, duration_s: float) -> List[Segment]:
    """Sentences (split after words ending in . ? !) with their word span; one segment if none."""
    if not words:
        return [Segment(start=0.0, end=round(duration_s, 3), text=text, decoding=None)] if text else []
    segments: List[Segment] = []
    current: List[Word] = []

    def close_segment() -> None:
        segments.append(Segment(start=current[0].start, end=current[-1].end, text=" ".join(w.word for w in current),
                                    decoding=None))

    for word in words:
        current.append(word)
        if word.word.endswith(SENTENCE_END):
            close_segment()
            current = []
    if current:
        close_segment()
    return segments
