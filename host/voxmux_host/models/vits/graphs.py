"""CUDA graphs of the decoder window: one graph per batch size, all voices.

Graphs bake in the addresses of the weights they read, and voices come and go. Rather than capture per
resident voice (memory and capture time per voice, recapture on every load), one set of graphs reads the
decoder weights from a static buffer (``dec`` only, 1.66 M parameters for medium, in the compute dtype):
before a replay the voice's decoder range of its flat fp32 weights is copied into it (one copy kernel,
casting on the way; about 3 MB in bf16). Inputs are static buffers too: windows are padded to the fixed
window shape and masked (generator.py), and a batch is padded to the next captured batch size."""
from __future__ import annotations

from typing import Dict, List, Sequence

import torch

from .checkpoint import Layout, bind
from .config import VitsConfig
from .synthesizer import SynthesizerTrn


class DecoderGraphs:
    def __init__(self, template: SynthesizerTrn, layout: Layout, config: VitsConfig, *, device: torch.device,
                 dtype: torch.dtype, frames: int, batch_sizes: Sequence[int]) -> None:
        lo, hi = layout.dec_range
        self._range = (lo, hi)
        self._dtype = dtype
        self.batch_sizes: List[int] = sorted(set(int(b) for b in batch_sizes))
        self.max_batch = self.batch_sizes[-1]
        self._weights = torch.zeros(hi - lo, dtype=dtype, device=device)
        self._dec = bind(template, self._weights, layout, prefix='dec.')
        self._z = torch.zeros(self.max_batch, config.inter_channels, frames, dtype=dtype, device=device)
        self._mask = torch.zeros(self.max_batch, 1, frames, dtype=dtype, device=device)
        self._out: Dict[int, torch.Tensor] = {}
        self._graphs: Dict[int, torch.cuda.CUDAGraph] = {}
        self.replays = 0

    def capture(self) -> int:
        """Capture one graph per batch size (each shape run twice first on a side stream)."""
        pool = torch.cuda.graph_pool_handle()  # type: ignore[no-untyped-call]
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())  # type: ignore[no-untyped-call]
        with torch.no_grad():
            with torch.cuda.stream(side):  # type: ignore[arg-type]
                for b in self.batch_sizes:
                    for _ in range(2):
                        self._dec(self._z[:b], self._mask[:b])
            torch.cuda.current_stream().wait_stream(side)  # type: ignore[no-untyped-call]
            for b in self.batch_sizes:
                graph = torch.cuda.CUDAGraph()  # type: ignore[no-untyped-call]
                with torch.cuda.graph(graph, pool=pool):  # type: ignore[no-untyped-call]
                    self._out[b] = self._dec(self._z[:b], self._mask[:b])[:, 0]
                self._graphs[b] = graph
        torch.cuda.synchronize()
        return len(self._graphs)

    def decode(self, flat: torch.Tensor, z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """z [b, inter, frames] and mask [b, 1, frames] (b <= max_batch) with the voice whose flat fp32 weights
        are ``flat`` -> audio [b, frames * hop], float32."""
        b = z.shape[0]
        size = next(s for s in self.batch_sizes if s >= b)
        lo, hi = self._range
        self._weights.copy_(flat[lo:hi])
        self._z[:size].zero_()
        self._mask[:size].zero_()
        self._z[:b].copy_(z)
        self._mask[:b].copy_(mask)
        self._graphs[size].replay()  # type: ignore[no-untyped-call]
        self.replays += 1
        return self._out[size][:b].float().clone()
