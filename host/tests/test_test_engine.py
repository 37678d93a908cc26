import time
import zlib
from typing import Any, Dict

import numpy as np
import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.fakes.test_engine import TestEngineAdapter, echo_text
from voxmux_host.model_api import LoadContext, ItemFailure, BatchInput, StreamRequest, Transcript


def loaded(**options: object) -> TestEngineAdapter:
    adapter = TestEngineAdapter()
    adapter.load(LoadContext('i', 'm', dict(options)))
    return adapter


def test_echo_text_names_the_sample_count_and_the_crc_of_the_int16_bytes() -> None:
    audio = np.array([0, 16384, -32768], dtype=np.int16)
    crc = zlib.crc32(b'\x00\x00\x00\x40\x00\x80')  # the same samples, int16 little-endian
    assert echo_text(audio) == f'echo samples=3 crc={crc:08x}'
    assert echo_text(audio) != echo_text(np.array([0, 16384, -16384], dtype=np.int16))


def test_run_batch_returns_words_evenly_spaced_over_one_segment() -> None:
    audio = np.linspace(-32768, 32767, 24000).astype(np.int16)
    [result] = loaded().run_batch([BatchInput('r', audio, 'de', None, True)])
    assert isinstance(result, Transcript)
    assert (result.language, result.duration_s) == ('de', 1.5)
    assert result.segments is not None and [(s.start, s.end, s.text) for s in result.segments] == [
        (0.0, 1.5, result.text)]
    assert result.words is not None and [w.word for w in result.words] == result.text.split(' ')
    assert [(w.start, w.end) for w in result.words] == [(0.0, 0.5), (0.5, 1.0), (1.0, 1.5)]


def test_words_are_left_out_unless_asked_for() -> None:
    [result] = loaded().run_batch([BatchInput('r', np.zeros(16, dtype=np.int16))])
    assert isinstance(result, Transcript) and result.words is None


def test_prompt_commands_fail_single_requests() -> None:
    audio = np.zeros(16, dtype=np.int16)
    results = loaded().run_batch([
        BatchInput('a', audio), BatchInput('b', audio, prompt='voxmux-test:fail'),
        BatchInput('c', audio, prompt='voxmux-test:bad-audio'),
    ])
    assert isinstance(results[0], Transcript)
    assert [r.code for r in results[1:] if isinstance(r, ItemFailure)] == ['model_failed', 'invalid_audio']


def test_stats_count_batches_and_probe_follows_wedge_probe() -> None:
    adapter = loaded(wedgeProbe=True)
    adapter.run_batch([BatchInput('a', np.zeros(1, dtype=np.int16))])
    assert adapter.stats().eager_batches == 1
    assert adapter.probe() is False
    assert loaded().probe() is True


def test_fail_load_raises_load_failed() -> None:
    with pytest.raises(InstanceError) as caught:
        loaded(failLoad=True)
    assert caught.value.code == 'load_failed'


@pytest.mark.parametrize('options', [
    {'mode': 'fast'}, {'batchDelayMs': -1}, {'batchDelayMs': '5'}, {'crashOnLoad': 1}, {'batchDelay': 5},
])
def test_invalid_options_fail_the_load(options: Dict[str, Any]) -> None:
    with pytest.raises(InstanceError) as caught:
        loaded(**options)
    assert caught.value.code == 'load_failed'


def test_item_delay_applies_per_request() -> None:
    adapter = loaded(itemDelayMs=30)
    started = time.monotonic()
    adapter.run_batch([BatchInput(str(i), np.zeros(1, dtype=np.int16)) for i in range(3)])
    assert time.monotonic() - started >= 0.09


# -- speech streams (the gateway's POST /v1/audio/speech params) ---------------------------------

def _speech(adapter: TestEngineAdapter, params: Dict[str, Any]) -> Any:
    return adapter.open_stream(StreamRequest('s', 'r', None, params, b''))


def _drain(stream: Any) -> Any:
    pieces = []
    while True:
        try:
            pieces.append(next(stream))
        except StopIteration as stop:
            return pieces, stop.value


def test_speech_stream_yields_pcm_chunks_per_sentence_with_rate_and_index() -> None:
    adapter = loaded(speechSampleRateHz=16000)
    pieces, usage = _drain(_speech(adapter, {'sentences': ['Hello there.', 'Hi.'], 'voice': 'v1', 'speed': 1}))
    assert [p.meta['sentence'] for p in pieces] == sorted(p.meta['sentence'] for p in pieces)
    assert {p.meta['sampleRate'] for p in pieces} == {16000}
    frames = [len(p.data) // 2 for p in pieces]
    assert max(frames) <= 16000 * 200 // 1000
    expected = int(16000 * (200 + 60 * 12) / 1000) + int(16000 * (200 + 60 * 3) / 1000)
    assert sum(frames) == expected
    assert usage == {'characters': 15, 'sentences': 2, 'audioSeconds': expected / 16000}


def test_speech_stream_is_deterministic_per_voice_and_scaled_by_speed() -> None:
    adapter = loaded()

    def audio(voice: str, speed: float) -> bytes:
        pieces, _ = _drain(_speech(adapter, {'sentences': ['One sentence.'], 'voice': voice, 'speed': speed}))
        return b''.join(p.data for p in pieces)
    assert audio('a', 1) == audio('a', 1)
    assert audio('a', 1) != audio('b', 1)
    assert len(audio('a', 2)) // 2 == int(22050 * (200 + 60 * 13) / 1000 / 2)


@pytest.mark.parametrize('params', [
    {'sentences': [], 'voice': 'v', 'speed': 1},
    {'sentences': [''], 'voice': 'v', 'speed': 1},
    {'sentences': ['a'], 'voice': '', 'speed': 1},
    {'sentences': ['a'], 'voice': 'v', 'speed': 5},
    {'sentences': ['a'], 'voice': 'v', 'speed': 1, 'pitch': 2},
])
def test_speech_stream_rejects_bad_params_with_unsupported_option(params: Dict[str, Any]) -> None:
    with pytest.raises(InstanceError) as info:
        _speech(loaded(), params)
    assert info.value.code == 'unsupported_option'


def test_speech_stream_fails_after_speech_fail_after_chunks() -> None:
    stream = _speech(loaded(speechFailAfterChunks=1), {'sentences': ['A long enough sentence.'], 'voice': 'v', 'speed': 1})
    next(stream)
    with pytest.raises(RuntimeError):
        next(stream)
