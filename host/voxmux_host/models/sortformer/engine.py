"""Runs streaming steps for many sessions: plans each session's next step from the audio it has, runs
the steps of different sessions together as one batch (through a CUDA graph where one was captured, else
eagerly), and applies each item's cache and FIFO update. :meth:`StepEngine.begin` runs every step but
leaves the updates of the last round to :meth:`PendingSteps.finish`, which the host calls on another
thread while the next batch's steps run.

Step geometry (NeMo's ``streaming_feat_loader``), in mel frames, for step k with chunk C, left context
lc and right context rc (diarization frames, x8 mel frames): the core is ``[8 C k, 8 C (k + 1))``
clipped at the recording's end; the window adds ``min(8 lc, start)`` frames before and ``min(8 rc,
frames left)`` after. A step runs once its window's last frame can be computed; at the end of the
recording every remaining step runs, with the right context clipped.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import ContextManager, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from .cache import SpeakerContext, compress_contexts, update_context
from .config import SortformerConfig, StreamingParams
from .features import first_needed_sample, log_mel, ready_frames, window_samples, window_span
from .model import SortformerModel
from .session import SessionState


@dataclass(frozen=True)
class StepWindow:
    """One planned step: its mel-frame window and its left/right context in diarization frames."""

    first_frame: int  # first mel frame of the window (core start minus left context)
    end_frame: int  # one past the window's last mel frame
    left: int  # diarization frames of left context
    right: int  # diarization frames of right context
    core_limit: int  # at most this many core frames (the chunk length)


def plan_step(state: SessionState, config: SortformerConfig, params: StreamingParams) -> Optional[StepWindow]:
    """The session's next step if its audio allows one now, else None."""
    factor = config.subsampling_factor
    start = state.steps * params.chunk_len * factor
    ready = ready_frames(state.samples, config.hop_length, config.n_fft, state.finished)
    if state.finished:
        total = ready
        if start >= total:
            return None
        end = min(start + params.chunk_len * factor, total)
        right = min(params.right_context * factor, total - end)
    else:
        end = start + params.chunk_len * factor
        right = params.right_context * factor
        if end + right > ready:
            return None
    left = min(params.left_context * factor, start)
    return StepWindow(first_frame=start - left, end_frame=end + right, left=left // factor,
                      right=-(-right // factor), core_limit=params.chunk_len)


def autocast_context(device: torch.device, dtype: Optional[torch.dtype]) -> ContextManager[object]:
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=False)


@dataclass
class StepBatchInputs:
    """A batch's inputs on the device (eager: sized to the batch; graphs: the static tensors)."""

    feats: torch.Tensor
    feat_lengths: torch.Tensor
    context: torch.Tensor
    context_lengths: torch.Tensor


@dataclass
class _Graph:
    inputs: StepBatchInputs
    graph: "torch.cuda.CUDAGraph"
    outputs: Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass
class EngineCounters:
    """Updated on the host's main and finisher threads, read on the heartbeat thread: under ``lock``."""

    steps: int = 0
    eager_batches: int = 0
    graph_replays: int = 0
    largest_batch: int = 0
    #: Cumulative milliseconds by stage of a step (``stage_ms``: the adapter adds its own around it).
    stage_ms: Dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_ms(self, stage: str, since_s: float) -> float:
        """Adds the time from ``since_s`` (time.perf_counter) to now to ``stage``; returns now."""
        now = time.perf_counter()
        with self.lock:
            self.stage_ms[stage] = self.stage_ms.get(stage, 0.0) + (now - since_s) * 1000
        return now

    def stage_ms_copy(self) -> Dict[str, float]:
        with self.lock:
            return dict(self.stage_ms)

    def add_steps(self, batch_size: int) -> None:
        with self.lock:
            self.steps += batch_size
            self.largest_batch = max(self.largest_batch, batch_size)


@dataclass
class _StepOutputs:
    """A batch's forward pass, on the host: predictions, chunk embeddings and lengths."""

    preds: torch.Tensor  # [B, T, S] float32
    chunk: torch.Tensor  # [B, Tc, D] in the storage dtype
    chunk_lengths: List[int]
    context_lengths: List[int]


@dataclass
class _Group:
    """One batch of steps: the sessions (by index into the call's states), their windows, their outputs."""

    indices: List[int]
    windows: List[StepWindow]
    outputs: _StepOutputs


class PendingSteps:
    """What :meth:`StepEngine.begin` leaves: the cache updates of its last round of steps."""

    def __init__(self, engine: "StepEngine", states: Sequence[SessionState],
                 predictions: List[List[npt.NDArray[np.float32]]], groups: List[_Group]) -> None:
        self._engine = engine
        self._states = states
        self._predictions = predictions
        self._groups = groups

    def finish(self) -> List[List[npt.NDArray[np.float32]]]:
        """Applies the updates (each state in place); per session, the core predictions of each step run."""
        for group in self._groups:
            states = [self._states[i] for i in group.indices]
            for i, preds in zip(group.indices, self._engine.apply(states, group.windows, group.outputs)):
                self._predictions[i].append(preds)
        self._groups = []
        return self._predictions


class StepEngine:
    def __init__(self, model: SortformerModel, params: StreamingParams, device: torch.device,
                 max_batch_size: int, storage_dtype: torch.dtype) -> None:
        self.model = model
        self.config = model.config
        self.params = params
        self.device = device
        self.max_batch_size = max_batch_size
        self.storage_dtype = storage_dtype
        self.counters = EngineCounters()
        self.stream: Optional[torch.cuda.Stream] = None
        self._graphs: Dict[int, _Graph] = {}
        self.graph_batch_sizes: Tuple[int, ...] = ()
        # Host staging (pinned on CUDA, so the copies to the device are asynchronous): each item's window
        # of raw samples, and its packed context. Rows beyond an item's lengths are never read unmasked.
        pin = device.type == "cuda"
        cfg = self.config
        lo, hi = window_span(0, self.window_feat_frames, cfg.hop_length, cfg.n_fft)
        self._audio_stage = torch.zeros(max_batch_size, hi - lo + 1, dtype=torch.int16, pin_memory=pin)
        self._context_stage = torch.zeros(max_batch_size, self.context_frames, cfg.fc_d_model, dtype=storage_dtype,
                                          pin_memory=pin)

    # ------------------------------------------------------------------ shapes
    @property
    def window_feat_frames(self) -> int:
        return self.params.chunk_window_frames * self.config.subsampling_factor

    @property
    def context_frames(self) -> int:
        return self.params.context_frames

    # ------------------------------------------------------------------ steps
    def run(self, states: Sequence[SessionState]) -> List[List[npt.NDArray[np.float32]]]:
        """Run every step the sessions' audio allows, in rounds (each round at most one step per session,
        batched); returns, per session, the core predictions [n, speakers] of each step run."""
        return self.begin(states).finish()

    def begin(self, states: Sequence[SessionState]) -> PendingSteps:
        """:meth:`run` up to the updates of the last round: every forward pass runs here (a round after
        which no session can step again is the last), its updates wait for :meth:`PendingSteps.finish`."""
        out: List[List[npt.NDArray[np.float32]]] = [[] for _ in states]
        while True:
            planned = [(i, w) for i, w in ((i, plan_step(s, self.config, self.params)) for i, s in enumerate(states))
                       if w is not None]
            if not planned:
                return PendingSteps(self, states, out, [])
            is_last = not any(self._can_step_after(states[i]) for i, _ in planned)
            deferred: List[_Group] = []
            for start in range(0, len(planned), self.max_batch_size):
                group = planned[start : start + self.max_batch_size]
                indices, windows = [i for i, _ in group], [w for _, w in group]
                outputs = self.forward([states[i] for i in indices], windows)
                if is_last:
                    deferred.append(_Group(indices, windows, outputs))
                    continue
                for i, preds in zip(indices, self.apply([states[i] for i in indices], windows, outputs)):
                    out[i].append(preds)
            if is_last:
                return PendingSteps(self, states, out, deferred)

    def _can_step_after(self, state: SessionState) -> bool:
        """Whether the session's audio allows another step once its planned one has run."""
        return plan_step(dataclasses.replace(state, steps=state.steps + 1), self.config, self.params) is not None

    def forward(self, states: Sequence[SessionState], windows: Sequence[StepWindow]) -> _StepOutputs:
        """Stage the batch's audio windows and contexts and run its forward pass (main thread)."""
        cfg = self.config
        mark = time.perf_counter()
        audio = self._audio_stage.numpy()
        valid = [
            window_samples(audio[b], s.pending, s.pending_start, s.samples, w.first_frame, w.end_frame,
                           cfg.hop_length, cfg.n_fft)
            for b, (s, w) in enumerate(zip(states, windows))
        ]
        frames = [w.end_frame - w.first_frame for w in windows]
        context_lengths = []
        for b, state in enumerate(states):
            n_cache, n_fifo = state.context.spkcache.shape[0], state.context.fifo.shape[0]
            self._context_stage[b, :n_cache].copy_(state.context.spkcache)
            self._context_stage[b, n_cache : n_cache + n_fifo].copy_(state.context.fifo)
            context_lengths.append(n_cache + n_fifo)
        mark = self.counters.add_ms("stage", mark)
        preds, chunk, chunk_lengths = self._forward(valid, frames, context_lengths)
        self.counters.add_ms("forward", mark)
        return _StepOutputs(preds, chunk, chunk_lengths, context_lengths)

    def apply(self, states: Sequence[SessionState], windows: Sequence[StepWindow],
              outputs: _StepOutputs) -> List[npt.NDArray[np.float32]]:
        """Each item's cache and FIFO update from the batch's forward pass (any thread, one batch at a time
        per session); updates each state in place; returns each item's core predictions."""
        mark = time.perf_counter()
        preds, chunk, chunk_lengths = outputs.preds, outputs.chunk, outputs.chunk_lengths
        results: List[npt.NDArray[np.float32]] = []
        for b, (state, window) in enumerate(zip(states, windows)):
            core = max(0, min(int(chunk_lengths[b]) - window.left - window.right, window.core_limit))
            ctx_len = outputs.context_lengths[b]
            total = ctx_len + int(chunk_lengths[b])
            state.context, chunk_preds = update_context(
                state.context, preds[b, :total], chunk[b, : int(chunk_lengths[b])], window.left, core, self.params,
                compress=False,
            )
            state.steps += 1
            state.frames += core
            self._trim_pending(state)
            results.append(chunk_preds.numpy())
        for state, context in zip(states, compress_contexts([s.context for s in states], self.params)):
            state.context = context
        self.counters.add_ms("update", mark)
        self.counters.add_steps(len(states))
        return results

    def _trim_pending(self, state: SessionState) -> None:
        factor = self.config.subsampling_factor
        next_first = max(0, (state.steps * self.params.chunk_len - self.params.left_context) * factor)
        keep_from = first_needed_sample(next_first, self.config.hop_length, self.config.n_fft)
        drop = min(max(0, keep_from - state.pending_start), state.pending.shape[0])
        if drop:
            state.pending = state.pending[drop:].copy()
            state.pending_start += drop

    def _forward(
        self, valid: List[int], frames: List[int], context_lengths: List[int]
    ) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
        """The batch's forward pass from the staged audio windows and contexts: (preds [B, T, S] float32
        CPU, chunk embeddings [B, Tc, D] CPU in the storage dtype, chunk lengths)."""
        featurizer = self.model.preprocessor.featurizer
        b = len(valid)
        graph_size = next((g for g in self.graph_batch_sizes if g >= b), None)
        with torch.inference_mode(), self._stream_context():  # type: ignore[no-untyped-call]
            feats, feat_lengths = log_mel(featurizer, self._audio_stage[:b], valid, frames, self.device)
            lengths_host = torch.tensor(context_lengths, dtype=torch.int64)
            if graph_size is not None:
                graph = self._graphs[graph_size]
                inputs = graph.inputs
                t = feats.shape[1]
                inputs.feats[:b, :t].copy_(feats)
                inputs.feats[:b, t:].zero_()
                inputs.feat_lengths.zero_()
                inputs.feat_lengths[:b].copy_(feat_lengths)
                inputs.context[:b].copy_(self._context_stage[:b], non_blocking=True)
                inputs.context_lengths.zero_()
                inputs.context_lengths[:b].copy_(lengths_host, non_blocking=True)
                graph.graph.replay()  # type: ignore[no-untyped-call]
                preds, chunk, chunk_lengths = (t_[:b] for t_ in graph.outputs)
                self.counters.graph_replays += 1
            else:
                width = max(context_lengths)
                context = self._context_stage[:b, :width].to(self.device)
                with autocast_context(self.device, self.model.compute_dtype):
                    preds, chunk, chunk_lengths = self.model.forward_step(
                        feats, feat_lengths, context, lengths_host.to(self.device))
                self.counters.eager_batches += 1
            preds_host = preds.float().cpu()
            chunk_host = chunk.to(self.storage_dtype).cpu()
            lengths = [int(x) for x in chunk_lengths.cpu()]
        return preds_host, chunk_host, lengths

    def _stream_context(self) -> ContextManager[object]:
        if self.stream is None:
            return contextlib.nullcontext()
        return torch.cuda.stream(self.stream)  # type: ignore[no-untyped-call,no-any-return]

    # ------------------------------------------------------------------ CUDA graphs
    def capture_graphs(self, batch_sizes: Sequence[int]) -> int:
        """Capture one graph per batch size for the fixed step shape (CUDA only). Returns the count."""
        assert self.device.type == "cuda"
        if self.stream is None:
            self.stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
        pool = torch.cuda.graph_pool_handle()  # type: ignore[no-untyped-call]
        cfg = self.config
        for size in sorted(set(batch_sizes)):
            inputs = StepBatchInputs(
                feats=torch.zeros(size, self.window_feat_frames, cfg.n_mels, device=self.device),
                feat_lengths=torch.full((size,), self.window_feat_frames, dtype=torch.int64, device=self.device),
                context=torch.zeros(size, self.context_frames, cfg.fc_d_model, dtype=self.storage_dtype,
                                    device=self.device),
                context_lengths=torch.full((size,), self.context_frames, dtype=torch.int64, device=self.device),
            )
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                for _ in range(2):
                    with autocast_context(self.device, self.model.compute_dtype):
                        self.model.forward_step(inputs.feats, inputs.feat_lengths, inputs.context,
                                                inputs.context_lengths)
                self.stream.synchronize()  # type: ignore[no-untyped-call]
                graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
                with torch.cuda.graph(graph, pool=pool, stream=self.stream):  # type: ignore[no-untyped-call]
                    with autocast_context(self.device, self.model.compute_dtype):
                        outputs = self.model.forward_step(inputs.feats, inputs.feat_lengths, inputs.context,
                                                          inputs.context_lengths)
            self._graphs[size] = _Graph(inputs=inputs, graph=graph, outputs=outputs)
        torch.cuda.synchronize(self.device)
        self.graph_batch_sizes = tuple(sorted(self._graphs))
        return len(self._graphs)

    def drop_graphs(self) -> None:
        self._graphs.clear()
        self.graph_batch_sizes = ()


def new_context(config: SortformerConfig, storage_dtype: torch.dtype) -> SpeakerContext:
    return SpeakerContext.empty(config.fc_d_model, config.n_speakers, storage_dtype)
