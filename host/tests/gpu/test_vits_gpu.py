"""The vits adapter on CUDA with the medium config: graph replay against eager decoding, windowed against
whole decoding, bf16/fp16, same-voice batching through the graphs, pinned host copies and the device
memory of resident voices against the budget. Skipped without CUDA."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
import torch

from voxmux_host.model_api import LoadContext, StreamPiece, StreamRequest
from voxmux_host.models.vits.adapter import VitsAdapter
from voxmux_host.models.vits.checkpoint import layout_of, skeleton
from voxmux_host.models.vits.config import MEDIUM
from voxmux_host.models.vits.windows import plan_windows

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')

VOICE_BYTES = layout_of(skeleton(MEDIUM)).bytes_fp32
TEXT = ['The quick brown fox jumps over the lazy dog, and keeps on running for quite a while longer.',
        'Then it stops.']
# Reduced-precision decoding: a window decoded by a graph and eagerly runs the same kernels on the same
# shapes, but the audio of different batch sizes may use other algorithms: allow a few bf16 ulps of a
# signal whose peak is about 0.5 (int16 values).
PCM_TOLERANCE = {'fp32': 2, 'fp16': 200, 'bf16': 800}


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp('vits-medium-voices')


def make_adapter(cache_dir: Path, **options: Any) -> VitsAdapter:
    adapter = VitsAdapter()
    base: Dict[str, Any] = {'config': 'medium', 'randomVoices': 6, 'voiceCacheDir': str(cache_dir),
                            'phonemizer': 'text', 'device': 'cuda'}
    base.update(options)
    adapter.load(LoadContext('i-0', 'vits-gpu', base))
    adapter.warmup()
    return adapter


def stream(adapter: VitsAdapter, voice: str, sentences: List[str], seed: int = 0) -> Iterator[StreamPiece]:
    if voice not in [info.name for info in adapter.resources()]:
        adapter.load_resource(voice, 'voice', {})
    return adapter.open_stream(StreamRequest('s', 'r', voice, {'sentences': sentences, 'voice': voice, 'seed': seed}, b''))


def pcm(pieces: List[StreamPiece]) -> 'np.ndarray[Any, np.dtype[Any]]':
    return np.frombuffer(b''.join(p.data for p in pieces), dtype='<i2').astype(np.int32)


def test_windowed_decoding_equals_whole_decoding_on_cuda_fp32(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, dtype='fp32', cudaGraphs=False)
    adapter.load_resource('vits-0', 'voice', {})
    residency = adapter._residency
    assert residency is not None
    voice = residency.value('vits-0')
    assert voice is not None
    z = torch.randn(1, MEDIUM.inter_channels, 300, generator=torch.Generator().manual_seed(0)).cuda()
    windows = plan_windows(300)
    hop = MEDIUM.hop_samples
    with torch.no_grad():
        whole = voice.model.decode(z)[0]
        batch = torch.zeros(len(windows), MEDIUM.inter_channels, 65, device='cuda')
        mask = torch.zeros(len(windows), 1, 65, device='cuda')
        for row, w in enumerate(windows):
            batch[row, :, :w.frames] = z[0, :, w.start:w.end]
            mask[row, :, :w.frames] = 1
        decoded = voice.model.decode(batch, mask)
    windowed = torch.cat([decoded[row, w.keep_start * hop:w.keep_end * hop] for row, w in enumerate(windows)])
    assert float((windowed - whole).abs().max()) < 1e-3


@pytest.mark.parametrize('dtype', ['bf16', 'fp16', 'fp32'])
def test_graph_replay_matches_eager_decoding(cache_dir: Path, dtype: str) -> None:
    graphs = make_adapter(cache_dir, dtype=dtype, cudaGraphs=True)
    eager = make_adapter(cache_dir, dtype=dtype, cudaGraphs=False)
    assert graphs._graphs is not None and graphs._graphs.batch_sizes == [1, 2, 4, 8]
    with_graphs = pcm(list(stream(graphs, 'vits-1', TEXT)))
    without = pcm(list(stream(eager, 'vits-1', TEXT)))
    assert graphs.stats().graph_replays > 0 and graphs.stats().eager_batches == 0
    assert eager.stats().graph_replays == 0 and eager.stats().eager_batches > 0
    assert with_graphs.shape == without.shape
    assert int(np.abs(with_graphs - without).max()) <= PCM_TOLERANCE[dtype]
    assert int(np.abs(with_graphs).max()) > 1000


def test_same_voice_streams_share_graph_replays_and_keep_their_audio(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    alone = [pcm(list(stream(adapter, 'vits-2', TEXT, seed=s))) for s in range(4)]
    before = adapter.stats().graph_replays
    generators = {s: stream(adapter, 'vits-2', TEXT, seed=s) for s in range(4)}
    outputs: Dict[int, List[StreamPiece]] = {s: [] for s in generators}
    while generators:
        for s, generator in list(generators.items()):
            try:
                outputs[s].append(next(generator))
            except StopIteration:
                del generators[s]
    replays = adapter.stats().graph_replays - before
    windows = sum(len(pieces) for pieces in outputs.values())
    assert replays < 0.6 * windows  # 16 forwards for 42 windows with the tiny config on the CPU
    for s in outputs:
        together = pcm(outputs[s])
        assert together.shape == alone[s].shape
        assert int(np.abs(together - alone[s]).max()) <= PCM_TOLERANCE['bf16']


def test_first_chunk_comes_fast_and_synthesis_runs_faster_than_real_time(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, preloadVoices=['vits-3'])
    list(stream(adapter, 'vits-3', TEXT))  # warm the encoder's shapes
    torch.cuda.synchronize()
    start = time.perf_counter()
    generator = stream(adapter, 'vits-3', TEXT, seed=5)
    first = next(generator)
    first_ms = (time.perf_counter() - start) * 1000
    rest = list(generator)
    total_s = time.perf_counter() - start
    audio_s = sum(len(p.data) for p in [first, *rest]) / 2 / 22050
    print(f'first chunk {first_ms:.1f} ms, {audio_s:.2f} s of audio in {total_s * 1000:.1f} ms')
    assert first_ms < 250
    assert total_s < audio_s / 5


def test_resident_voices_stay_within_the_budget_and_host_copies_are_pinned(cache_dir: Path) -> None:
    torch.cuda.synchronize()
    adapter = make_adapter(cache_dir, residentBudgetBytes=3 * VOICE_BYTES, hostBudgetBytes=None)
    base = torch.cuda.memory_allocated()
    sequence = ['vits-0', 'vits-1', 'vits-2', 'vits-3', 'vits-0', 'vits-4', 'vits-5', 'vits-1', 'vits-2']
    peak = 0
    for voice in sequence:
        list(stream(adapter, voice, ['Hi there.']))
        torch.cuda.synchronize()
        peak = max(peak, torch.cuda.memory_allocated() - base)
    counters = adapter.resource_counters()
    # Disk: the first use of each of the six voices; later misses come from the host copies.
    assert counters['loadsFromDisk'] == 6
    assert counters['loadsFromHost'] == 3  # vits-0, vits-1, vits-2 again, after eviction
    assert counters['misses'] == 9 and counters['hits'] == 0
    assert counters['evictions'] == 6
    assert counters['residentBytes'] == 3 * VOICE_BYTES
    # Device memory: the voices on the device plus the activations of one sentence (not a fourth voice).
    assert peak <= 3 * VOICE_BYTES + VOICE_BYTES // 2, (peak, VOICE_BYTES)
    host_ms = counters['hostLoadMs'] / counters['loadsFromHost']
    disk_ms = counters['diskLoadMs'] / counters['loadsFromDisk']
    print(f'load from disk {disk_ms:.1f} ms, from host {host_ms:.1f} ms a voice')
    assert host_ms < disk_ms
    residency = adapter._residency
    assert residency is not None
    assert all(t.is_pinned() for t in residency._host.values())


def timed_loads(adapter: VitsAdapter, names: List[str]) -> List[Tuple[str, int]]:
    return [(load.source, load.load_ms) for load in (adapter.load_resource(n, 'voice', {}) for n in names)]


def test_a_one_voice_budget_without_host_copies_reads_the_disk_on_every_change(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES, hostBudgetBytes=0)
    loads = timed_loads(adapter, ['vits-0', 'vits-1', 'vits-0', 'vits-0'])
    assert [source for source, _ in loads] == ['disk', 'disk', 'disk', 'resident']
    assert adapter.resource_counters()['loadsFromHost'] == 0
