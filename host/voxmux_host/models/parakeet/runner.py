"""Runs batches through a :class:`ParakeetModel` on one device: CUDA graphs for warmed shapes, eager otherwise.

Graphs (CUDA only, captured in :meth:`ParakeetRunner.warmup` and never later):

- one *encoder graph* per (batch size, length bucket): front end, encoder, ``joint.enc`` projection,
  and the reset of the decode state (SOS through the prediction network);
- one *decode graph* per batch size: ``chunk_steps`` unrolled decode steps, then the "any item still
  active" flag. It is replayed until the flag, read back one chunk behind so the GPU never waits for
  the host, says every item is done; finished items do not change, so the extra chunk is harmless.

A batch is padded to the smallest bucket that holds its longest clip and to the smallest captured batch
size that holds it (padding rows have length 0 and never decode). Everything else runs eagerly with
the same code. Graphs exchange data only through tensors allocated outside them (the static inputs and
the decode state). The encoder graphs share one memory pool and the decode graphs share one (the same
pool unless decodes overlap): graphs of one pool run one at a time, on one stream, so no graph's
temporaries can overlap another's live data.

*Overlapped decoding* (``overlap_decode``): the decode of a batch is a loop of small, latency-bound
kernels that leaves most of the GPU idle, and the next batch's encoder can fill it. Each batch size
then has two sets of static inputs, decode state and graphs, used in turn. :meth:`ParakeetRunner.begin`
copies a batch in, launches its encoder graph on the instance's stream and hands the batch to the
runner's *decode thread*, and returns. The decode thread runs the batches' decode loops one after
another, each on a second, higher-priority stream (after its encoder, through an event), and collects
the tokens; the function ``begin`` returns waits for them. The host calls that function on its
finisher thread, which then builds the texts while the decode thread already decodes the next batch
and the main thread launches the encoder after that into the other set. A set is reused only once the
decode that last used it has been collected.

Clips are int16 PCM, the wire format (float value = int16 / 32768), or float (reference input for tests
and tools); one batch holds one kind. int16 clips cross to the device as int16 (half the bytes of
float32) through pinned memory, and are converted to float32 on the device, outside the graphs, into the
float32 tensor that the encoder graphs read. A batch staged ahead (:meth:`ParakeetRunner.stage`, on the
host's stager thread) is already in pinned memory, padded to its bucket: it crosses in one copy.
Otherwise the main thread copies each clip into the pinned buffer of its batch size first.
"""
from __future__ import annotations

import inspect
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .config import ParakeetConfig, encoder_frames, feature_tensor_frames
from .decoder import DecodedItem, DecodeState, TDTGreedyDecoder, collect_results
from .model import PCM16_SCALE, ParakeetModel, is_pcm16_batch, pad_audio
from .staging import StagedClips, StagingPool

#: Encoder lengths of graph buckets are rounded up to a multiple of this, which keeps attention's
#: [T, T] tiles aligned for the fused kernels (a 45 s bucket becomes 45.36 s, 568 frames).
ENCODER_FRAME_ALIGNMENT = 8


def bucket_samples_for(duration_ms: int, config: ParakeetConfig, alignment: int = ENCODER_FRAME_ALIGNMENT) -> int:
    """The padded sample count of a length bucket: at least ``duration_ms``, with an encoder tensor length
    that is a multiple of ``alignment``."""
    samples = duration_ms * config.sample_rate_hz // 1000
    frames = encoder_frames(feature_tensor_frames(samples, config), config)
    target = -(-frames // alignment) * alignment
    # The first feature-tensor length that subsamples to `target` frames is (target - 1) * factor + 1.
    aligned = (target - 1) * config.subsampling_factor * config.hop_length
    return max(samples, aligned)


@dataclass(frozen=True)
class RunnerOptions:
    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16)
    bucket_durations_ms: Tuple[int, ...] = (5000, 15000, 30000, 45000, 60000)
    use_graphs: bool = True
    chunk_steps: int = 8
    #: Let cuDNN time its algorithms for each captured shape during warm-up (the graphs keep the fastest);
    #: off again afterwards, so eager runs of new shapes are not slowed by timing runs.
    cudnn_benchmark: bool = True
    #: Decode a batch on a second stream while the next batch's encoder runs (module docstring; graphs
    #: only).
    overlap_decode: bool = False


