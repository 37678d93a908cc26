"""CUDA graphs of the runner, keyed by (batch size, length bucket), and the plan that picks them.

Captured in :meth:`GraphCache.capture` (the adapter's warmup) and never later, per batch size:

- one *encoder graph* per length bucket: front end, encoder, ``joint.enc`` projection, and the reset of
  the decode state (SOS through the prediction network);
- one *decode graph*: one decode chunk (decode_loop.py).

A batch is padded to the smallest bucket that holds its longest clip and to the smallest captured batch
size that holds it (padding rows have length 0 and never decode); :meth:`GraphCache.plan` splits a batch
into such sub-batches, and sends what no graph fits to the eager path. Graphs exchange data only through
tensors allocated outside them: the static inputs (staging.py) and the decode state. All graphs share
one memory pool: they run one at a time, on one stream, so no graph's temporaries can overlap another's
live data.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import torch

from .config import ParakeetConfig, encoder_frames, feature_tensor_frames
from .decode_loop import ReplayFlags, capture_decode_graph, graph_kwargs
from .decoder import DecodeState
from .model import ParakeetModel
from .staging import Plan, StaticInputs

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


@dataclass
class BatchGraphs:
    """The graphs of one batch size and the tensors they read and write."""

    inputs: StaticInputs
    state: DecodeState
    flags: ReplayFlags
    encoder_graphs: Dict[int, torch.cuda.CUDAGraph] = field(default_factory=dict)  # bucket samples -> graph
    decode_graph: Optional[torch.cuda.CUDAGraph] = None


class GraphCache:
    """The graphs for every (batch size, bucket) of the options, on the instance's ``stream``."""

    def __init__(
        self,
        model: ParakeetModel,
        device: torch.device,
        stream: Optional[torch.cuda.Stream],
        batch_sizes: Sequence[int],
        bucket_durations_ms: Sequence[int],
        chunk_steps: int,
        cudnn_benchmark: bool,
    ) -> None:
        self.model = model
        self.config = model.config
        self.device = device
        self.stream = stream
        self.chunk_steps = chunk_steps
        self.cudnn_benchmark = cudnn_benchmark
        self.buckets: Tuple[int, ...] = tuple(sorted({bucket_samples_for(ms, self.config) for ms in bucket_durations_ms}))
        self.batch_sizes: Tuple[int, ...] = tuple(sorted(set(batch_sizes)))
        self.graphs_captured = 0
        self.pool_bytes = 0
        #: Every graph shape has run once (prepare); the graphs themselves exist once capture has run.
        self.is_prepared = False
        self.has_graphs = False
        self._by_batch_size: Dict[int, BatchGraphs] = {}

    # ---------------------------------------------------------------- plan
    def plan(self, lengths: Sequence[int]) -> Plan:
        """Split items (by index) into sub-batches; each gets (batch size, bucket) if a graph fits, else None.

        Items are grouped by length so that a split batch pads as little as possible.
        """
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        graphs_ready = self.has_graphs
        max_batch = self.batch_sizes[-1] if self.batch_sizes else max(1, len(lengths))
        max_bucket = self.buckets[-1] if self.buckets else 0
        fitting = [i for i in order if graphs_ready and lengths[i] <= max_bucket]
        others = [i for i in order if not (graphs_ready and lengths[i] <= max_bucket)]
        groups: Plan = []
        for start in range(0, len(fitting), max_batch):
            group = fitting[start : start + max_batch]
            batch_size = next(b for b in self.batch_sizes if b >= len(group))
            bucket = next(s for s in self.buckets if s >= max(lengths[i] for i in group))
            groups.append((group, (batch_size, bucket)))
        for start in range(0, len(others), max_batch):
            groups.append((others[start : start + max_batch], None))
        return groups

    def get(self, batch_size: int) -> BatchGraphs:
        """The graphs of a batch size (allocated on first use)."""
        graphs = self._by_batch_size.get(batch_size)
        if graphs is None:
            graphs = self._allocate(batch_size)
            self._by_batch_size[batch_size] = graphs
        return graphs

    # ---------------------------------------------------------------- warmup
    def prepare(self) -> None:
        """Run every graph shape twice without capturing anything (compilation, cuDNN timing, lazy
        initialisation). A no-op the second time. CUDA only."""
        if self.is_prepared:
            return
        assert self.stream is not None
        was_benchmark = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        try:
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                self.model.greedy.prepare(self.device)
                for batch_size in self.batch_sizes:
                    graphs = self.get(batch_size)
                    for bucket in self.buckets:
                        graphs.inputs.fill_for_warmup(bucket)
                        for _ in range(2):
                            self.encoder_body(graphs, bucket)
                    for _ in range(2):
                        self.model.decode_steps_(graphs.state, self.chunk_steps)
            torch.cuda.synchronize(self.device)
        finally:
            torch.backends.cudnn.benchmark = was_benchmark
        self.is_prepared = True

    def capture(self) -> int:
        """Capture every graph (after :meth:`prepare`, which it runs if need be). Returns the number
        of graphs captured. The caller keeps other threads from launching work meanwhile."""
        assert self.stream is not None
        self.prepare()
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_reserved(self.device)
        pool = torch.cuda.graph_pool_handle()  # type: ignore[no-untyped-call]
        was_benchmark = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        try:
            with torch.inference_mode(), torch.cuda.stream(self.stream):  # type: ignore[no-untyped-call]
                for batch_size in self.batch_sizes:
                    graphs = self.get(batch_size)
                    for bucket in self.buckets:
                        self._capture_encoder(graphs, bucket, pool)
                    graphs.decode_graph = capture_decode_graph(
                        self.model, graphs.state, self.chunk_steps, self.stream, pool
                    )
                    self.graphs_captured += 1
            torch.cuda.synchronize(self.device)
        finally:
            torch.backends.cudnn.benchmark = was_benchmark
        self.pool_bytes = max(0, torch.cuda.memory_reserved(self.device) - before)
        self.has_graphs = True
        return self.graphs_captured

    def encoder_body(self, graphs: BatchGraphs, bucket: int) -> None:
        """What an encoder graph holds: encoder and projection of the static inputs, decode state reset."""
        enc_proj, enc_len = self.model.encode_projected(graphs.inputs.audio[:, :bucket], graphs.inputs.lengths)
        self.model.load_encoded_(graphs.state, enc_proj, enc_len)

    def clear(self) -> None:
        """Drop every graph and buffer."""
        self._by_batch_size.clear()
        self.has_graphs = False

    def _capture_encoder(self, graphs: BatchGraphs, bucket: int, pool: object) -> None:
        graphs.inputs.fill_for_warmup(bucket)
        for _ in range(2):
            self.encoder_body(graphs, bucket)
        self.stream.synchronize()  # type: ignore[union-attr]
        graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
        with torch.cuda.graph(graph, pool=pool, stream=self.stream, **graph_kwargs()):  # type: ignore[arg-type, no-untyped-call]
            self.encoder_body(graphs, bucket)
        graphs.encoder_graphs[bucket] = graph
        self.graphs_captured += 1

    def _allocate(self, batch_size: int) -> BatchGraphs:
        max_samples = self.buckets[-1]
        max_frames = encoder_frames(feature_tensor_frames(max_samples, self.config), self.config)
        inputs = StaticInputs.allocate(batch_size, max_samples, self.device)
        state = self.model.new_decode_state(batch_size, max_frames)
        return BatchGraphs(inputs=inputs, state=state, flags=ReplayFlags.allocate())
