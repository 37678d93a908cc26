"""Batched greedy (and temperature-sampled) decoding of Whisper over 30 s windows, with a static key-value
cache of ``slots`` rows and continuous batching of decode steps.

How requests run (:meth:`WhisperEngine.submit`, then :meth:`WhisperEngine.tick` until the batch is done;
:meth:`WhisperEngine.transcribe` does both): each request becomes a *job* (its log-mel spectrogram,
its options, its seek position); each job's next 30 s *window* waits in a queue. Free cache slots take
waiting windows in groups (one encoder call for the group, its cross-attention keys and values written
into the slots, language detection from one decoder step on ``<|startoftranscript|>`` where the request
gave no language, the prompt prefilled); then every step decodes one token for all occupied slots at
once. The language is detected on the first 30 s of the audio, as OpenAI's ``transcribe()`` does: for a
clip shorter than that, on the spectrogram of the clip followed by silence, which the encoder call of its
first window computes beside the window's own. A window ends at ``<|endoftext|>`` (or at its token budget,
where end-of-text is forced) and frees its slot at once: the next window of its job (seek moved by its
timestamps, or with word timestamps to its last word's end; its finished segments as context), a retry
at a higher temperature (fallback), or another job's window joins while the others keep decoding. A group
joins when a quarter of the slots are free or nothing decodes, so that the encoder runs on several
windows at a time; while slots decode, a join can also wait for ``join_min_windows`` waiting windows
(or as many as there are free slots) unless the oldest has waited ``join_max_wait_s``: every join stalls
all decoding slots for its encoder call, and a lone window's call costs half again as much per window
as one in a group of 16 on one H200. With ``overlap_encoder`` (CUDA), a group that joins while slots
decode is encoded on a CUDA stream of its own and its slots are held until the encoder is done: the
decode steps go on meanwhile instead of waiting for it, and the group enters at the first step after
(:class:`_Encoding`). Where nothing decodes, a group is encoded and enters at once, as without it. The
queue and the slots outlive a batch: requests submitted while others decode join at the next step that
has room (the adapter submits each host batch from a decoding thread of its own).

Each step's tokens reach the host (a copy into pinned memory, then a wait for it) before windows end or
join. Without ``step_ahead`` the GPU idles while the host reads them, ends windows (their text, segments
and fallback checks) and prepares the next step; with it, each round launches the next step first and
then reads the previous one's tokens, so that work overlaps a step on the GPU. The step needs nothing
from the host (each slot's token is fed back on the device), so only the ends move: a window's
end-of-text is seen one step later, its slot decodes one wasted step (whose token is ignored, the window
marked done), and the window that takes the slot joins one step later. Greedy transcripts do not change;
sampled ones (temperature above 0) draw other random numbers, as the wasted steps draw theirs too.

The step (:meth:`WhisperEngine._step`) reads and writes only static tensors (:class:`StepState`, the
cache): the decoder on each slot's last token at its position, Whisper's logit rules (suppressed special
tokens and non-speech symbols, blank suppression at the start, the timestamp rules of OpenAI's
``ApplyTimestampRules``, the forced end-of-text of the budget), then argmax, or Gumbel-max sampling for
slots with a temperature. On CUDA it is captured once per batch size (rows ``0..b-1``) and replayed.
"""
from __future__ import annotations

import contextlib
import math
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Deque, Dict, List, Optional, Sequence, Tuple

import torch

from voxmux_host import attention_kernels

from .config import FRAMES_PER_SECOND, HOP_LENGTH, INPUT_STRIDE, N_FRAMES, N_SAMPLES, SAMPLE_RATE, TIME_PRECISION
from .alignment import WordTiming, find_alignment
from .features import log_mel_spectrogram
from .model import KVCache, WhisperModel
from .tokenizer import WhisperTokenizer
from .word_adjustments import add_word_timestamps, get_end, speech_end

TASKS = ("transcribe", "translate")
#: OpenAI's max_initial_timestamp: the first timestamp is at most 1 s into the window.
MAX_INITIAL_TIMESTAMP_INDEX = 50
#: A join's prefill is padded to the first of these lengths (tokens) that holds its longest prompt (at most
#: n_text_ctx), so that the prefill has a few shapes: a library's work for a new shape (torch's cuDNN
#: attention graph, about 0.1 s on an H100) is paid a few times, or met by warming, not at every new prompt
#: length. A prompt is at most n_text_ctx / 2 tokens of previous text and the start-of-transcript sequence.
PREFILL_LENGTHS = (4, 8, 16, 32, 64, 128, 256)
#: EngineOptions.prefill_attention's choices, each the kernels it holds the calls to (None: torch's choice).
PREFILL_ATTENTION: Dict[str, Optional[Tuple[str, ...]]] = {"auto": None,
                                                           "efficient": ("EFFICIENT_ATTENTION", "MATH")}


@dataclass(frozen=True)
class RequestOptions:
    """What one request asks for."""

    task: str = "transcribe"
    language: Optional[str] = None
    prompt: Optional[str] = None
    temperature: float = 0.0
    timestamps: bool = True
    #: Word start and end times from the cross-attention (alignment.py, word_adjustments.py); the segments'
    #: bounds move to their words', and a window that does not end on a single timestamp is followed from its
    #: last word's end (:meth:`WhisperEngine._finish`).
    word_timestamps: bool = False
    #: The audio is one piece of a longer recording (the gateway's long-audio pieces): without ``language``, a
    #: piece shorter than 30 s is detected on its own window, as with ``detect_on_window``. OpenAI's input for
    #: a short clip, the clip followed by silence, stands for no part of a longer recording (its transcribe()
    #: detects on the recording's first 30 s), and it would cost a second window in the encoder call.
    piece: bool = False