@dataclass
class RunnerCounters:
    eager_batches: int = 0
    graph_replays: int = 0
    clips: int = 0
    tokens: int = 0
    decode_steps: int = 0
    audio_samples: int = 0


@dataclass
class _Statics:
    """Inputs of the graphs of one batch size (allocated before capture, reused by every replay)."""

    audio: torch.Tensor  # [B, max_samples] float32, device: the encoder graphs' input
    lengths: torch.Tensor  # [B] int64, device
    #: [B * max_samples] int16, device: a batch for bucket s lands in the first B * s as [B, s], then is
    #: scaled into `audio`. Flat, so that a staged batch's rows arrive in one contiguous copy.
    pcm: torch.Tensor
    pcm_host: torch.Tensor  # [B * max_samples] int16, pinned: the main thread's staging for `pcm`
    lengths_host: torch.Tensor  # pinned mirror of `lengths`
    state: DecodeState
    flags_host: torch.Tensor  # [2] bool, pinned: any_active of the last two decode chunks
    events: Tuple[torch.cuda.Event, torch.cuda.Event]
    #: Recorded on the instance's stream after the encoder graph: where the decode stream starts.
    encoded: torch.cuda.Event
    #: Set while no batch uses these statics: cleared when a batch is copied in, set again once its
    #: tokens are collected (or it failed).
    free: threading.Event = field(default_factory=lambda: _set(threading.Event()))
    encoder_graphs: Dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)  # bucket samples -> graph
    decode_graph: Optional[torch.cuda.CUDAGraph] = None


def _set(event: threading.Event) -> threading.Event:
    event.set()
    return event


@dataclass
class _Launched:
    """A batch whose encoder graph has been launched (overlapped decoding): what its decode needs."""

    statics: _Statics
    bucket: int
    clips: int
    marks: Optional[List[torch.cuda.Event]]


def _graph_kwargs() -> Dict[str, object]:
    # Another thread (the heartbeat or the probe) may touch CUDA while we capture; "thread_local" keeps
    # that from invalidating the capture (torch >= 2.1).
    if "capture_error_mode" in inspect.signature(torch.cuda.graph.__init__).parameters:
        return {"capture_error_mode": "thread_local"}
    return {}


