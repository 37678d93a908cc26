"""The vits adapter in an instance process, end to end over real sockets (tiny config, CPU): a voice loaded
by name, a stream of windows with its usage, residency in heartbeats, a stream whose voice is unknown, and a
stream that holds its voice from its start at a full residency budget."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from host_process import HostProcess, host_argv
from voxmux_host.messages import (CancelStream, Close, Closed, Error, Heartbeat, HeartbeatAck, Hello, LoadRequest,
                                  LoadResource, LoadResult, ResourceLoaded, StartStream, StreamChunk, StreamCredit,
                                  StreamEnd)
from voxmux_host.models.vits.checkpoint import layout_of, skeleton
from voxmux_host.models.vits.config import TINY

Spawn = Callable[[Sequence[str]], HostProcess]


def test_a_voice_loads_by_name_and_streams_its_windows(spawn: Spawn, tmp_path: Path) -> None:
    host = spawn(host_argv('vits'))
    host.expect(Hello)
    options = {'config': 'tiny', 'randomVoices': 2, 'voiceCacheDir': str(tmp_path), 'phonemizer': 'text',
               'device': 'cpu'}
    loaded = host.request(LoadRequest('vits-0', 'voxmux-speech-gpu', 'vits', options, None), 1, LoadResult)
    assert loaded.work_kinds == ('stream',)
    voice = host.request(LoadResource('vits-1', 'voice', {}), 2, ResourceLoaded)
    assert (voice.name, voice.residency, voice.source) == ('vits-1', 'device', 'disk')
    sentences = ['Hello there, this is a longer first sentence to speak.', 'Bye.']
    params = {'sentences': sentences, 'voice': 'vits-1', 'speed': 1.0}
    host.send(StartStream('s', 'r', 'vits-1', params, 100, b''), 3)
    chunks = []
    while True:
        message, correlation_id = host.recv()  # type: ignore[misc]
        if isinstance(message, StreamEnd):
            break
        assert isinstance(message, StreamChunk), message
        chunks.append(message)
    assert message.error is None, message.error
    assert [c.meta['sentence'] for c in chunks][-1] == 1 and chunks[0].meta == {'sampleRate': 22050, 'sentence': 0}
    samples = sum(len(c.body) for c in chunks) // 2
    assert message.usage == {'characters': sum(len(s) for s in sentences), 'sentences': 2,
                             'audioSeconds': round(samples / 22050, 3)}
    ack = host.request(Heartbeat(1), 4, HeartbeatAck)
    assert [(r.name, r.residency) for r in ack.resources] == [('vits-1', 'device')]
    assert ack.memory_bytes == voice.bytes
    host.send(StartStream('u', 'r2', None, {'sentences': ['Hi.'], 'voice': 'alloy'}, 10, b''), 5)
    end, _ = host.expect(StreamEnd)
    assert end.error is not None and end.error.code == 'resource_not_found'
    assert host.request(LoadResource('vits-7', 'voice', {}), 6, Error).code == 'resource_not_found'
    host.request(Close(), 7, Closed)
    assert host.wait() == 0


def test_a_started_stream_holds_its_voice_and_a_start_whose_voice_does_not_fit_fails_at_once(spawn: Spawn,
                                                                                              tmp_path: Path) -> None:
    host = spawn(host_argv('vits'))
    host.expect(Hello)
    options = {'config': 'tiny', 'randomVoices': 3, 'voiceCacheDir': str(tmp_path), 'phonemizer': 'text',
               'device': 'cpu', 'residentBudgetBytes': layout_of(skeleton(TINY)).bytes_fp32, 'hostBudgetBytes': 0}
    host.request(LoadRequest('vits-0', 'voxmux-speech-gpu', 'vits', options, None), 1, LoadResult)
    # No credit yet: s1 has made no piece, and still holds vits-0 (the budget's one voice).
    host.send(StartStream('s1', 'r1', 'vits-0', {'sentences': ['Hello there.'], 'voice': 'vits-0'}, 0, b''), 2)
    host.send(StartStream('s2', 'r2', 'vits-1', {'sentences': ['Hi.'], 'voice': 'vits-1'}, 10, b''), 3)
    refused, _ = host.expect(StreamEnd)
    assert (refused.stream_id, refused.chunks) == ('s2', 0)
    assert refused.error is not None and refused.error.code == 'out_of_memory', refused.error
    assert 'vits-0' in refused.error.message
    host.send(StreamCredit('s1', 100), 4)
    while True:
        message, _ = host.recv()  # type: ignore[misc]
        if isinstance(message, StreamEnd):
            break
        assert isinstance(message, StreamChunk) and message.stream_id == 's1', message
    assert message.stream_id == 's1' and message.chunks > 0 and message.error is None, message
    counters = host.request(Heartbeat(1), 5, HeartbeatAck).resource_counters
    assert counters is not None
    assert (counters.misses, counters.loads_from_disk, counters.evictions) == (1, 1, 0)  # never reloaded
    # A stream cancelled before its first piece gives its voice back.
    host.send(StartStream('s3', 'r3', 'vits-2', {'sentences': ['Hi.'], 'voice': 'vits-2'}, 0, b''), 6)
    host.send(CancelStream('s3'), 7)
    cancelled, _ = host.expect(StreamEnd)
    assert cancelled.stream_id == 's3' and cancelled.error is not None and cancelled.error.code == 'stream_cancelled'
    assert host.request(LoadResource('vits-1', 'voice', {}), 8, ResourceLoaded).source == 'disk'
    host.request(Close(), 9, Closed)
    assert host.wait() == 0