@dataclass(frozen=True)
class EngineOptions:
    slots: int = 16
    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16)
    use_graphs: bool = False
    #: Fallback: retry a window at temperature + increment (up to 1.0) when its compression ratio is above
    #: the threshold or its average log-probability below it; 0 turns fallback off.
    temperature_increment: float = 0.2
    compression_ratio_threshold: Optional[float] = 2.4
    logprob_threshold: Optional[float] = -1.0
    no_speech_threshold: Optional[float] = 0.6
    #: Token budget per second of a window's audio; end-of-text is forced there (None: only the text
    #: context's limit of n_text_ctx / 2 tokens per window).
    max_tokens_per_audio_second: Optional[float] = None
    condition_on_previous_text: bool = True
    seed: int = 0
    #: While slots decode, waiting windows join only this many at a time (fewer where fewer slots are free)...
    join_min_windows: int = 1
    #: ... unless the oldest of them has waited this long (seconds).
    join_max_wait_s: float = 0.0
    #: Encode a joining group beside the decode steps on a stream of its own (CUDA; on the CPU the group
    #: still enters one step later, which the tests use).
    overlap_encoder: bool = False
    #: Launch each decode step before reading the previous step's tokens (see the module docstring).
    step_ahead: bool = False
    #: Run the step's logit rules and choice (:func:`select_tokens`) through ``torch.compile``, one compilation
    #: per batch size at graph capture (CUDA graphs only): about forty small kernels over the vocabulary, a
    #: fifth to a quarter of a step on one H100 (bench/results/whisper-h100-2026-12-06), fuse into a few.
    compile_rules: bool = False
    #: Detect a clip shorter than 30 s on its own decode window (padded with 0.0) instead of OpenAI's input
    #: of the clip followed by silence: no second window in the encoder call, as faster-whisper does; the
    #: detected language may differ from OpenAI's where the two inputs disagree.
    detect_on_window: bool = False
    #: Meet before serving every shape a join gives the eager code (:meth:`WhisperEngine.warm_shapes`, the
    #: prefill at each of :data:`PREFILL_LENGTHS`): work a library or compiler does once per shape (an
    #: attention plan, an autotuning, a compilation) is not paid by the first requests that meet it.
    warm_shapes: bool = False
    #: Cache spans (positions, each below n_text_ctx) the decode step is also captured at: a step whose
    #: windows' positions all fall below one attends over that many positions of the self-attention cache
    #: instead of all n_text_ctx, and reads that much less of it (:meth:`WhisperEngine._step_span`).
    step_spans: Tuple[int, ...] = ()
    #: The attention kernel of a join's eager decoder calls (the language detection's first step and the
    #: prefill): ``"auto"``, torch's choice (cuDNN's on an H100 or H200, which builds a graph for each new
    #: shape: about 0.1-0.15 s); ``"efficient"``, held to the memory-efficient kernel (the math one where
    #: it cannot run), which meets a new shape in 3-17 ms and a known one within 2 ms of cuDNN on one H100
    #: (bench/results/whisper-h100-2026-12-06d). Needs torch >= 2.3.
    prefill_attention: str = "auto"


