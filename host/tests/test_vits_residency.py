"""Voice residency of the vits adapter on the CPU with the tiny config: a catalogue larger than the budget,
scripted request sequences, and the exact hits, misses, evictions and loads by source."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext, StreamPiece, StreamRequest
from voxmux_host.models.vits.adapter import VitsAdapter
from voxmux_host.models.vits.checkpoint import layout_of, skeleton
from voxmux_host.models.vits.config import TINY
from voxmux_host.models.vits.residency import ResidencyOptions, VoiceResidency

VOICE_BYTES = layout_of(skeleton(TINY)).bytes_fp32


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp('vits-voices')


def make_adapter(cache_dir: Path, **options: Any) -> VitsAdapter:
    adapter = VitsAdapter()
    adapter.load(LoadContext('i-0', 'vits-test', {'config': 'tiny', 'randomVoices': 5, 'voiceCacheDir': str(cache_dir),
                                                  'phonemizer': 'text', **options}))
    adapter.warmup()
    return adapter


def open_request(adapter: VitsAdapter, voice: str, text: str = 'Hi.') -> Iterator[StreamPiece]:
    """What the host does for a stream whose resource is ``voice``: load it by name when it holds no copy
    of it (pipeline._ensure_resource), then open the stream."""
    if voice not in [info.name for info in adapter.resources()]:
        adapter.load_resource(voice, 'voice', {})
    return adapter.open_stream(StreamRequest('s', 'r', voice, {'sentences': [text], 'voice': voice}, b''))


def request(adapter: VitsAdapter, voice: str) -> None:
    for _ in open_request(adapter, voice):
        pass


def counts(adapter: VitsAdapter) -> Dict[str, float]:
    c = adapter.resource_counters()
    return {k: c[k] for k in ('hits', 'misses', 'loadsFromDisk', 'loadsFromHost', 'evictions')}


def listing(adapter: VitsAdapter) -> List[tuple[str, str]]:
    return [(info.name, info.residency) for info in adapter.resources()]


def test_a_request_sequence_larger_than_the_budget_counts_exactly(cache_dir: Path) -> None:
    # Device budget: 2 voices; host copies: 3 voices; catalogue: 5 voices.
    adapter = make_adapter(cache_dir, residentBudgetBytes=2 * VOICE_BYTES, hostBudgetBytes=3 * VOICE_BYTES)
    steps: List[tuple[str, Dict[str, float], List[tuple[str, str]]]] = [
        # voice, counts after it, resident voices after it (device LRU order, then host-only copies)
        ('vits-0', dict(hits=0, misses=1, loadsFromDisk=1, loadsFromHost=0, evictions=0), [('vits-0', 'device')]),
        ('vits-1', dict(hits=0, misses=2, loadsFromDisk=2, loadsFromHost=0, evictions=0),
         [('vits-0', 'device'), ('vits-1', 'device')]),
        ('vits-0', dict(hits=1, misses=2, loadsFromDisk=2, loadsFromHost=0, evictions=0),
         [('vits-1', 'device'), ('vits-0', 'device')]),
        ('vits-2', dict(hits=1, misses=3, loadsFromDisk=3, loadsFromHost=0, evictions=1),
         [('vits-0', 'device'), ('vits-2', 'device'), ('vits-1', 'host')]),
        # vits-1 has a host copy: a copy to the device, no disk read
        ('vits-1', dict(hits=1, misses=4, loadsFromDisk=3, loadsFromHost=1, evictions=2),
         [('vits-2', 'device'), ('vits-1', 'device'), ('vits-0', 'host')]),
        # a fourth host copy drops the least recently used one (vits-0)
        ('vits-3', dict(hits=1, misses=5, loadsFromDisk=4, loadsFromHost=1, evictions=3),
         [('vits-1', 'device'), ('vits-3', 'device'), ('vits-2', 'host')]),
        ('vits-0', dict(hits=1, misses=6, loadsFromDisk=5, loadsFromHost=1, evictions=4),
         [('vits-3', 'device'), ('vits-0', 'device'), ('vits-1', 'host')]),
        ('vits-4', dict(hits=1, misses=7, loadsFromDisk=6, loadsFromHost=1, evictions=5),
         [('vits-0', 'device'), ('vits-4', 'device'), ('vits-3', 'host')]),
        ('vits-1', dict(hits=1, misses=8, loadsFromDisk=7, loadsFromHost=1, evictions=6),
         [('vits-4', 'device'), ('vits-1', 'device'), ('vits-0', 'host')]),
        ('vits-4', dict(hits=2, misses=8, loadsFromDisk=7, loadsFromHost=1, evictions=6),
         [('vits-1', 'device'), ('vits-4', 'device'), ('vits-0', 'host')]),
        ('vits-0', dict(hits=2, misses=9, loadsFromDisk=7, loadsFromHost=2, evictions=7),
         [('vits-4', 'device'), ('vits-0', 'device'), ('vits-1', 'host')]),
    ]
    for index, (voice, expected_counts, expected_listing) in enumerate(steps):
        request(adapter, voice)
        assert counts(adapter) == expected_counts, f'after request {index} ({voice})'
        assert listing(adapter) == expected_listing, f'after request {index} ({voice})'
    counters = adapter.resource_counters()
    assert counters['budgetBytes'] == 2 * VOICE_BYTES
    assert counters['residentBytes'] == 2 * VOICE_BYTES
    assert counters['diskLoadMs'] > 0 and counters['hostLoadMs'] >= 0
    assert adapter.stats().memory_bytes == 2 * VOICE_BYTES
    assert {info.bytes for info in adapter.resources()} == {VOICE_BYTES}


def test_a_one_voice_budget_without_host_copies_reads_the_disk_on_every_voice_change(cache_dir: Path) -> None:
    # The global-lock baseline: every change of voice is a disk load.
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES, hostBudgetBytes=0)
    for voice in ('vits-0', 'vits-1', 'vits-0', 'vits-0', 'vits-2', 'vits-1'):
        request(adapter, voice)
    assert counts(adapter) == dict(hits=1, misses=5, loadsFromDisk=5, loadsFromHost=0, evictions=4)
    assert listing(adapter) == [('vits-1', 'device')]


def test_load_resource_by_name_reports_its_source(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES, hostBudgetBytes=None)
    first = adapter.load_resource('vits-2', 'voice', {})
    assert (first.residency, first.source, first.bytes) == ('device', 'disk', VOICE_BYTES)
    assert adapter.load_resource('vits-2', 'voice', {}).source == 'resident'
    adapter.load_resource('vits-3', 'voice', {})
    assert adapter.load_resource('vits-2', 'voice', {}).source == 'host'
    assert adapter.evict_resource('vits-2') == VOICE_BYTES
    assert adapter.evict_resource('vits-2') == 0
    with pytest.raises(InstanceError) as unknown:
        adapter.load_resource('vits-99', 'voice', {})
    assert unknown.value.code == 'resource_not_found'
    with pytest.raises(InstanceError) as bad_source:
        adapter.load_resource('vits-1', 'voice', {'path': '/tmp/x.pt'})
    assert bad_source.value.code == 'unsupported_option'


def test_preloaded_voices_count_as_loads_but_neither_hits_nor_misses(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, preloadVoices=['vits-0', 'vits-1'])
    assert counts(adapter) == dict(hits=0, misses=0, loadsFromDisk=2, loadsFromHost=0, evictions=0)
    request(adapter, 'vits-1')
    assert counts(adapter) == dict(hits=1, misses=0, loadsFromDisk=2, loadsFromHost=0, evictions=0)


def test_a_voice_larger_than_the_budget_is_out_of_memory(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES - 1)
    with pytest.raises(InstanceError) as caught:
        adapter.load_resource('vits-0', 'voice', {})
    assert caught.value.code == 'out_of_memory'
    assert 'residentBudgetBytes' in caught.value.message


def test_a_voice_in_use_is_not_evicted(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES)
    first = open_request(adapter, 'vits-0', 'A sentence long enough to take a few windows of audio to speak.')
    next(first)
    assert adapter.evict_resource('vits-0') == 0
    with pytest.raises(InstanceError) as caught:
        next(open_request(adapter, 'vits-1'))
    assert caught.value.code == 'out_of_memory' and 'vits-0' in caught.value.message
    for _ in first:
        pass
    request(adapter, 'vits-1')
    assert listing(adapter) == [('vits-1', 'device'), ('vits-0', 'host')]


def test_a_stream_holds_its_voice_from_its_open_not_from_its_first_piece(cache_dir: Path) -> None:
    # One voice of budget. Between a stream's open and its first piece the host opens other streams: their
    # loads must not evict the voice of the stream opened first (a reload, or out_of_memory at its first
    # piece once the other voice is in use); the later stream is refused at its own open instead.
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES, hostBudgetBytes=0)
    first = open_request(adapter, 'vits-0')
    assert adapter.evict_resource('vits-0') == 0  # held by the open stream
    with pytest.raises(InstanceError) as by_resource:
        open_request(adapter, 'vits-1')  # the host's load of the stream's resource
    assert by_resource.value.code == 'out_of_memory' and 'vits-0' in by_resource.value.message
    with pytest.raises(InstanceError) as by_param:  # a stream that names its voice in params only
        adapter.open_stream(StreamRequest('s2', 'r2', None, {'sentences': ['Hi.'], 'voice': 'vits-1'}, b''))
    assert by_param.value.code == 'out_of_memory' and 'vits-0' in by_param.value.message
    assert [piece.meta['sentence'] for piece in first] == [0]
    assert counts(adapter) == dict(hits=0, misses=1, loadsFromDisk=1, loadsFromHost=0, evictions=0)
    request(adapter, 'vits-1')  # released at its end
    assert listing(adapter) == [('vits-1', 'device')]


def test_a_stream_ended_before_its_first_piece_releases_its_voice(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES)
    closed = open_request(adapter, 'vits-0')
    closed.close()  # type: ignore[attr-defined]  # the host closes a stream cancelled before its first step
    assert adapter.evict_resource('vits-0') == VOICE_BYTES
    stream = StreamRequest('s', 'r', 'vits-1', {'sentences': ['Hi.'], 'voice': 'vits-1'}, b'')
    adapter.load_resource('vits-1', 'voice', {})
    cancelled = adapter.open_stream(stream)
    stream.cancelled.set()
    with pytest.raises(StopIteration):
        next(cancelled)
    assert adapter.evict_resource('vits-1') == VOICE_BYTES
    assert adapter.resource_counters()['residentBytes'] == 0


def test_a_stream_that_fails_releases_its_voice(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = make_adapter(cache_dir, residentBudgetBytes=VOICE_BYTES)
    failing = open_request(adapter, 'vits-0')

    def fail(text: str, spec: Any) -> torch.Tensor:
        raise RuntimeError('phonemizer failed')

    monkeypatch.setattr(adapter, '_ids', fail)
    with pytest.raises(RuntimeError):
        next(failing)
    assert adapter.evict_resource('vits-0') == VOICE_BYTES


def test_load_times_are_counted_by_source_on_an_injected_clock() -> None:
    now = [0.0]
    copies: List[str] = []

    def read_disk(name: str) -> torch.Tensor:
        now[0] += 40.0
        return torch.zeros(25)  # 100 bytes

    def to_device(flat: torch.Tensor) -> str:
        now[0] += 3.0
        copies.append('device')
        return 'resident'

    residency: VoiceResidency[str] = VoiceResidency(
        ResidencyOptions(budget_bytes=100, host_budget_bytes=1000), voice_bytes=lambda name: 100,
        read_disk=read_disk, to_host=lambda flat: flat.clone(), to_device=to_device, clock_ms=lambda: now[0])
    assert residency.load('a') == ('disk', 100, 43)
    assert residency.use('a') == 'resident'
    residency.release('a')
    assert residency.load('b') == ('disk', 100, 43)
    assert residency.load('a') == ('host', 100, 3)
    counters = residency.counters()
    assert (counters['diskLoadMs'], counters['hostLoadMs']) == (86.0, 3.0)
    assert (counters['loadsFromDisk'], counters['loadsFromHost'], counters['evictions']) == (2, 1, 2)
    assert (counters['misses'], counters['hits']) == (1, 0)
    assert residency.listing() == [('a', 'device', 100), ('b', 'host', 100)]
