"""Runs batches through a :class:`ParakeetModel` on one device: CUDA graphs for warmed shapes, eager otherwise.

The runner composes:

- graphs.py: the CUDA graphs per (batch size, length bucket), their capture, and the plan that splits a
  batch into sub-batches that a graph fits (or none: eager);
- staging.py: the pinned staging buffers that the host's stager thread fills ahead of a batch, and the
  copies of a batch's audio into the graphs' static inputs;
- decode_loop.py: the TDT greedy decode loop, eager or as replays of the captured decode chunk.

What is left here: the instance's streams, the order of a graph run (copy in, encoder graph, decode
loop, collect the tokens) and of an eager one, the counters, the GPU phase timings of the benchmark, and
what the adapter's probe needs to know (a batch in flight, a capture under way). Everything runs on the
instance's stream, from the host's main thread; only :meth:`ParakeetRunner.stage` runs on the stager
thread. Eager runs use the same model code as the graphs.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .decode_loop import decode_eager, replay_until_done
from .decoder import DecodedItem, collect_results
from .graphs import GraphCache
from .model import ParakeetModel, is_pcm16_batch, pad_audio
from .staging import Plan, StagedClips, StagingPool, copy_clips, copy_staged, staged_for, unstage_eager


@dataclass(frozen=True)
class RunnerOptions:
    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16)
    bucket_durations_ms: Tuple[int, ...] = (5000, 15000, 30000, 45000, 60000)
    use_graphs: bool = True
    chunk_steps: int = 8
    #: Let cuDNN time its algorithms for each captured shape during warm-up (the graphs keep the fastest);
    #: off again afterwards, so eager runs of new shapes are not slowed by timing runs.
    cudnn_benchmark: bool = True


@dataclass
class RunnerCounters:
    eager_batches: int = 0
    graph_replays: int = 0
    clips: int = 0
    tokens: int = 0
    decode_steps: int = 0
    audio_samples: int = 0


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
        self.is_capturing = False
        #: Held while deciding to capture and by the probe while it launches its kernel, so the probe
        #: never enqueues work on a stream that is being captured.
        self.launch_lock = threading.Lock()
        #: Batches begun and not finished (the probe uses the side stream while any is in flight).
        self._in_flight = 0
        self._in_flight_lock = threading.Lock()
        #: When set (benchmarks), each CUDA sub-batch appends (encoder ms, decode ms) measured with events.
        self.phase_times_ms: Optional[List[Tuple[float, float]]] = None
        self.side_stream: Optional[torch.cuda.Stream] = (
            torch.cuda.Stream(device) if self.is_cuda else None  # type: ignore[no-untyped-call]
        )
        self.graphs = GraphCache(
            model,
            device,
            self.stream,
            batch_sizes=options.batch_sizes,
            bucket_durations_ms=options.bucket_durations_ms,
            chunk_steps=options.chunk_steps,
            cudnn_benchmark=options.cudnn_benchmark,
        )
        #: Buffers that the host's stager thread fills ahead of a batch (see stage()): one batch of the
        #: largest size and bucket each, pinned on CUDA.
        self.staging = StagingPool(
            rows=self.batch_sizes[-1] if self.batch_sizes else 1,
            width=self.buckets[-1] if self.buckets else self.config.sample_rate_hz,
            pinned=self.is_cuda,
        )

    # ---------------------------------------------------------------- the graph cache's state
    @property
    def buckets(self) -> Tuple[int, ...]:
        return self.graphs.buckets

    @property
    def batch_sizes(self) -> Tuple[int, ...]:
        return self.graphs.batch_sizes

    @property
    def graphs_captured(self) -> int:
        return self.graphs.graphs_captured

    @property
    def graph_pool_bytes(self) -> int:
        return self.graphs.pool_bytes

    @property
    def is_prepared(self) -> bool:
        """Every graph shape has run once (prepare)."""
        return self.graphs.is_prepared

    @property
    def has_graphs(self) -> bool:
        """The graphs exist (warmup has run)."""
        return self.graphs.has_graphs

    @property
    def uses_graphs(self) -> bool:
        return self.is_cuda and self.options.use_graphs

    # ---------------------------------------------------------------- warmup
    def prepare(self) -> None:
        """With CUDA graphs on: run every graph shape twice without capturing anything.

        This is the slow part of getting ready: ``torch.compile`` builds its kernels, cuDNN times its
        algorithms, libraries initialise lazily. None of it captures, so it may overlap sibling
        instances' batches; the adapter calls it at load time, before the supervisor's exclusive-warmup
        gate pauses dispatch, and :meth:`warmup` (under the gate) is then left with the captures.
        A no-op without graphs, and the second time.
        """
        if self.uses_graphs:
            self.graphs.prepare()

    def warmup(self) -> int:
        """Run every shape once; with CUDA graphs on, capture them. Returns the number of graphs.

        Shapes that :meth:`prepare` already ran are quick to warm again; without it, this does its
        work first.
        """
        if not self.uses_graphs:
            clips = [np.zeros(self.config.sample_rate_hz, dtype=np.int16)]
            self.run(clips, count=False)
            return 0
        self.graphs.prepare()
        with self.launch_lock:
            self.is_capturing = True
        try:
            return self.graphs.capture()
        finally:
            self.is_capturing = False

    # ---------------------------------------------------------------- run
    def plan(self, lengths: Sequence[int]) -> Plan:
        """Split items (by index) into sub-batches; each gets (batch size, bucket) if a graph fits, else None."""
        return self.graphs.plan(lengths)

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

        Clips are all int16 PCM or all float (staging.py); a mix raises ValueError. ``staged``: what
        :meth:`stage` made of these clips (run() releases it, also when it cannot use it).
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
        """:meth:`run` in two parts: this call, which runs the batch in full, and the function it
        returns, which hands back its results (call it once)."""
        results = self.run(audios, staged=staged)
        return lambda: results

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
        self.counters.clips += len(done)
        self.counters.audio_samples += sum(lengths)
        self.counters.tokens += sum(len(item.tokens) for item in done)
        self.counters.decode_steps += sum(item.steps for item in done)

    def _run(self, audios: Sequence[npt.NDArray[Any]], count: bool, staged: Optional[StagedClips]) -> List[DecodedItem]:
        results: List[Optional[DecodedItem]] = [None] * len(audios)
        lengths = [int(a.shape[0]) for a in audios]
        groups = self.plan(lengths)
        if staged is not None and not staged_for(staged, groups, lengths):
            staged.release()
            staged = None
        for group, shape in groups:
            clips = [audios[i] for i in group]
            if shape is None:
                decoded = self._run_eager(clips, staged=staged)
            else:
                decoded = self.run_graph(clips, *shape, staged=staged)
            if count:
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
                audio, lengths = unstage_eager(staged, self.device, self._event_after_copies)
            else:
                audio, lengths = pad_audio(clips, self.device, length=length, batch_size=batch_size)
            enc_proj, enc_len = self.model.encode_projected(audio, lengths)
            state = self.model.new_decode_state(audio.shape[0], enc_proj.shape[1])
            self.model.load_encoded_(state, enc_proj, enc_len)
            self._mark(marks, 1)
            decode_eager(self.model, state, self.options.chunk_steps)
            self._mark(marks, 2)
            results = collect_results(state, len(clips))
            self._record(marks)
            return results

    def run_graph(
        self, clips: Sequence[npt.NDArray[Any]], batch_size: int, bucket: int, staged: Optional[StagedClips] = None
    ) -> List[DecodedItem]:
        """One sub-batch through the captured graphs of (``batch_size``, ``bucket``): copy it into the
        static inputs, replay the encoder graph, replay the decode graph until every item is done, then
        collect the tokens."""
        graphs = self.graphs.get(batch_size)
        assert graphs.decode_graph is not None and self.stream is not None
        with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
            marks = self._marks()
            if staged is not None:
                copy_staged(graphs.inputs, staged, batch_size, bucket, self._event_after_copies)
            else:
                copy_clips(graphs.inputs, clips, batch_size, bucket)
            graphs.encoder_graphs[bucket].replay()  # type: ignore[no-untyped-call]
            self._mark(marks, 1)
            replay_until_done(
                graphs.decode_graph, graphs.state, graphs.flags, self.stream, bucket, self.config, self.options.chunk_steps
            )
            self._mark(marks, 2)
            results = collect_results(graphs.state, len(clips))
            self._record(marks)
            return results

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
        """The projected encoder frames the last replay of this batch size left in the decode state (host copy)."""
        state = self.graphs.get(batch_size).state
        with self._stream_context():  # type: ignore[attr-defined]
            return state.enc_proj[:, :frames].float().cpu()

    def _event_after_copies(self) -> Optional[torch.cuda.Event]:
        """On CUDA an event recorded on the instance's stream (after the copies enqueued so far); on the
        CPU None (copies there are done when they return)."""
        if not self.is_cuda:
            return None
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record(self.stream)  # type: ignore[no-untyped-call]
        return event

    # ---------------------------------------------------------------- phase timings (benchmarks)
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

    def close(self) -> None:
        """Frees the graphs and buffers."""
        self.graphs.clear()
        if self.is_cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


def elapsed_ms(start: float) -> int:
    return int(round((time.perf_counter() - start) * 1000))
