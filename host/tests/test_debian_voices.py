"""The debian-voices adapter: its catalogue and options, each engine's audio, speed, cancels and failures, and
a stream through a real host process."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import numpy as np
import pytest

from host_process import HostProcess, host_argv
from voxmux_host.errors import InstanceError
from voxmux_host.messages import (
    Close,
    Closed,
    Hello,
    LoadRequest,
    LoadResult,
    StartStream,
    StreamChunk,
    StreamEnd,
    WarmupRequest,
    WarmupResult,
)
from voxmux_host.model_api import LoadContext, StreamAdapter, StreamPiece, StreamRequest
from voxmux_host.models.debian_voices import espeak, flite
from voxmux_host.models.debian_voices.adapter import MAX_PART_CHARS, DebianVoicesAdapter, text_parts
from voxmux_host.models.debian_voices.catalogue import ESPEAK_VOICES, FESTIVAL_VOICES, Voice
from voxmux_host.models.debian_voices.espeak import EspeakEngine, atempo_filter, rate_and_tempo
from voxmux_host.models.debian_voices.festival import FestivalEngine

def _has_library(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


pytestmark = [
    pytest.mark.skipif(not _has_library('libflite.so.1'), reason='libflite1 is not installed'),
    pytest.mark.skipif(shutil.which('festival') is None, reason='festival is not installed'),
    pytest.mark.skipif(shutil.which('espeak-ng') is None, reason='espeak-ng is not installed'),
]

SENTENCE = 'The weather today is sunny and warm with a light breeze.'
SENTENCES = ['Good morning.', 'The weather today is sunny and warm.', 'Turn off the lights in the kitchen.']
#: The voices the gateway's default aliases name (alloy ... cedar): all must exist.
ALIAS_TARGETS = ('flite-slt', 'flite-rms', 'flite-awb', 'festival-slt-hts', 'flite-kal16', 'festival-ked',
                 'espeak-en-us+f3', 'festival-kal', 'espeak-en-gb+f2', 'espeak-en-us+f5', 'espeak-en-gb-scotland+m3',
                 'espeak-en-029+f4', 'flite-kal')
#: One voice per engine and rate.
ENGINE_VOICES = ('flite-slt', 'flite-kal', 'festival-slt-hts', 'festival-kal', 'espeak-en-us+f3')


@pytest.fixture(scope='module')
def adapter() -> Iterator[DebianVoicesAdapter]:
    loaded = DebianVoicesAdapter()
    loaded.load(LoadContext('dv-0', 'voxmux-speech-cpu', {}))
    loaded.warmup()
    yield loaded
    loaded.close()


def stream(adapter: DebianVoicesAdapter, voice: str, sentences: Sequence[str], speed: float = 1.0,
           cancelled: threading.Event | None = None) -> Tuple[List[StreamPiece], Dict[str, Any]]:
    request = StreamRequest('s', 'r', None, {'sentences': list(sentences), 'voice': voice, 'speed': speed}, b'')
    if cancelled is not None:
        request.cancelled = cancelled
    pieces = adapter.open_stream(request)
    received: List[StreamPiece] = []
    while True:
        try:
            received.append(next(pieces))
        except StopIteration as end:
            return received, end.value


def duration_s(pieces: Sequence[StreamPiece]) -> float:
    return float(sum(len(piece.data) / 2 / piece.meta['sampleRate'] for piece in pieces))


def load_failure(options: Dict[str, Any]) -> InstanceError:
    with pytest.raises(InstanceError) as caught:
        DebianVoicesAdapter().load(LoadContext('dv-x', 'speech', options))
    assert caught.value.code == 'load_failed'
    return caught.value


# -- catalogue and options -------------------------------------------------------------------


def test_the_catalogue_lists_every_voice_with_language_rate_gender_and_description(
        adapter: DebianVoicesAdapter) -> None:
    entries = adapter.catalog()
    names = [entry['name'] for entry in entries]
    assert len(names) == len(set(names)) == 5 + 3 + 8 * 13
    assert set(ALIAS_TARGETS) <= set(names)
    for entry in entries:
        assert set(entry) == {'name', 'kind', 'language', 'sampleRate', 'gender', 'description'}
        assert entry['kind'] == 'voice' and entry['language'].startswith('en-') and entry['description']
        assert entry['gender'] in ('female', 'male')
    by_name = {entry['name']: entry for entry in entries}
    assert [by_name[n]['sampleRate'] for n in ('flite-slt', 'flite-kal', 'festival-slt-hts', 'festival-ked',
                                               'espeak-en-us+f3')] == [16000, 8000, 32000, 16000, 22050]
    assert (by_name['flite-slt']['gender'], by_name['flite-rms']['gender'], by_name['espeak-en-us+f3']['gender']) == \
        ('female', 'male', 'female')


def test_option_voices_keeps_the_voices_named_by_id_or_prefix() -> None:
    adapter = DebianVoicesAdapter()
    adapter.load(LoadContext('dv-1', 'speech', {'voices': ['flite-', 'espeak-en-gb-scotland+m3']}))
    try:
        assert [e['name'] for e in adapter.catalog()] == ['flite-slt', 'flite-rms', 'flite-awb', 'flite-kal16',
                                                          'flite-kal', 'espeak-en-gb-scotland+m3']
        with pytest.raises(InstanceError) as caught:
            adapter.open_stream(StreamRequest('s', 'r', None, {'sentences': ['Hi.'], 'voice': 'festival-kal'}, b''))
        assert caught.value.code == 'unsupported_option' and "'festival-kal'" in caught.value.message
    finally:
        adapter.close()


def test_load_fails_for_unknown_options_and_voices_that_match_nothing() -> None:
    assert 'colour' in load_failure({'colour': 'blue'}).message
    assert "'flight-'" in load_failure({'voices': ['flite-slt', 'flight-']}).message
    assert 'non-empty list' in load_failure({'voices': 'flite-slt'}).message
    assert 'non-empty list' in load_failure({'voices': []}).message


def test_load_fails_naming_a_missing_flite_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flite, 'voice_library', lambda engine_voice: f'libflite_cmu_us_{engine_voice}_gone.so.1')
    error = load_failure({'voices': ['flite-rms']})
    assert 'libflite_cmu_us_rms_gone.so.1' in error.message and 'libflite1' in error.message


def test_load_fails_naming_a_missing_festival_program() -> None:
    engine = FestivalEngine(program='festival-not-installed')
    with pytest.raises(InstanceError) as caught:
        engine.load(FESTIVAL_VOICES)
    assert caught.value.code == 'load_failed' and "'festival-not-installed'" in caught.value.message


# -- audio -----------------------------------------------------------------------------------


@pytest.mark.parametrize('voice', ENGINE_VOICES)
def test_each_engine_speaks_a_sentence_at_its_declared_rate(adapter: DebianVoicesAdapter, voice: str) -> None:
    rate = {entry['name']: entry['sampleRate'] for entry in adapter.catalog()}[voice]
    pieces, usage = stream(adapter, voice, [SENTENCE])
    assert pieces and all(piece.meta == {'sampleRate': rate, 'sentence': 0} for piece in pieces)
    assert all(0 < len(piece.data) <= 2 * rate and len(piece.data) % 2 == 0 for piece in pieces)  # <= 1 s each
    seconds = duration_s(pieces)
    assert 1.5 <= seconds <= 6.0
    samples = np.frombuffer(b''.join(piece.data for piece in pieces), dtype='<i2').astype(np.float64)
    assert np.sqrt(np.mean(samples ** 2)) > 300  # speech, not silence
    assert usage == {'characters': len(SENTENCE), 'sentences': 1, 'audioSeconds': round(seconds, 3)}


@pytest.mark.parametrize('voice', ENGINE_VOICES)
def test_speed_2_halves_the_audio_and_speed_0_5_doubles_it(adapter: DebianVoicesAdapter, voice: str) -> None:
    normal = duration_s(stream(adapter, voice, [SENTENCE])[0])
    fast = duration_s(stream(adapter, voice, [SENTENCE], speed=2.0)[0])
    slow = duration_s(stream(adapter, voice, [SENTENCE], speed=0.5)[0])
    assert 0.35 * normal <= fast <= 0.7 * normal
    assert 1.6 * normal <= slow <= 2.4 * normal


def test_espeak_speeds_below_its_slowest_rate_are_slower_still(adapter: DebianVoicesAdapter) -> None:
    # espeak-ng speaks no slower than 80 words per minute (speed 0.46): the rest is a time stretch.
    voice = 'espeak-en-us+f3'
    normal = duration_s(stream(adapter, voice, [SENTENCE])[0])
    floor = duration_s(stream(adapter, voice, [SENTENCE], speed=0.46)[0])
    slowest = duration_s(stream(adapter, voice, [SENTENCE], speed=0.25)[0])
    assert 1.7 * floor <= slowest <= 2.0 * floor, (floor, slowest)  # 0.46 / 0.25 = 1.84
    assert 3.5 * normal <= slowest <= 4.5 * normal, (normal, slowest)
    pieces, usage = stream(adapter, voice, [SENTENCE], speed=0.3)
    assert pieces and all(piece.meta == {'sampleRate': 22050, 'sentence': 0} for piece in pieces)
    samples = np.frombuffer(b''.join(piece.data for piece in pieces), dtype='<i2').astype(np.float64)
    assert np.sqrt(np.mean(samples ** 2)) > 300  # speech, not silence
    assert usage['audioSeconds'] == round(duration_s(pieces), 3)
    again = b''.join(piece.data for piece in stream(adapter, voice, [SENTENCE], speed=0.3)[0])
    assert again == b''.join(piece.data for piece in pieces)


def test_espeak_speed_splits_into_its_rate_and_a_stretch_below_its_slowest_rate() -> None:
    assert rate_and_tempo(1.0) == (175, 1.0)
    assert rate_and_tempo(2.0) == (350, 1.0)
    assert rate_and_tempo(4.0) == (700, 1.0)
    assert rate_and_tempo(0.5) == (88, 1.0)
    assert rate_and_tempo(80 / 175) == (80, 1.0)
    wpm, tempo = rate_and_tempo(0.25)
    assert wpm == 80 and tempo == pytest.approx(0.25 * 175 / 80)  # 0.547: 80 wpm said 1.83x as long
    wpm, tempo = rate_and_tempo(0.4)
    assert wpm == 80 and tempo == pytest.approx(0.875)
    for speed in (0.25, 0.3, 0.45, 0.46, 0.5, 1.0, 3.0):
        wpm, tempo = rate_and_tempo(speed)
        assert espeak.MIN_WPM <= wpm <= espeak.MAX_WPM and 0 < tempo <= 1
        assert wpm * tempo == pytest.approx(175 * speed, abs=0.5)  # the two together give the speed


def test_the_atempo_filter_chains_factors_below_its_range() -> None:
    assert atempo_filter(0.75) == 'atempo=0.75'
    assert atempo_filter(0.5) == 'atempo=0.5'
    assert atempo_filter(0.25) == 'atempo=0.5,atempo=0.5'
    chain = atempo_filter(0.1)
    factors = [float(part.split('=')[1]) for part in chain.split(',')]
    assert all(0.5 <= factor <= 1 for factor in factors) and float(np.prod(factors)) == pytest.approx(0.1)


def _espeak_voice() -> Voice:
    return next(voice for voice in ESPEAK_VOICES if voice.name == 'espeak-en-us+f3')


def test_a_slow_espeak_sentence_without_ffmpeg_fails_naming_it() -> None:
    engine = EspeakEngine(stretcher='ffmpeg-not-installed')
    engine.load([_espeak_voice()])  # ffmpeg is needed only below speed 0.46: the voices still load
    try:
        assert engine.synthesize(_espeak_voice(), SENTENCE, 0.5, threading.Event()) is not None
        with pytest.raises(InstanceError) as caught:
            engine.synthesize(_espeak_voice(), SENTENCE, 0.25, threading.Event())
        assert caught.value.code == 'model_failed'
        assert "'ffmpeg-not-installed'" in caught.value.message and 'Debian package ffmpeg' in caught.value.message
    finally:
        engine.close()


def _hanging_program(tmp_path: Path) -> str:
    program = tmp_path / 'ffmpeg'
    program.write_text(f'#!{sys.executable}\nimport time\ntime.sleep(1000)\n')
    program.chmod(0o755)
    return str(program)


def test_a_cancel_stops_the_stretch_of_a_slow_espeak_sentence_at_once(tmp_path: Path) -> None:
    engine = EspeakEngine(stretcher=_hanging_program(tmp_path))
    engine.load([_espeak_voice()])
    try:
        cancelled = threading.Event()
        timer = threading.Timer(0.3, cancelled.set)
        timer.start()
        started = time.monotonic()
        assert engine.synthesize(_espeak_voice(), SENTENCE, 0.25, cancelled) is None
        assert time.monotonic() - started < 0.8
    finally:
        engine.close()


def test_a_stretch_that_does_not_finish_fails_its_sentence(tmp_path: Path) -> None:
    engine = EspeakEngine(stretcher=_hanging_program(tmp_path), sentence_timeout_s=0.3)
    engine.load([_espeak_voice()])
    try:
        with pytest.raises(InstanceError) as caught:
            engine.synthesize(_espeak_voice(), SENTENCE, 0.25, threading.Event())
        assert caught.value.code == 'model_failed' and 'within 0.3 s' in caught.value.message
    finally:
        engine.close()


def test_a_stream_yields_sentences_in_order_and_its_usage(adapter: DebianVoicesAdapter) -> None:
    pieces, usage = stream(adapter, 'flite-rms', SENTENCES)
    order = [piece.meta['sentence'] for piece in pieces]
    assert order == sorted(order) and set(order) == {0, 1, 2}
    assert usage == {'characters': sum(map(len, SENTENCES)), 'sentences': 3,
                     'audioSeconds': round(duration_s(pieces), 3)}


def test_text_parts_cut_long_text_between_words_within_the_limit() -> None:
    assert text_parts('  Short one.  ') == ['Short one.']
    assert text_parts('aaa bbb ccc ddd', 8) == ['aaa bbb', 'ccc ddd']
    assert text_parts('abcdefghijkl mn', 5) == ['abcde', 'fghij', 'kl mn']
    long = ' '.join(f'word{i}' for i in range(400))
    parts = text_parts(long)
    assert all(len(part) <= MAX_PART_CHARS for part in parts) and ' '.join(parts) == long


def test_a_sentence_longer_than_a_part_is_said_whole_under_its_own_index(adapter: DebianVoicesAdapter) -> None:
    long = ' '.join(['the weather today is sunny and warm'] * 12)  # 431 characters, no punctuation
    pieces, usage = stream(adapter, 'flite-kal', ['Hello.', long])
    assert {piece.meta['sentence'] for piece in pieces[-5:]} == {1}
    assert usage['sentences'] == 2 and usage['characters'] == len(long) + len('Hello.')
    assert 20 <= duration_s([p for p in pieces if p.meta['sentence'] == 1]) <= 40


def test_the_same_request_gives_the_same_audio(adapter: DebianVoicesAdapter) -> None:
    for voice in ENGINE_VOICES:
        first = b''.join(piece.data for piece in stream(adapter, voice, SENTENCES[:2])[0])
        assert first == b''.join(piece.data for piece in stream(adapter, voice, SENTENCES[:2])[0]), voice


def test_a_cancel_between_sentences_ends_the_stream_before_the_next_one(adapter: DebianVoicesAdapter) -> None:
    for voice in ('flite-slt', 'festival-kal', 'espeak-en-us'):
        cancelled = threading.Event()
        request = StreamRequest('s', 'r', None, {'sentences': SENTENCES, 'voice': voice}, b'', cancelled)
        pieces = adapter.open_stream(request)
        first = next(pieces)
        assert first.meta['sentence'] == 0
        cancelled.set()
        with pytest.raises(StopIteration) as end:
            next(pieces)
        assert end.value.value['sentences'] == 1, voice


def test_params_out_of_contract_end_the_stream_with_unsupported_option(adapter: DebianVoicesAdapter) -> None:
    bad: List[Dict[str, Any]] = [
        {'sentences': ['Hi.'], 'voice': 'alloy'},  # aliases are resolved in the gateway
        {'sentences': ['Hi.'], 'voice': 'flite-slt', 'speed': 4.5},
        {'sentences': ['Hi.'], 'voice': 'flite-slt', 'speed': True},
        {'sentences': [], 'voice': 'flite-slt'},
        {'sentences': ['Hi.', ' '], 'voice': 'flite-slt'},
        {'sentences': ['Hi.'], 'voice': 'flite-slt', 'format': 'mp3'},
        {'sentences': ['Hi.']},
    ]
    for params in bad:
        with pytest.raises(InstanceError) as caught:
            adapter.open_stream(StreamRequest('s', 'r', None, params, b''))
        assert caught.value.code == 'unsupported_option', params
    with pytest.raises(InstanceError) as caught:
        adapter.open_stream(StreamRequest('s', 'r', None, {'sentences': ['Hi.'], 'voice': 'alloy'}, b''))
    assert "voice of this model" in caught.value.message and "'alloy'" in caught.value.message


def test_the_adapter_declares_the_stream_kind() -> None:
    assert DebianVoicesAdapter.work_kinds == ('stream',)
    assert isinstance(DebianVoicesAdapter(), StreamAdapter)


# -- festival process ------------------------------------------------------------------------


@pytest.fixture
def festival() -> Iterator[FestivalEngine]:
    engine = FestivalEngine()
    engine.load(FESTIVAL_VOICES)
    yield engine
    engine.close()


def test_festival_starts_again_after_its_process_is_killed(festival: FestivalEngine) -> None:
    voice, never = FESTIVAL_VOICES[1], threading.Event()
    before = festival.synthesize(voice, SENTENCE, 1.0, never)
    pid = festival.pid
    assert pid is not None and festival.starts == 1
    os.kill(pid, signal.SIGKILL)
    after = festival.synthesize(voice, SENTENCE, 1.0, never)
    assert before is not None and after is not None and after.pcm == before.pcm
    assert festival.starts == 2 and festival.pid not in (None, pid)


def test_a_festival_sentence_that_fails_fails_alone(festival: FestivalEngine) -> None:
    voice, event = FESTIVAL_VOICES[2], threading.Event()
    assert festival.synthesize(voice, SENTENCE, 1.0, event) is not None
    pid = festival.pid
    missing = Voice('festival-none', 'festival', 'voice_not_installed', 'en-US', 16000, None, 'none')
    with pytest.raises(InstanceError) as caught:
        festival.synthesize(missing, SENTENCE, 1.0, event)
    assert caught.value.code == 'model_failed' and 'voice_not_installed' in caught.value.message
    assert festival.synthesize(voice, SENTENCE, 1.0, event) is not None
    assert festival.pid == pid and festival.starts == 1


def test_a_cancel_ends_the_wait_for_festival_and_the_next_sentence_is_its_own(festival: FestivalEngine) -> None:
    hts, kal, never = FESTIVAL_VOICES[0], FESTIVAL_VOICES[1], threading.Event()
    reference = festival.synthesize(kal, SENTENCE, 1.0, never)
    cancelled = threading.Event()
    timer = threading.Timer(0.05, cancelled.set)
    timer.start()
    started = time.monotonic()
    assert festival.synthesize(hts, SENTENCE * 3, 0.25, cancelled) is None  # several seconds of work in festival
    assert time.monotonic() - started < 0.5
    after = festival.synthesize(kal, SENTENCE, 1.0, never)
    assert reference is not None and after is not None and after.pcm == reference.pcm
    assert festival.starts == 1


def test_a_festival_that_stops_answering_is_replaced_and_its_sentence_fails(tmp_path: Path) -> None:
    # A stand-in for festival that answers its start-up form, then never answers again.
    program = tmp_path / 'festival'
    program.write_text(f'#!{sys.executable}\n'
                       'import re, sys, time\n'
                       'tag = re.search(r"OK (\\d+)", sys.stdin.readline()).group(1)\n'
                       'print("OK " + tag, flush=True)\n'
                       'time.sleep(1000)\n')
    program.chmod(0o755)
    engine = FestivalEngine(program=str(program), ready_timeout_s=10.0, sentence_timeout_s=0.3)
    engine.load(FESTIVAL_VOICES)
    try:
        for attempt in (1, 2):
            with pytest.raises(InstanceError) as caught:
                engine.synthesize(FESTIVAL_VOICES[1], SENTENCE, 1.0, threading.Event())
            assert caught.value.code == 'model_failed' and 'no answer within 0.3 s' in caught.value.message
            assert engine.pid is None and engine.starts == attempt
    finally:
        engine.close()


# -- through a host process ------------------------------------------------------------------


def test_a_host_process_streams_speech_chunks_for_a_start_stream(spawn: Any) -> None:
    host: HostProcess = spawn(host_argv('debian-voices'))
    assert 'debian-voices' in host.expect(Hello)[0].adapters
    loaded = host.request(LoadRequest('dv-0', 'voxmux-speech-cpu', 'debian-voices', {'voices': ['flite-slt']}, None),
                          1, LoadResult)
    assert loaded.work_kinds == ('stream',)
    host.request(WarmupRequest(), 2, WarmupResult)
    host.send(StartStream('s', 'r', None, {'sentences': SENTENCES[:2], 'voice': 'flite-slt', 'speed': 1.25}, 64, b''),
              3)
    chunks: List[StreamChunk] = []
    while True:
        received = host.recv()
        assert isinstance(received, tuple), received
        message, correlation_id = received
        assert correlation_id == 3
        if isinstance(message, StreamEnd):
            break
        assert isinstance(message, StreamChunk)
        chunks.append(message)
    assert message.error is None and message.chunks == len(chunks) >= 2
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert {c.meta['sampleRate'] for c in chunks} == {16000} and chunks[-1].meta['sentence'] == 1
    audio_s = sum(len(c.body) for c in chunks) / 2 / 16000
    assert message.usage is not None and message.usage['sentences'] == 2
    assert message.usage['audioSeconds'] == pytest.approx(audio_s, abs=0.002) and 1.0 <= audio_s <= 6.0
    host.request(Close(), 4, Closed)
    assert host.wait() == 0


# -- sentences with nothing to say -----------------------------------------------------------


@pytest.mark.parametrize('voice', ['festival-kal', 'festival-ked'])
def test_a_festival_diphone_voice_survives_a_sentence_without_words(voice: str) -> None:
    # The gateway's splitter sends "..." of 'Hello. ... Goodbye.' and the emoji of 'Great job! 🎉' as
    # pieces of their own; festival's diphone voices crash (SIGSEGV) on an utterance with no segments.
    adapter = DebianVoicesAdapter()
    adapter.load(LoadContext('dv-w', 'speech', {'voices': [voice]}))
    try:
        adapter.warmup()
        engine = adapter._engines['festival']
        assert isinstance(engine, FestivalEngine)
        pieces, usage = stream(adapter, voice, ['Hello.', '...', 'Goodbye.'])
        assert usage['sentences'] == 3
        assert {piece.meta['sentence'] for piece in pieces} >= {0, 2}
        assert engine.starts == 1  # no festival process died on the way
    finally:
        adapter.close()


@pytest.mark.parametrize('voice', ['flite-kal', 'espeak-en-us'])
def test_a_control_character_does_not_cut_off_the_rest_of_the_sentence(adapter: DebianVoicesAdapter,
                                                                       voice: str) -> None:
    # JSON input may carry U+0000; the gateway passes it on. flite (a C string through ctypes) and espeak-ng
    # (text on stdin) stop reading at it and drop every word after it without an error; Festival reads
    # it as a space (festival.scheme_string).
    alone = duration_s(stream(adapter, voice, ['Hello.'])[0])
    whole = duration_s(stream(adapter, voice, ['Hello there my good friend, how are you today?'])[0])
    with_nul = duration_s(stream(adapter, voice, ['Hello\x00 there my good friend, how are you today?'])[0])
    assert with_nul > alone + 0.5 * (whole - alone), (alone, with_nul, whole)