class ParakeetRunner:
    def __init__(self, model: ParakeetModel, device: torch.device, options: RunnerOptions) -> None:
        self.model = model
        self.config = model.config
        self.device = device
        self.options = options
        self.is_cuda = device.type == "cuda"
        self.stream: Optional[torch.cuda.Stream] = (
            torch.cuda.Stream(device) if self.is_cuda else None  # type: ignore[no-untyped-call]
        )
        self.counters = RunnerCounters()
        self.graphs_captured = 0
        self.graph_pool_bytes = 0
        self.is_capturing = False
        #: Held while deciding to capture and by the probe while it launches its kernel, so the probe
        #: never enqueues work on a stream that is being captured.
        self.launch_lock = threading.Lock()
        #: Batches begun and not finished (the probe uses the side stream while any is in flight).
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        #: counters are updated by the main thread and, with overlapped decoding, the finisher thread.
        self._counters_lock = threading.Lock()
        #: When set (benchmarks), each CUDA sub-batch appends (encoder ms, decode ms) measured with events.
        self.phase_times_ms: Optional[List[Tuple[float, float]]] = None
        self.side_stream: Optional[torch.cuda.Stream] = (
            torch.cuda.Stream(device) if self.is_cuda else None  # type: ignore[no-untyped-call]
        )
        #: Static inputs, decode state and graphs per batch size: one set, or two used in turn when
        #: decodes overlap.
        self.overlapping = bool(options.overlap_decode and options.use_graphs and self.is_cuda)
        self.slots = 2 if self.overlapping else 1
        self._statics: Dict[int, List[_Statics]] = {}
        self._turn: Dict[int, int] = {}
        #: The set the last graph replay of each batch size used (graph_encoder_output).
        self._last: Dict[int, _Statics] = {}
        #: The decode's stream: the instance's own, or with overlapped decoding a second one that the
        #: GPU schedules first, so that a decode step's small kernels do not queue behind the encoder's.
        self.decode_stream: Optional[torch.cuda.Stream] = self.stream
        #: With overlapped decoding: the thread that decodes begun batches, one at a time, in order.
        self._decoder: Optional[ThreadPoolExecutor] = None
        if self.overlapping:
            self.decode_stream = torch.cuda.Stream(device, priority=-1)  # type: ignore[no-untyped-call]
            self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode")
        #: Every graph shape has run once (prepare); the graphs themselves exist once warmup has run.
        self.is_prepared = False
        self.has_graphs = False
        self.buckets = tuple(sorted({bucket_samples_for(ms, self.config) for ms in options.bucket_durations_ms}))
        self.batch_sizes = tuple(sorted(set(options.batch_sizes)))
        #: Buffers that the host's stager thread fills ahead of a batch (see stage()): one batch of the
        #: largest size and bucket each, pinned on CUDA.
        self.staging = StagingPool(
            rows=self.batch_sizes[-1] if self.batch_sizes else 1,
            width=self.buckets[-1] if self.buckets else self.config.sample_rate_hz,
            pinned=self.is_cuda,
        )

    # ---------------------------------------------------------------- warmup
    def prepare(self) -> None:
        """With CUDA graphs on: run every graph shape twice without capturing anything.

        This is the slow part of getting ready: ``torch.compile`` builds its kernels, cuDNN times its
        algorithms, libraries initialise lazily. None of it captures, so it may overlap sibling
        instances' batches; the adapter calls it at load time, before the supervisor's exclusive-warmup
        gate pauses dispatch, and :meth:`warmup` (under the gate) is then left with the captures.
        A no-op without graphs, and the second time.
        """
        if not (self.is_cuda and self.options.use_graphs) or self.is_prepared:
            return
        assert self.stream is not None
        was_benchmark = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.options.cudnn_benchmark
        try:
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                self.model.greedy.prepare(self.device)
                for batch_size in self.batch_sizes:
                    statics = self._statics_for(batch_size)
                    for bucket in self.buckets:
                        self._fill_warmup_inputs(statics, bucket)
                        for _ in range(2):
                            self._encoder_body(statics, bucket)
                    for _ in range(2):
                        self.model.decode_steps_(statics.state, self.options.chunk_steps)
            torch.cuda.synchronize(self.device)
        finally:
            torch.backends.cudnn.benchmark = was_benchmark
        self.is_prepared = True

    def warmup(self) -> int:
        """Run every shape once; with CUDA graphs on, capture them. Returns the number of graphs.

        Shapes that :meth:`prepare` already ran are quick to warm again; without it, this does its
        work first.
        """
        if not (self.is_cuda and self.options.use_graphs):
            clips = [np.zeros(self.config.sample_rate_hz, dtype=np.int16)]
            self.run(clips, count=False)
            return 0
        assert self.stream is not None
        self.prepare()
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_reserved(self.device)
        pool = torch.cuda.graph_pool_handle()  # type: ignore[no-untyped-call]
        # Overlapped, a decode graph runs while an encoder graph does: they must not share temporaries.
        decode_pool = torch.cuda.graph_pool_handle() if self.overlapping else pool  # type: ignore[no-untyped-call]
        with self.launch_lock:
            self.is_capturing = True
        was_benchmark = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.options.cudnn_benchmark
        try:
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                for batch_size in self.batch_sizes:
                    for slot in range(self.slots):
                        statics = self._statics_for(batch_size, slot)
                        for bucket in self.buckets:
                            self._capture_encoder(statics, bucket, pool)
                        self._capture_decode(statics, decode_pool)
            torch.cuda.synchronize(self.device)
        finally:
            self.is_capturing = False
            torch.backends.cudnn.benchmark = was_benchmark
        self.graph_pool_bytes = max(0, torch.cuda.memory_reserved(self.device) - before)
        self.has_graphs = True
        return self.graphs_captured

    def _statics_for(self, batch_size: int, slot: int = 0) -> _Statics:
        sets = self._statics.setdefault(batch_size, [])
        while len(sets) <= slot:
            sets.append(self._allocate_statics(batch_size))
        return sets[slot]

    def _take_statics(self, batch_size: int) -> _Statics:
        """The set for the next batch of this size (in turn), once the decode that last used it is
        collected; marked in use."""
        turn = self._turn.get(batch_size, 0)
        self._turn[batch_size] = (turn + 1) % self.slots
        statics = self._statics[batch_size][turn]
        statics.free.wait()
        statics.free.clear()
        self._last[batch_size] = statics
        return statics

    def _allocate_statics(self, batch_size: int) -> _Statics:
        max_samples = self.buckets[-1]
        max_frames = encoder_frames(feature_tensor_frames(max_samples, self.config), self.config)
        return _Statics(
            audio=torch.zeros(batch_size, max_samples, dtype=torch.float32, device=self.device),
            lengths=torch.zeros(batch_size, dtype=torch.int64, device=self.device),
            pcm=torch.zeros(batch_size * max_samples, dtype=torch.int16, device=self.device),
            pcm_host=torch.zeros(batch_size * max_samples, dtype=torch.int16).pin_memory(),
            lengths_host=torch.zeros(batch_size, dtype=torch.int64).pin_memory(),
            state=self.model.new_decode_state(batch_size, max_frames),
            flags_host=torch.zeros(2, dtype=torch.bool).pin_memory(),
            events=(torch.cuda.Event(), torch.cuda.Event()),  # type: ignore[no-untyped-call]
            encoded=torch.cuda.Event(),  # type: ignore[no-untyped-call]
        )

    def _encoder_body(self, statics: _Statics, bucket: int) -> None:
        enc_proj, enc_len = self.model.encode_projected(statics.audio[:, :bucket], statics.lengths)
        self.model.load_encoded_(statics.state, enc_proj, enc_len)

    def _fill_warmup_inputs(self, statics: _Statics, bucket: int) -> None:
        # Realistic inputs for the warm-up runs (lazy initialisation, library autotuning).
        generator = torch.Generator(device=self.device).manual_seed(bucket)
        statics.audio.normal_(0.0, 0.1, generator=generator)
        statics.lengths.fill_(bucket)

    def _capture_encoder(self, statics: _Statics, bucket: int, pool: object) -> None:
        self._fill_warmup_inputs(statics, bucket)
        for _ in range(2):
            self._encoder_body(statics, bucket)
        self.stream.synchronize()  # type: ignore[union-attr]
        graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
        with torch.cuda.graph(graph, pool=pool, stream=self.stream, **_graph_kwargs()):  # type: ignore[arg-type, no-untyped-call]
            self._encoder_body(statics, bucket)
        statics.encoder_graphs[bucket] = graph
        self.graphs_captured += 1

    def _capture_decode(self, statics: _Statics, pool: object) -> None:
        """Capture the decode graph on the stream it will replay on. (A captured product keeps the cuBLAS
        workspace of its capture stream: captured on the instance's stream, an overlapped decode would
        share the encoder's workspace while both run. On one H200 that failed with 'an illegal
        instruction was encountered'.)"""
        steps = self.options.chunk_steps
        stream = self.decode_stream
        assert stream is not None and self.stream is not None
        stream.wait_stream(self.stream)  # type: ignore[no-untyped-call]
        with torch.cuda.stream(stream):  # type: ignore[no-untyped-call]
            # Also creates this stream's cuBLAS workspace before the capture.
            for _ in range(2):
                self.model.decode_steps_(statics.state, steps)
        stream.synchronize()  # type: ignore[no-untyped-call]
        graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
        with torch.cuda.graph(graph, pool=pool, stream=stream, **_graph_kwargs()):  # type: ignore[arg-type, no-untyped-call]
            self.model.decode_steps_(statics.state, steps)
        self.stream.wait_stream(stream)  # type: ignore[no-untyped-call]
        statics.decode_graph = graph
        self.graphs_captured += 1

    # ---------------------------------------------------------------- run
    def plan(self, lengths: Sequence[int]) -> List[Tuple[List[int], Optional[Tuple[int, int]]]]:
        """Split items (by index) into sub-batches; each gets (batch size, bucket) if a graph fits, else None.

        Items are grouped by length so that a split batch pads as little as possible.
        """
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        graphs_ready = self.has_graphs
        max_batch = self.batch_sizes[-1] if self.batch_sizes else max(1, len(lengths))
        max_bucket = self.buckets[-1] if self.buckets else 0
        fitting = [i for i in order if graphs_ready and lengths[i] <= max_bucket]
        others = [i for i in order if not (graphs_ready and lengths[i] <= max_bucket)]
        groups: List[Tuple[List[int], Optional[Tuple[int, int]]]] = []
        for start in range(0, len(fitting), max_batch):
            group = fitting[start : start + max_batch]
            batch_size = next(b for b in self.batch_sizes if b >= len(group))
            bucket = next(s for s in self.buckets if s >= max(lengths[i] for i in group))
            groups.append((group, (batch_size, bucket)))
        for start in range(0, len(others), max_batch):
            groups.append((others[start : start + max_batch], None))
        return groups

    def stage(self, audios: Sequence[npt.NDArray[Any]]) -> Optional[StagedClips]:
        """Copy a batch's int16 clips into a free staging buffer, rows in the order :meth:`run` will use,
        zero-padded to the bucket (graphs) or the longest clip (eager). Called on the host's stager
        thread while the main thread may be running the batch before; blocks until a buffer is free.

        None (run() then copies the clips itself) for float clips, and for a batch that would not run
        as one sub-batch or does not fit the buffers.
        """
        if not audios or not all(a.dtype == np.int16 for a in audios):
            return None
        lengths = [int(a.shape[0]) for a in audios]
        groups = self.plan(lengths)
        if len(groups) != 1:
            return None
        order, shape = groups[0]
        width = shape[1] if shape is not None else max(max(lengths), 1)
        if not self.staging.fits(len(order), width):
            return None
        return self.staging.stage(audios, order, width, shape)

    def run(
        self, audios: Sequence[npt.NDArray[Any]], count: bool = True, staged: Optional[StagedClips] = None
    ) -> List[DecodedItem]:
        """Token ids, frames and durations for each clip ([samples], 16 kHz), in input order.

        Clips are all int16 PCM or all float (module docstring); a mix raises ValueError. ``staged``:
        what :meth:`stage` made of these clips (run() releases it, also when it cannot use it).
        """
        try:
            is_pcm16_batch(audios)
            self._enter()
            try:
                return self._run(audios, count, staged)
            finally:
                self._leave()
        finally:
            if staged is not None:
                staged.release()

    def begin(
        self, audios: Sequence[npt.NDArray[Any]], staged: Optional[StagedClips] = None
    ) -> Callable[[], List[DecodedItem]]:
        """:meth:`run` in two parts: this call, and the function it returns (call it exactly once).

        With overlapped decoding, a batch that runs as one captured shape only has its encoder launched
        here and its decode queued on the decode thread; the returned function waits for the tokens
        (module docstring). This call may first wait until the decode that last used the batch size's
        other set is collected. Any other batch runs here, in full, and the function only hands back
        its results.
        """
        if not self.overlapping:
            results = self.run(audios, staged=staged)
            return lambda: results
        try:
            is_pcm16_batch(audios)
            lengths = [int(a.shape[0]) for a in audios]
            groups = self.plan(lengths)
            if len(groups) != 1 or groups[0][1] is None:
                results = self.run(audios, staged=staged)
                return lambda: results
            order, shape = groups[0]
            assert shape is not None
            batch_size, bucket = shape
            if staged is not None and not _staged_for(staged, groups, lengths):
                staged.release()
                staged = None
            clips = [audios[i] for i in order]
            self._enter()
            try:
                launched = self._launch_graph(clips, batch_size, bucket, staged=staged)
                decoding = self._decode_later(launched)
            except BaseException:
                self._leave()
                raise
        finally:
            if staged is not None:
                staged.release()
        done = False

        def complete() -> List[DecodedItem]:
            nonlocal done
            if done:
                raise RuntimeError("Expected one call of a batch's completion: it was called again")
            done = True
            try:
                decoded = decoding.result()
            finally:
                self._leave()
            results: List[Optional[DecodedItem]] = [None] * len(audios)
            for i, item in zip(order, decoded):
                results[i] = item
            items = [item for item in results if item is not None]
            with self._counters_lock:
                self.counters.graph_replays += 1
            self._count(lengths, items)
            return items

        return complete

    def _decode_later(self, launched: _Launched) -> "Future[List[DecodedItem]]":
        """Queue a launched batch's decode on the decode thread; a set whose launch succeeded is always
        decoded (and so freed), whether or not anyone waits for the result."""
        assert self._decoder is not None
        try:
            return self._decoder.submit(self._complete_graph, launched)
        except BaseException:
            launched.statics.free.set()
            raise

    @property
    def is_busy(self) -> bool:
        """A batch is in flight: begun (or running) and not yet finished."""
        return self._in_flight > 0

    def _enter(self) -> None:
        with self._in_flight_lock:
            self._in_flight += 1

    def _leave(self) -> None:
        with self._in_flight_lock:
            self._in_flight -= 1

    def _count(self, lengths: List[int], done: List[DecodedItem]) -> None:
        with self._counters_lock:
            self.counters.clips += len(done)
            self.counters.audio_samples += sum(lengths)
            self.counters.tokens += sum(len(item.tokens) for item in done)
            self.counters.decode_steps += sum(item.steps for item in done)

    def _run(self, audios: Sequence[npt.NDArray[Any]], count: bool, staged: Optional[StagedClips]) -> List[DecodedItem]:
        results: List[Optional[DecodedItem]] = [None] * len(audios)
        lengths = [int(a.shape[0]) for a in audios]
        groups = self.plan(lengths)
        if staged is not None and not _staged_for(staged, groups, lengths):
            staged.release()
            staged = None
        for group, shape in groups:
            clips = [audios[i] for i in group]
            if shape is None:
                decoded = self._run_eager(clips, staged=staged)
            else:
                decoded = self._run_graph(clips, *shape, staged=staged)
            if count:
                with self._counters_lock:
                    if shape is None:
                        self.counters.eager_batches += 1
                    else:
                        self.counters.graph_replays += 1
            for i, item in zip(group, decoded):
                results[i] = item
        done = [item for item in results if item is not None]
        assert len(done) == len(audios)
        if count:
            self._count(lengths, done)
        return done

    def _stream_context(self) -> object:
        return torch.cuda.stream(self.stream) if self.stream is not None else _NullContext()

    def _run_eager(
        self,
        clips: Sequence[npt.NDArray[Any]],
        length: Optional[int] = None,
        batch_size: Optional[int] = None,
        staged: Optional[StagedClips] = None,
    ) -> List[DecodedItem]:
        with torch.inference_mode(), self._stream_context():  # type: ignore[attr-defined, no-untyped-call]
            marks = self._marks()
            if staged is not None:
                audio, lengths = self._unstage_eager(staged)
            else:
                audio, lengths = pad_audio(clips, self.device, length=length, batch_size=batch_size)
            enc_proj, enc_len = self.model.encode_projected(audio, lengths)
            state = self.model.new_decode_state(audio.shape[0], enc_proj.shape[1])
            self.model.load_encoded_(state, enc_proj, enc_len)
            self._mark(marks, 1)
            limit = TDTGreedyDecoder.max_steps(state.max_frames, self.config)
            done = 0
            while bool(state.any_active):
                if done > limit:
                    raise RuntimeError(f"Decoding did not finish within {limit} steps")
                self.model.decode_steps_(state, self.options.chunk_steps)
                done += self.options.chunk_steps
            self._mark(marks, 2)
            results = collect_results(state, len(clips))
            self._record(marks)
            return results

    def _unstage_eager(self, staged: StagedClips) -> Tuple[torch.Tensor, torch.Tensor]:
        """A staged batch as pad_audio() would give it: float32 [n, width] and lengths on the device;
        the staging buffer is released once nothing reads it any more."""
        pcm = staged.host.to(self.device, non_blocking=True)
        audio = pcm.to(torch.float32).mul_(PCM16_SCALE)  # a new tensor: the buffer is not read after this
        lengths = torch.tensor(staged.lengths, dtype=torch.int64).to(self.device, non_blocking=True)
        staged.release(self._event_after_copies())
        return audio, lengths

    def _event_after_copies(self) -> Optional[torch.cuda.Event]:
        """On CUDA an event recorded on the instance's stream (after the copies enqueued so far); on the
        CPU None (copies there are done when they return)."""
        if not self.is_cuda:
            return None
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record(self.stream)  # type: ignore[no-untyped-call]
        return event

    def _marks(self) -> Optional[List[torch.cuda.Event]]:
        if self.phase_times_ms is None or not self.is_cuda:
            return None
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]  # type: ignore[no-untyped-call]
        marks[0].record(self.stream)  # type: ignore[no-untyped-call]
        return marks

    def _mark(self, marks: Optional[List[torch.cuda.Event]], index: int) -> None:
        if marks is not None:
            marks[index].record(self.stream)  # type: ignore[no-untyped-call]

    def _record(self, marks: Optional[List[torch.cuda.Event]]) -> None:
        if marks is not None and self.phase_times_ms is not None:
            marks[2].synchronize()  # type: ignore[no-untyped-call]
            self.phase_times_ms.append(
                (marks[0].elapsed_time(marks[1]), marks[1].elapsed_time(marks[2]))  # type: ignore[no-untyped-call]
            )

    def run_eager_padded(
        self, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int
    ) -> Tuple[List[DecodedItem], torch.Tensor]:
        """Eager run on exactly a graph's shapes (for checking a replay against eager); also returns the
        projected encoder frames [batch_size, T, J] on the host."""
        with torch.inference_mode(), self._stream_context():  # type: ignore[attr-defined, no-untyped-call]
            audio, lengths = pad_audio(clips, self.device, length=bucket, batch_size=batch_size)
            enc_proj, _ = self.model.encode_projected(audio, lengths)
            return self._run_eager(clips, length=bucket, batch_size=batch_size), enc_proj.float().cpu()

    def graph_encoder_output(self, batch_size: int, frames: int) -> torch.Tensor:
        """The projected encoder frames the last replay left in the decode state (host copy)."""
        state = self._last[batch_size].state
        with self._stream_context():  # type: ignore[attr-defined]
            return state.enc_proj[:, :frames].float().cpu()

    def _run_graph(
        self, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int, staged: Optional[StagedClips] = None
    ) -> List[DecodedItem]:
        return self._complete_graph(self._launch_graph(clips, batch_size, bucket, staged))

    def _launch_graph(
        self, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int, staged: Optional[StagedClips] = None
    ) -> _Launched:
        """Copy the batch into the next free set of static inputs and launch its encoder graph."""
        statics = self._take_statics(batch_size)
        try:
            assert statics.decode_graph is not None and self.stream is not None
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                marks = self._marks()
                if staged is not None:
                    self._copy_staged(statics, staged, batch_size, bucket)
                else:
                    self._stage_audio(statics, clips, batch_size, bucket)
                statics.encoder_graphs[bucket].replay()  # type: ignore[no-untyped-call]
                self._mark(marks, 1)
                statics.encoded.record(self.stream)  # type: ignore[no-untyped-call]
        except BaseException:
            statics.free.set()
            raise
        return _Launched(statics, bucket, len(clips), marks)

    def _complete_graph(self, launched: _Launched) -> List[DecodedItem]:
        """Replay the decode graph until every item is done (on the decode stream, after the encoder),
        then collect the tokens; the set of static inputs is free again afterwards."""
        statics = launched.statics
        state = statics.state
        stream = self.decode_stream
        try:
            assert statics.decode_graph is not None and stream is not None
            with torch.inference_mode(), torch.cuda.stream(stream):  # type: ignore[no-untyped-call]
                if stream is not self.stream:
                    stream.wait_event(statics.encoded)  # type: ignore[no-untyped-call]
                frames = encoder_frames(feature_tensor_frames(launched.bucket, self.config), self.config)
                limit = TDTGreedyDecoder.max_steps(frames, self.config) // self.options.chunk_steps + 2
                flags, events = statics.flags_host, statics.events
                slot = 0
                statics.decode_graph.replay()  # type: ignore[no-untyped-call]
                flags[slot].copy_(state.any_active, non_blocking=True)
                events[slot].record(stream)  # type: ignore[no-untyped-call]
                for _ in range(limit):
                    other = 1 - slot
                    statics.decode_graph.replay()  # type: ignore[no-untyped-call]
                    flags[other].copy_(state.any_active, non_blocking=True)
                    events[other].record(stream)  # type: ignore[no-untyped-call]
                    events[slot].synchronize()  # type: ignore[no-untyped-call]
                    if not bool(flags[slot]):
                        break
                    slot = other
                else:
                    raise RuntimeError(f"Decoding did not finish within {limit} chunks")
                marks = launched.marks
                if marks is not None:
                    marks[2].record(stream)  # type: ignore[no-untyped-call]
                results = collect_results(state, launched.clips)
                self._record(marks)
                return results
        finally:
            statics.free.set()

    def _copy_staged(self, statics: _Statics, staged: StagedClips, batch_size: int, bucket: int) -> None:
        """A staged batch into the graphs' static inputs: one copy of its [n, bucket] rows, its lengths,
        then the scaling; the staging buffer goes back once the copy is done (an event)."""
        n = len(staged.order)
        lengths = statics.lengths_host.numpy()
        lengths[:] = 0
        lengths[:n] = staged.lengths
        pcm = statics.pcm[: batch_size * bucket].view(batch_size, bucket)
        pcm[:n].copy_(staged.host, non_blocking=True)
        staged.release(self._event_after_copies())
        # Rows n.. keep stale samples: their length is 0, so the front end zeroes them.
        torch.mul(pcm, PCM16_SCALE, out=statics.audio[:, :bucket])
        statics.lengths.copy_(statics.lengths_host, non_blocking=True)

    def _stage_audio(self, statics: _Statics, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int) -> None:
        """Copy clips and lengths into the graphs' static inputs, on the instance's stream.

        The pinned buffers are rewritten only after the previous replay was waited for (``_run_graph``
        returns after its last event), so no copy still in flight reads them. Samples past a clip's length
        keep stale values: the front end zeroes everything at or beyond ``lengths``.
        """
        lengths = statics.lengths_host.numpy()
        lengths[:] = 0
        if is_pcm16_batch(clips):
            host = statics.pcm_host[: batch_size * bucket].view(batch_size, bucket)
            host_rows = host.numpy()
            pcm = statics.pcm[: batch_size * bucket].view(batch_size, bucket)
            for row, clip in enumerate(clips):
                n = clip.shape[0]
                host_rows[row, :n] = clip
                lengths[row] = n
                pcm[row, :n].copy_(host[row, :n], non_blocking=True)
            # One kernel over the bucket, exact (see PCM16_SCALE); writes into the graphs' own input tensor.
            torch.mul(pcm, PCM16_SCALE, out=statics.audio[:, :bucket])
        else:
            for row, clip in enumerate(clips):
                n = clip.shape[0]
                lengths[row] = n
                # Float clips are reference input, not the serving path: a pageable, synchronous copy.
                statics.audio[row, :n].copy_(torch.tensor(clip, dtype=torch.float32))
        statics.lengths.copy_(statics.lengths_host, non_blocking=True)

    def close(self) -> None:
        """Waits for the decodes already begun, then frees the graphs and buffers."""
        if self._decoder is not None:
            self._decoder.shutdown(wait=True)
            self._decoder = None
        self._statics.clear()
        self.has_graphs = False
        if self.is_cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()


def _staged_for(staged: StagedClips, groups: List[Tuple[List[int], Optional[Tuple[int, int]]]], lengths: List[int]) -> bool:
    """Whether ``staged`` holds exactly the one sub-batch that ``groups`` plans for clips of ``lengths``."""
    if len(groups) != 1:
        return False
    order, shape = groups[0]
    return staged.order == order and staged.shape == shape and staged.lengths == [lengths[i] for i in order]


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def elapsed_ms(start: float) -> int:
    return int(round((time.perf_counter() - start) * 1000))