@dataclass
class DecodedSegment:
    start: float
    end: float
    text: str
    tokens: List[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    #: The start of the segment's window, in frames (10 ms) from the start of the audio (OpenAI's ``seek``).
    seek: int


@dataclass
class Transcription:
    text: str
    language: str
    duration_s: float
    segments: List[DecodedSegment]
    tokens: int  # tokens decoded, timestamps included, retries excluded
    words: List[Tuple[str, float, float]] = field(default_factory=list)  # with word_timestamps


@dataclass
class EngineCounters:
    windows: int = 0
    fallbacks: int = 0
    tokens: int = 0
    decode_steps: int = 0
    graph_replays: int = 0
    eager_steps: int = 0
    encoder_calls: int = 0
    #: The 30 s inputs the encoder ran: decode windows, and the detection inputs of short clips.
    encoder_windows: int = 0


@dataclass
class _Job:
    index: int
    options: RequestOptions
    mel: torch.Tensor  # [n_mels, frames + 3000]
    content_frames: int
    language: Optional[str]
    seek: int = 0
    all_tokens: List[int] = field(default_factory=list)
    prompt_reset_since: int = 0
    segments: List[DecodedSegment] = field(default_factory=list)
    tokens: int = 0
    words: List[Tuple[str, float, float]] = field(default_factory=list)
    #: Where the last window's speech ended (OpenAI's last_speech_timestamp), with word_timestamps.
    last_speech_timestamp: float = 0.0
    finished: bool = False


@dataclass
class DecodeBatch:
    """Requests submitted together (:meth:`WhisperEngine.submit`): done once each of its jobs is."""

    jobs: List[_Job]

    @property
    def done(self) -> bool:
        return all(job.finished for job in self.jobs)


@dataclass
class _Window:
    job: _Job
    seek: int
    segment_size: int
    temperature: float
    features: Optional[torch.Tensor] = None  # encoder output [1500, D], kept for a fallback retry
    queued_at: float = 0.0  # the engine's clock when it began to wait
    #: The encoder's output for language detection where it is not ``features`` (WhisperEngine._detects_apart).
    detection_features: Optional[torch.Tensor] = None


@dataclass
class _Active:
    window: _Window
    budget: int
    tokens: List[int] = field(default_factory=list)
    sum_logprob: float = 0.0
    no_speech_prob: float = 0.0
    done: bool = False  # ended (its slot may already hold another window)
    #: The position of the window's first decode step (its prompt's last token).
    start: int = 0


@dataclass
class _Encoding:
    """A group whose encoder call runs beside the decode steps, and the slots held for it."""

    group: List[_Window]
    slots: List[int]
    #: Whether the encoder's output is ready (a CUDA event's query; always true on the CPU).
    is_done: Callable[[], bool]
    #: Makes the current stream wait for the encoder before it reads the output (nothing on the CPU).
    wait: Callable[[], None]


@dataclass
class _Step:
    """A launched decode step: the slots' windows when it was launched and the host's copies of its tokens
    and log-probabilities, valid once ``ready`` returns."""

    launched: List[Optional[_Active]]
    tokens: torch.Tensor
    logprobs: torch.Tensor
    ready: Callable[[], None]


class StepState:
    """The static tensors a decode step reads and writes, one row per slot."""

    def __init__(self, slots: int, device: torch.device) -> None:
        def longs(value: int) -> torch.Tensor:
            return torch.full((slots,), value, dtype=torch.long, device=device)

        self.tokens = longs(0)
        self.positions = longs(0)
        self.sampled = longs(0)
        self.last = longs(0)
        self.penult = longs(0)
        self.ts_last = longs(-1)
        self.budget = longs(0)
        self.temperature = torch.zeros(slots, device=device)
        self.timestamps = torch.zeros(slots, dtype=torch.bool, device=device)
        self.out_tokens = longs(0)
        self.out_logprobs = torch.zeros(slots, dtype=torch.float64, device=device)


def select_tokens(logits: torch.Tensor, uniform: torch.Tensor, timestamps: torch.Tensor, sampled: torch.Tensor,
                  last: torch.Tensor, penult: torch.Tensor, ts_last: torch.Tensor, budget: torch.Tensor,
                  temperature: torch.Tensor, vocab: torch.Tensor, is_ts: torch.Tensor, is_text: torch.Tensor,
                  suppress: torch.Tensor, blank: torch.Tensor, eot_row: torch.Tensor,
                  timestamp_begin: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The logit rules of a step and its choice: logits [B, V] (float32), uniform noise [B, V] in [0, 1), each
    row's state [B, 1] (timestamps on, tokens sampled, the last two tokens, the last timestamp, the token
    budget, the temperature) and the vocabulary's masks [1, V] -> the next tokens [B] and their
    log-probabilities [B]. OpenAI's rules: suppressed tokens, no blank or end-of-text first; timestamps in
    pairs, never decreasing, the first at most MAX_INITIAL_TIMESTAMP_INDEX; a timestamp forced where their
    total probability beats every text token's; end-of-text at the budget. Greedy at temperature 0, else
    a Gumbel-max sample. Module-free (tensors and an integer) so that ``torch.compile`` can fuse its
    forty-odd passes over the vocabulary into a few kernels (EngineOptions.compile_rules)."""
    ts = timestamps
    begin = sampled == 0
    forbid = suppress | (begin & blank) | (~ts & is_ts)
    last_ts = (sampled >= 1) & (last >= timestamp_begin)
    penult_ts = (sampled < 2) | (penult >= timestamp_begin)
    forbid = forbid | (ts & last_ts & penult_ts & is_ts) | (ts & last_ts & ~penult_ts & is_text)
    lower = torch.where(last_ts & ~penult_ts, ts_last, ts_last + 1)
    forbid = forbid | (ts & is_ts & (vocab < lower))
    forbid = forbid | (ts & begin & (~is_ts | (vocab > timestamp_begin + MAX_INITIAL_TIMESTAMP_INDEX)))
    masked = logits.masked_fill(forbid, float("-inf"))
    logprobs = torch.log_softmax(masked, dim=-1)
    ts_logprob = torch.logsumexp(logprobs.masked_fill(~is_ts, float("-inf")), dim=-1, keepdim=True)
    text_logprob = logprobs.masked_fill(is_ts, float("-inf")).max(dim=-1, keepdim=True).values
    masked = masked.masked_fill(ts & (ts_logprob > text_logprob) & ~is_ts, float("-inf"))
    masked = torch.where(sampled >= budget, eot_row, masked)
    logprobs = torch.log_softmax(masked, dim=-1)
    gumbel = -torch.log(-torch.log(uniform.clamp(1e-10, 1.0 - 1e-7)))
    sampled_tokens = (masked / temperature.clamp(min=1e-6) + gumbel).argmax(dim=-1)
    next_tokens = torch.where(temperature[:, 0] > 0, sampled_tokens, masked.argmax(dim=-1))
    return next_tokens, logprobs.gather(1, next_tokens[:, None])[:, 0]


def compression_ratio(text: str) -> float:
    raw = text.encode("utf-8")
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


class WhisperEngine:
    """The decoding machinery of one model on one device (see the module docstring)."""

    def __init__(self, model: WhisperModel, tokenizer: WhisperTokenizer, device: torch.device, dtype: torch.dtype,
                 options: EngineOptions, clock: Callable[[], float] = time.monotonic) -> None:
        config = model.config
        if tokenizer.n_vocab != config.n_vocab:
            raise ValueError(f"Expected a tokenizer of {config.n_vocab} tokens: got {tokenizer.n_vocab}")
        self.model, self.tokenizer, self.device, self.dtype, self.options = model, tokenizer, device, dtype, options
        self.clock = clock  # seconds, for join_max_wait_s
        self.config = config
        self.counters = EngineCounters()
        self.cache = KVCache.allocate(config, options.slots, device, dtype)
        self.state = StepState(options.slots, device)
        self.batch_sizes = tuple(sorted(b for b in set(options.batch_sizes) if b <= options.slots))
        n_ctx = config.n_text_ctx
        if any(not 0 < span < n_ctx for span in options.step_spans):
            raise ValueError(f"Expected step_spans below n_text_ctx {n_ctx}: got {options.step_spans}")
        #: The cache spans a step may attend over, the whole cache last.
        self.spans = tuple(sorted({*options.step_spans, n_ctx}))
        #: The lengths a join's prefill is padded to (:data:`PREFILL_LENGTHS` within n_ctx).
        self.prefill_lengths = tuple(sorted({min(n, n_ctx) for n in PREFILL_LENGTHS}))
        if options.prefill_attention not in PREFILL_ATTENTION:
            raise ValueError(f"Expected prefill_attention to be one of {sorted(PREFILL_ATTENTION)}: "
                             f"got {options.prefill_attention!r}")
        #: The kernels a join's eager decoder calls are held to (None: torch's choice).
        self.prefill_kernels = PREFILL_ATTENTION[options.prefill_attention]
        #: A CUDA graph of the step per batch size and span.
        self.graphs: Dict[Tuple[int, int], torch.cuda.CUDAGraph] = {}
        self.graph_pool: Optional[Tuple[int, int]] = None
        self.generator = torch.Generator(device=device).manual_seed(options.seed) if device.type == "cpu" else None
        vocab = torch.arange(config.n_vocab, device=device)
        t = tokenizer
        self.vocab = vocab
        self.is_timestamp = vocab >= t.timestamp_begin
        self.is_text = vocab < t.eot
        # Special tokens (sot, languages, tasks, sot_prev...) and OpenAI's non-speech symbols (its default
        # suppress_tokens "-1"): speaker tags, music notes, bracketed annotations.
        suppress = (vocab > t.eot) & (vocab < t.timestamp_begin)
        suppress[t.non_speech_tokens()] = True
        self.suppress = suppress
        blank = torch.zeros(config.n_vocab, dtype=torch.bool, device=device)
        blank[[*t.space_tokens(), t.eot]] = True
        self.blank = blank
        self.eot_row = torch.full((config.n_vocab,), float("-inf"), device=device)
        self.eot_row[t.eot] = 0.0
        self.language_tokens = torch.tensor([t.language_ids[c] for c in t.languages], device=device)
        self._select_tokens: Callable[..., Tuple[torch.Tensor, torch.Tensor]] = select_tokens
        if options.compile_rules:
            if not options.use_graphs or device.type != "cuda":
                raise ValueError("Expected compile_rules with use_graphs on a CUDA device: the compiled rules are "
                                 "compiled once per batch size, at graph capture")
            compile_fn = getattr(torch, "compile", None)
            if compile_fn is None:
                raise ValueError(f"Expected torch >= 2.0 for compile_rules: got torch {torch.__version__}")
            self._select_tokens = compile_fn(select_tokens, dynamic=False)
        # Windows waiting for a slot, and the slots' windows: shared by every submitted batch.
        self._waiting: Deque[_Window] = deque()
        self._slots: List[Optional[_Active]] = [None] * options.slots
        # Groups being encoded beside the decode steps (overlap_encoder), their slots held.
        self._encoding: List[_Encoding] = []
        self._encode_stream = (torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
                               if options.overlap_encoder and device.type == "cuda" else None)
        # The host's copies of a step's tokens and log-probabilities (pinned on CUDA, so that the copy
        # runs without blocking, with the event that marks it done): two sets, used in turn, as a step may
        # be launched before the last is read.
        cuda = device.type == "cuda"
        self._host_out = [(torch.zeros(options.slots, dtype=torch.long, pin_memory=cuda),
                           torch.zeros(options.slots, dtype=torch.float64, pin_memory=cuda)) for _ in range(2)]
        self._host_copied = [torch.cuda.Event() for _ in range(2)] if cuda else []  # type: ignore[no-untyped-call]
        self._host_turn = 0
        # step_ahead: the launched step whose tokens are not read yet.
        self._pending: Optional[_Step] = None

    # ------------------------------------------------------------------ the step (graph-capturable)
    @torch.no_grad()
    def _step(self, b: int, span: Optional[int] = None) -> None:
        """One decode step of slots 0..b-1, attending over the cache's first ``span`` positions (None: all)."""
        st, t = self.state, self.tokenizer
        hidden = self.model.decoder.forward_cached(self.cache, st.tokens[:b, None], st.positions[:b, None],
                                                   span=span)
        logits = self.model.decoder.logits(hidden[:, -1])
        next_tokens, logprobs = self._select(logits, b)
        st.out_tokens[:b].copy_(next_tokens)
        st.out_logprobs[:b].copy_(logprobs.to(torch.float64))
        st.penult[:b].copy_(st.last[:b])
        st.last[:b].copy_(next_tokens)
        st.sampled[:b].add_(1)
        st.ts_last[:b].copy_(torch.where(next_tokens >= t.timestamp_begin, next_tokens, st.ts_last[:b]))
        st.tokens[:b].copy_(next_tokens)
        st.positions[:b].copy_(torch.clamp(st.positions[:b] + 1, max=self.config.n_text_ctx - 1))

    def _select(self, logits: torch.Tensor, b: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each of the first b slots' next token and its log-probability (:func:`select_tokens`, compiled with
        ``compile_rules``); the sampling noise is drawn here, outside any compiled code."""
        st = self.state
        uniform = torch.rand(logits.shape, device=logits.device, generator=self.generator)
        return self._select_tokens(  # type: ignore[no-any-return]
            logits, uniform, st.timestamps[:b, None], st.sampled[:b, None], st.last[:b, None], st.penult[:b, None],
            st.ts_last[:b, None], st.budget[:b, None], st.temperature[:b, None], self.vocab[None, :],
            self.is_timestamp[None, :], self.is_text[None, :], self.suppress[None, :], self.blank[None, :],
            self.eot_row[None, :], self.tokenizer.timestamp_begin)

    # ------------------------------------------------------------------ graphs
    def capture_graphs(self) -> int:
        """One CUDA graph of the step per batch size and span (CUDA only); returns how many were captured."""
        if self.device.type != "cuda" or not self.options.use_graphs:
            return 0
        pool = torch.cuda.graph_pool_handle()  # type: ignore[no-untyped-call]
        side = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(self.device))  # type: ignore[no-untyped-call]
        shapes = [(b, span) for b in self.batch_sizes for span in self.spans]
        with torch.cuda.stream(side):
            for b, span in shapes:
                for _ in range(2):
                    self._step(b, span)
        torch.cuda.current_stream(self.device).wait_stream(side)  # type: ignore[no-untyped-call]
        for b, span in shapes:
            graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
            with torch.cuda.graph(graph, pool=pool):  # type: ignore[no-untyped-call]
                self._step(b, span)
            self.graphs[(b, span)] = graph
        torch.cuda.synchronize(self.device)
        self._reset_state()
        return len(self.graphs)

    def _reset_state(self) -> None:
        st = self.state
        for tensor in (st.tokens, st.positions, st.sampled, st.last, st.penult, st.budget):
            tensor.zero_()
        st.ts_last.fill_(-1)
        st.temperature.zero_()
        st.timestamps.zero_()

    def _run_step(self, rows: int) -> None:
        b = next((size for size in self.batch_sizes if size >= rows), rows)
        span = self._step_span(rows)
        graph = self.graphs.get((b, span))
        if graph is not None:
            graph.replay()  # type: ignore[no-untyped-call]
            self.counters.graph_replays += 1
        else:
            self._step(rows, span)
            self.counters.eager_steps += 1
        self.counters.decode_steps += 1

    def _step_span(self, rows: int) -> int:
        """The shortest of :attr:`spans` that holds the next step's position of every window decoding in the
        first ``rows`` slots. A window's next position is its start plus the steps launched since it was
        admitted: at most one more than the tokens read (step_ahead launches one before reading)."""
        if len(self.spans) == 1:
            return self.spans[0]
        needed = max((a.start + len(a.tokens) + 2 for a in self._slots[:rows] if a is not None and not a.done),
                     default=1)
        return next((span for span in self.spans if span >= needed), self.spans[-1])

    # ------------------------------------------------------------------ batches
    @torch.no_grad()
    def transcribe(self, audios: Sequence[torch.Tensor], requests: Sequence[RequestOptions]) -> List[Transcription]:
        """Float audio (16 kHz mono, [-1, 1]) and each one's options -> one transcription each, in order
        (with any batch submitted before it decoding alongside)."""
        batch = self.submit(audios, requests)
        while not batch.done:
            self.tick()
        return self.results(batch)

    @torch.no_grad()
    def submit(self, audios: Sequence[torch.Tensor], requests: Sequence[RequestOptions]) -> DecodeBatch:
        """Queues each request's first window behind those already waiting; :meth:`tick` decodes."""
        jobs: List[_Job] = []
        for index, (audio, request) in enumerate(zip(audios, requests)):
            mel = log_mel_spectrogram(audio.to(self.device), self.config.n_mels)
            language = request.language
            if not self.model.is_multilingual and language is None:
                language = "en"
            job = _Job(index, request, mel, mel.shape[-1] - N_FRAMES, language)
            if request.prompt:
                job.all_tokens.extend(self.tokenizer.encode(" " + request.prompt.strip()))
            jobs.append(job)
            if job.content_frames > 0:
                self._waiting.append(self._window(job, 0.0 if request.temperature <= 0 else request.temperature))
            else:
                job.finished = True
        return DecodeBatch(jobs)

    @property
    def is_idle(self) -> bool:
        """Nothing waits, is being encoded or decodes."""
        return not self._waiting and not self._encoding and all(a is None for a in self._slots)

    @torch.no_grad()
    def tick(self) -> None:
        """One round: encoded groups enter their slots, waiting windows join free slots (a quarter of them
        free, or none decoding), then one decode step for every occupied slot; windows that end free their
        slots. With ``step_ahead`` the step goes first and the tokens read are the previous step's."""
        if self.is_idle and self._pending is None:
            return
        if not self.options.step_ahead:
            self._join()
            step = self._launch_step()
            if step is not None:
                self._read_step(step)
            return
        step = self._launch_step()
        pending, self._pending = self._pending, step
        if pending is not None:
            self._read_step(pending)
        self._join()

    def _join(self) -> None:
        """Encoded groups enter their slots; waiting windows join free slots when :meth:`_may_join` says so."""
        waiting, slots = self._waiting, self._slots
        active = sum(a is not None for a in slots)
        for encoding in list(self._encoding):
            if active == 0 or encoding.is_done():  # with nothing decoding, there is nothing to overlap
                self._encoding.remove(encoding)
                encoding.wait()
                self._admit(encoding.group, encoding.slots, slots)
        held = {i for encoding in self._encoding for i in encoding.slots}
        free = [i for i, a in enumerate(slots) if a is None and i not in held]
        active = sum(a is not None for a in slots)
        if waiting and free and self._may_join(len(free), active + len(held)):
            group = [waiting.popleft() for _ in range(min(len(free), len(waiting)))]
            if active > 0 and self.options.overlap_encoder:
                self._encoding.append(self._encode_beside(group, free[:len(group)]))
            else:
                self._encode(group)
                self._admit(group, free[:len(group)], slots)

    def _launch_step(self) -> Optional[_Step]:
        """One decode step for the occupied slots (None where none is), its outputs copied for the host."""
        slots = self._slots
        if all(a is None for a in slots):
            return None
        rows = max(i for i, a in enumerate(slots) if a is not None) + 1
        self._run_step(rows)
        turn, st = self._host_turn, self.state
        self._host_turn ^= 1
        tokens, logprobs = self._host_out[turn]
        cuda = bool(self._host_copied)
        tokens[:rows].copy_(st.out_tokens[:rows], non_blocking=cuda)
        logprobs[:rows].copy_(st.out_logprobs[:rows], non_blocking=cuda)
        ready: Callable[[], None] = lambda: None
        if cuda:
            copied = self._host_copied[turn]
            copied.record()  # type: ignore[no-untyped-call]
            ready = copied.synchronize
        return _Step(slots[:rows], tokens[:rows], logprobs[:rows], ready)

    def _read_step(self, step: _Step) -> None:
        """The step's token for each window it decoded that had not ended: end-of-text ends the window
        and frees its slot; any other token is appended."""
        step.ready()
        tokens, logprobs = step.tokens.tolist(), step.logprobs.tolist()
        for i, current in enumerate(step.launched):
            if current is None or current.done:
                continue
            token = int(tokens[i])
            current.sum_logprob += float(logprobs[i])
            if token == self.tokenizer.eot:
                current.done = True
                self._slots[i] = None
                self._finish(current, self._waiting)
            else:
                current.tokens.append(token)

    def _may_join(self, free: int, active: int) -> bool:
        """Whether the waiting windows join the ``free`` slots now (see the module docstring)."""
        if active == 0:
            return True
        options, waiting = self.options, self._waiting
        if free < max(1, math.ceil(options.slots / 4)):
            return False
        if len(waiting) >= min(options.join_min_windows, free):
            return True
        # The oldest is not always first: a request's next window and a fallback retry go to the front. Fewer
        # than join_min_windows wait here, so the scan is short.
        oldest = min(w.queued_at for w in waiting)
        return self.clock() - oldest >= options.join_max_wait_s

    def results(self, batch: DecodeBatch) -> List[Transcription]:
        """A done batch's transcriptions, in the order submitted."""
        return [self._result(job) for job in batch.jobs]

    def abort(self) -> None:
        """Drops every waiting, encoding and decoding window (after a failed step: the batches they belong to
        fail)."""
        self._waiting.clear()
        self._encoding.clear()
        self._slots = [None] * self.options.slots
        self._pending = None

    def _window(self, job: _Job, temperature: float) -> _Window:
        return _Window(job, job.seek, min(N_FRAMES, job.content_frames - job.seek), temperature, queued_at=self.clock())

    def _mels(self, windows: List[_Window]) -> torch.Tensor:
        """The windows' log-mel spectrograms, each padded to 30 s, as one encoder input."""
        mels = []
        for w in windows:
            mel = w.job.mel[:, w.seek:w.seek + w.segment_size]
            mels.append(torch.nn.functional.pad(mel, (0, N_FRAMES - mel.shape[-1])))
        return torch.stack(mels).to(self.dtype)

    def _detects_apart(self, window: _Window) -> bool:
        """Whether the window's language is detected on an input of its own. OpenAI detects on the first 30 s
        of the spectrogram of the audio followed by 30 s of zeros, whose frames past a short clip's end are
        the log-mel of that silence; the clip's window is padded with 0.0 there (``detect_on_window``: it is
        detected on the window itself, as is a piece of a longer recording: RequestOptions.piece)."""
        return (window.job.language is None and window.segment_size < N_FRAMES and not self.options.detect_on_window
                and not window.job.options.piece)

    def _encoder_input(self, windows: List[_Window]) -> Tuple[torch.Tensor, List[_Window]]:
        """The windows' spectrograms (:meth:`_mels`), then the detection inputs of those that need their own
        (one encoder call for both), and the latter windows."""
        mels = self._mels(windows)
        detecting = [w for w in windows if self._detects_apart(w)]
        if detecting:
            mels = torch.cat([mels, torch.stack([w.job.mel[:, :N_FRAMES] for w in detecting]).to(self.dtype)])
        return mels, detecting

    @staticmethod
    def _keep_features(windows: List[_Window], detecting: List[_Window], features: torch.Tensor) -> None:
        for w, f in zip(windows, features):
            w.features = f
        for w, f in zip(detecting, features[len(windows):]):
            w.detection_features = f

    def _run_encoder(self, mels: torch.Tensor) -> torch.Tensor:
        self.counters.encoder_calls += 1
        self.counters.encoder_windows += int(mels.shape[0])
        features: torch.Tensor = self.model.encoder(mels)
        return features

    def _encode(self, group: List[_Window]) -> None:
        """The encoder's output for each window of the group that has none yet (a fallback keeps its own)."""
        to_encode = [w for w in group if w.features is None]
        if to_encode:
            mels, detecting = self._encoder_input(to_encode)
            features = self._run_encoder(mels)
            self._keep_features(to_encode, detecting, features)

    def _encode_beside(self, group: List[_Window], slots: List[int]) -> _Encoding:
        """Starts the group's encoder call on the encoding stream (CUDA) and holds its slots."""
        side = self._encode_stream
        if side is None:
            self._encode(group)
            return _Encoding(group, slots, is_done=lambda: True, wait=lambda: None)
        main = torch.cuda.current_stream(self.device)
        to_encode = [w for w in group if w.features is None]
        mels, detecting = self._encoder_input(to_encode) if to_encode else (None, [])
        side.wait_stream(main)  # type: ignore[no-untyped-call]
        done = torch.cuda.Event()  # type: ignore[no-untyped-call]
        with torch.cuda.stream(side):
            if mels is not None:
                features = self._run_encoder(mels)
                # Made on one stream, used on the other: the allocator must not reuse either too soon.
                mels.record_stream(side)  # type: ignore[arg-type]
                features.record_stream(main)  # type: ignore[arg-type]
                self._keep_features(to_encode, detecting, features)
            done.record(side)  # type: ignore[no-untyped-call]

        def wait() -> None:
            main.wait_event(done)  # type: ignore[no-untyped-call]

        return _Encoding(group, slots, is_done=done.query, wait=wait)

    def _admit(self, group: List[_Window], free: List[int], slots: List[Optional[_Active]]) -> None:
        """The encoded group enters its slots: cross-attention keys and values, language, prompt."""
        config, t = self.config, self.tokenizer
        slot_index = torch.tensor(free, device=self.device)
        # A window detected on an input of its own has its slot filled from that input first, then again.
        apart = [k for k, w in enumerate(group) if w.detection_features is not None]
        cross = [w.features if w.detection_features is None else w.detection_features for w in group]
        self.model.decoder.fill_cross(self.cache, slot_index, torch.stack(cross))  # type: ignore[arg-type]
        detect = [k for k, w in enumerate(group) if w.job.language is None]
        if detect:
            rows = slot_index[detect]
            sot = torch.full((len(detect), 1), t.sot, device=self.device)
            with self._join_attention():
                hidden = self.model.decoder.forward_cached(self.cache, sot, torch.zeros_like(sot), rows)
            logits = self.model.decoder.logits(hidden[:, 0])[:, self.language_tokens]
            for k, choice in zip(detect, logits.argmax(dim=-1).tolist()):
                group[k].job.language = t.languages[int(choice)]
        if apart:
            features = torch.stack([group[k].features for k in apart])  # type: ignore[misc]
            self.model.decoder.fill_cross(self.cache, slot_index[apart], features)
            for k in apart:
                group[k].detection_features = None
        prompts = [self._prompt(w) for w in group]
        no_speech = self._prefill(prompts, slot_index)
        st = self.state
        budgets = []
        for k, (w, prompt) in enumerate(zip(group, prompts)):
            # OpenAI samples n_text_ctx / 2 tokens, or until the sequence is longer than n_text_ctx: the last
            # token sampled comes from position n_text_ctx - 1 and is never fed back.
            budget = min(config.n_text_ctx // 2, config.n_text_ctx + 1 - len(prompt))
            per_second = self.options.max_tokens_per_audio_second
            if per_second is not None:
                budget = min(budget, math.ceil(per_second * w.segment_size * HOP_LENGTH / SAMPLE_RATE))
            budgets.append(budget)
            slots[free[k]] = _Active(w, budget, start=len(prompt) - 1, no_speech_prob=no_speech[k])
        values = {
            "tokens": [p[-1] for p in prompts], "positions": [len(p) - 1 for p in prompts],
            "sampled": [0] * len(group), "last": [0] * len(group), "penult": [0] * len(group),
            "ts_last": [-1] * len(group), "budget": budgets,
        }
        for name, column in values.items():
            getattr(st, name)[slot_index] = torch.tensor(column, device=self.device)
        st.temperature[slot_index] = torch.tensor([w.temperature for w in group], device=self.device)
        st.timestamps[slot_index] = torch.tensor([w.job.options.timestamps for w in group], device=self.device)
        self.counters.windows += len(group)

    def _prefill(self, prompts: List[List[int]], slot_index: torch.Tensor) -> List[float]:
        """Every prompt but its last token (the first step feeds that one) in one decoder call, the shorter
        ones padded at the end: a padded position's keys and values are overwritten by the step that reaches
        that position before any query attends to it. Returns each prompt's no-speech probability (at its
        ``<|startoftranscript|>``): a prompt that ends there (an English-only model's) is prefilled whole, and
        the first step writes the same keys and values at its last position again."""
        t = self.tokenizer
        sot_at = [p.index(t.sot) for p in prompts]
        lengths = [max(len(p) - 1, at + 1) for p, at in zip(prompts, sot_at)]
        longest = self._prefill_length(max(lengths))
        tokens = torch.tensor([p[:n] + [t.eot] * (longest - n) for p, n in zip(prompts, lengths)], device=self.device)
        positions = torch.arange(longest, device=self.device).expand(len(prompts), -1)
        with self._join_attention():
            hidden = self.model.decoder.forward_cached(self.cache, tokens, positions, slot_index)
        rows = torch.arange(len(prompts), device=self.device)
        at_sot = hidden[rows, torch.tensor(sot_at, device=self.device)]
        probs = torch.softmax(self.model.decoder.logits(at_sot), dim=-1)[:, t.no_speech]
        return [float(p) for p in probs.tolist()]

    def _join_attention(self) -> ContextManager[None]:
        """The context of a join's eager decoder calls: attention held to :attr:`prefill_kernels`."""
        if self.prefill_kernels is None:
            return contextlib.nullcontext()
        return attention_kernels.held_to(self.prefill_kernels)

    def _prefill_length(self, longest: int) -> int:
        """The prefill's length for prompts of at most ``longest`` tokens: the first of
        :data:`PREFILL_LENGTHS` that holds it (a padded position is written over before any query attends to
        it, as with the shorter prompts' padding)."""
        return next((n for n in self.prefill_lengths if n >= longest), longest)

    def warm_shapes(self) -> int:
        """Meets, before serving, each shape that a join of 1 to ``slots`` windows gives the eager code: the
        encoder call on that many windows (a group whose short clips are detected on inputs of their own adds
        up to as many more: those are not met), their cross-attention keys and values, the language
        detection's first step and the prefill at each of the lengths it is padded to. Returns how many
        encoder and decoder calls it made. To be called on the thread that serves (service.py)."""
        return self._warm(range(1, self.options.slots + 1), self.prefill_lengths)

    def warm_first_calls(self) -> int:
        """One join of one window's calls (:meth:`warm_shapes` for a single shape): the first calls a thread
        makes create the libraries' handles for it, which the first request would otherwise wait for."""
        return self._warm((1,), self.prefill_lengths[:1])

    @torch.no_grad()
    def _warm(self, sizes: Sequence[int], lengths: Sequence[int]) -> int:
        """The front end on 30 s of audio, then the calls a join of each of ``sizes`` windows makes, its
        prefill at each of ``lengths`` (the first size's encoder call on overlapEncoder's stream too); returns
        how many encoder and decoder calls it made on the main stream. The cache's slots are left holding its
        zeros' keys and values (a slot is filled when a window is admitted); the engine's counts are not
        touched. Not while windows decode."""
        t, calls = self.tokenizer, 0
        # The front end's first call loads the FFT library and builds the mel filters.
        log_mel_spectrogram(torch.zeros(N_SAMPLES, device=self.device), self.config.n_mels)
        for k, n in enumerate(sizes):
            if k == 0 and self._encode_stream is not None:
                # overlapEncoder's stream: the libraries' workspaces are kept per stream.
                with torch.cuda.stream(self._encode_stream):
                    self.model.encoder(torch.zeros(n, self.config.n_mels, N_FRAMES, device=self.device,
                                                   dtype=self.dtype))
                self._encode_stream.synchronize()  # type: ignore[no-untyped-call]
            rows = torch.arange(n, device=self.device)
            features = self.model.encoder(torch.zeros(n, self.config.n_mels, N_FRAMES, device=self.device,
                                                      dtype=self.dtype))
            self.model.decoder.fill_cross(self.cache, rows, features)
            sot = torch.full((n, 1), t.sot, device=self.device)
            with self._join_attention():
                hidden = self.model.decoder.forward_cached(self.cache, sot, torch.zeros_like(sot), rows)
                self.model.decoder.logits(hidden[:, 0])
                calls += 2
                for length in lengths:
                    tokens = torch.full((n, length), t.eot, device=self.device)
                    positions = torch.arange(length, device=self.device).expand(n, -1)
                    hidden = self.model.decoder.forward_cached(self.cache, tokens, positions, rows)
                    self.model.decoder.logits(hidden[:, 0])
                    calls += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return calls

    def _sot_sequence(self, job: _Job) -> List[int]:
        """``<|startoftranscript|>``, then the language and the task for a multilingual model: an English-only
        model was trained on ``<|startoftranscript|>`` alone (OpenAI's tokenizer for it has neither)."""
        if not self.model.is_multilingual:
            return [self.tokenizer.sot]
        return self.tokenizer.sot_sequence(job.language, job.options.task)

    def _prompt(self, window: _Window) -> List[int]:
        job, t = window.job, self.tokenizer
        prompt: List[int] = []
        context = job.all_tokens[job.prompt_reset_since:]
        if context:
            prompt = [t.sot_prev, *context[-(self.config.n_text_ctx // 2 - 1):]]
        prompt += self._sot_sequence(job)
        if not job.options.timestamps:
            prompt.append(t.no_timestamps)
        return prompt

    def _finish(self, active: _Active, waiting: Deque[_Window]) -> None:
        window, options, t = active.window, self.options, self.tokenizer
        job, tokens = window.job, active.tokens
        ratio = compression_ratio(t.decode(tokens).strip())
        avg_logprob = active.sum_logprob / (len(tokens) + 1)
        no_speech = options.no_speech_threshold is not None and active.no_speech_prob > options.no_speech_threshold
        below_logprob = options.logprob_threshold is not None and avg_logprob < options.logprob_threshold
        needs_fallback = below_logprob or (options.compression_ratio_threshold is not None
                                           and ratio > options.compression_ratio_threshold)
        if no_speech and below_logprob:
            needs_fallback = False  # silence: no hotter retry
        # A window is skipped on its no-speech probability alone unless logprob_threshold is set and its
        # average log-probability is above it (OpenAI's transcribe()).
        skipped = no_speech and not (options.logprob_threshold is not None
                                     and avg_logprob > options.logprob_threshold)
        next_temperature = round(window.temperature + options.temperature_increment, 6)
        if needs_fallback and options.temperature_increment > 0 and next_temperature <= 1.0:
            self.counters.fallbacks += 1
            waiting.appendleft(_Window(job, window.seek, window.segment_size, next_temperature, window.features,
                                       self.clock()))
            return
        features, window.features = window.features, None
        job.tokens += len(tokens)
        self.counters.tokens += len(tokens)
        if skipped:
            job.seek += window.segment_size
        else:
            forced = len(tokens) >= active.budget
            segments, advance, single_ending = self._segments(tokens, window, forced)
            for segment in segments:
                segment.temperature, segment.avg_logprob = window.temperature, avg_logprob
                segment.compression_ratio, segment.no_speech_prob = ratio, active.no_speech_prob
            job.seek += advance
            words: List[List[WordTiming]] = [[] for _ in segments]
            if job.options.word_timestamps and features is not None:
                words = self._add_words(job, window, segments, features)
                if not single_ending:
                    # OpenAI's transcribe() with word_timestamps (openai/whisper 20250625, transcribe.py:413-416,
                    # before its hallucination_silence_threshold branch, not ported): a window that did not end
                    # on a single timestamp is read up to its last word's end (get_end, else its last segment's
                    # end), where that is past the window's start (time_offset): seek = round(last_word_end *
                    # FRAMES_PER_SECOND). So is a window ended by its budget without a single timestamp at its
                    # end, whose rest this engine keeps as a segment (its words then included).
                    last_word_end = get_end(segments, words)
                    if last_word_end is not None and last_word_end > window.seek * HOP_LENGTH / SAMPLE_RATE:
                        job.seek = round(last_word_end * FRAMES_PER_SECOND)
            self._clear_empty(segments, words)
            # Only the segments' tokens become context: where seek goes back to the last timestamp pair (or
            # the last word's end), the tokens after it are decoded again by the next window; a cleared
            # segment has none.
            job.all_tokens.extend(tok for segment in segments for tok in segment.tokens)
            job.segments.extend(segment for segment in segments if segment.text)
            job.words.extend((w.text.strip(), round(w.start, 3), round(w.end, 3))
                             for segment_words in words for w in segment_words if w.text.strip())
            if not options.condition_on_previous_text or window.temperature > 0.5:
                job.prompt_reset_since = len(job.all_tokens)
        if job.seek < job.content_frames:
            waiting.appendleft(self._window(job, max(job.options.temperature, 0.0)))
        else:
            job.finished = True

    def _add_words(self, job: _Job, window: _Window, segments: List[DecodedSegment],
                   features: torch.Tensor) -> List[List[WordTiming]]:
        """The words of each of the window's segments (OpenAI's transcribe() with word_timestamps:
        find_alignment of all their text tokens, blank segments' included, then add_word_timestamps, which
        also moves the segments' bounds); the job's last speech moves to the window's (get_end), before any
        segment is cleared, as transcribe() moves last_speech_timestamp."""
        t = self.tokenizer
        text_tokens = [tok for s in segments for tok in s.tokens if tok < t.eot]
        alignment = find_alignment(self.model, t, self._sot_sequence(job), text_tokens, features,
                                   window.segment_size, job.language)
        offset = window.seek * HOP_LENGTH / SAMPLE_RATE
        words = add_word_timestamps(segments, alignment, offset, job.last_speech_timestamp, t.eot)
        job.last_speech_timestamp = speech_end(segments, words, job.last_speech_timestamp)
        return words

    @staticmethod
    def _clear_empty(segments: List[DecodedSegment], words: List[List[WordTiming]]) -> None:
        """OpenAI's transcribe() (openai/whisper 20250625, transcribe.py:484-489, after the word timestamps
        and the seek above, with or without word_timestamps): "if a segment is instantaneous or does not
        contain text, clear it", in place. A segment whose start equals its end (after the word adjustments,
        which can make it so) or whose text is blank loses its text, tokens and words (``words[i]``, the
        words of ``segments[i]``): its tokens join no later prompt (all_tokens takes the segments' tokens,
        transcribe.py:499-501) and its text no result's text. transcribe() keeps such a segment in its
        segments with empty text; :meth:`_finish` leaves it out of the request's segments."""
        for index, segment in enumerate(segments):
            if segment.start == segment.end or segment.text.strip() == "":
                segment.text, segment.tokens = "", []
                words[index] = []

    def _segments(self, tokens: List[int], window: _Window,
                  forced: bool) -> Tuple[List[DecodedSegment], int, bool]:
        """OpenAI's segmentation of a window's tokens at consecutive timestamps (blank segments too:
        :meth:`_clear_empty` clears them after the word timestamps), how far seek moves (a window ended by
        its budget counts as read to its end) and whether the window ended on a single timestamp
        (transcribe()'s single_timestamp_ending)."""
        t = self.tokenizer
        offset = window.seek * HOP_LENGTH / SAMPLE_RATE
        size = window.segment_size
        is_ts = [tok >= t.timestamp_begin for tok in tokens]
        single_ending = len(is_ts) >= 2 and is_ts[-2:] == [False, True]
        consecutive = [i + 1 for i in range(len(is_ts) - 1) if is_ts[i] and is_ts[i + 1]]
        segments: List[DecodedSegment] = []

        def make(start: float, end: float, piece: List[int]) -> DecodedSegment:
            return DecodedSegment(round(start, 3), round(end, 3), t.decode(piece), piece, 0.0, 0.0, 0.0, 0.0, window.seek)

        if consecutive:
            slices = consecutive + ([len(tokens)] if single_ending else [])
            last_slice = 0
            for current in slices:
                piece = tokens[last_slice:current]
                start = (piece[0] - t.timestamp_begin) * TIME_PRECISION if is_ts[last_slice] else 0.0
                end = (piece[-1] - t.timestamp_begin) * TIME_PRECISION if piece[-1] >= t.timestamp_begin else start
                segments.append(make(offset + start, offset + end, piece))
                last_slice = current
            rest = tokens[last_slice:]
            if forced and rest and t.decode(rest).strip():
                start = segments[-1].end
                segments.append(make(start, offset + size * HOP_LENGTH / SAMPLE_RATE, rest))
            if single_ending or forced:
                advance = size
            else:
                advance = (tokens[last_slice - 1] - t.timestamp_begin) * INPUT_STRIDE
        else:
            duration = size * HOP_LENGTH / SAMPLE_RATE
            stamps = [tok for tok in tokens if tok >= t.timestamp_begin]
            if stamps and stamps[-1] != t.timestamp_begin and not forced:
                duration = (stamps[-1] - t.timestamp_begin) * TIME_PRECISION
            if tokens:
                segments.append(make(offset, offset + duration, tokens))
            advance = size
        return segments, advance if advance > 0 else size, single_ending

    def _result(self, job: _Job) -> Transcription:
        text = "".join(s.text for s in job.segments).strip()
        duration = job.content_frames * HOP_LENGTH / SAMPLE_RATE
        for s in job.segments:  # timestamps past the end of the audio (padding) end at its end
            s.start = round(min(s.start, duration), 3)
            s.end = round(min(max(s.end, s.start), duration), 3)
        words = [(w, min(start, duration), min(max(end, start), duration)) for w, start, end in job.words]
        return Transcription(text, job.language or "en", round(duration, 3), job.segments, job.tokens, words)
