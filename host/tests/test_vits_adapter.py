"""The vits adapter's streams on the CPU with the tiny config: params, chunks and usage, determinism,
windowed against whole decoding, same-voice batching, cancel, voice files with Piper configs, options."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext, StreamAdapter, StreamPiece, StreamRequest
from voxmux_host.models.vits.adapter import VitsAdapter
from voxmux_host.models.vits.phonemes import EspeakPhonemizer
from voxmux_host.models.vits.random_init import random_state
from voxmux_host.models.vits.config import TINY

TEXT = ['The quick brown fox jumps over the lazy dog, and keeps on running for a while.', 'Then it stops.']


def espeak_available() -> bool:
    try:
        EspeakPhonemizer()
    except InstanceError:
        return False
    return True


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp('vits-voices')


def make_adapter(cache_dir: Path, **options: Any) -> VitsAdapter:
    adapter = VitsAdapter()
    base: Dict[str, Any] = {'config': 'tiny', 'randomVoices': 3, 'voiceCacheDir': str(cache_dir), 'phonemizer': 'text'}
    base.update(options)
    adapter.load(LoadContext('i-0', 'vits-test', base))
    adapter.warmup()
    return adapter


def stream_request(params: Dict[str, Any], resource: Any = None) -> StreamRequest:
    return StreamRequest('s-1', 'r-1', resource, params, b'')


def run(adapter: VitsAdapter, params: Dict[str, Any]) -> Tuple[List[StreamPiece], Dict[str, Any]]:
    pieces: List[StreamPiece] = []
    generator = adapter.open_stream(stream_request(params))
    while True:
        try:
            pieces.append(next(generator))
        except StopIteration as stop:
            return pieces, stop.value


def pcm(pieces: List[StreamPiece]) -> 'np.ndarray[Any, np.dtype[Any]]':
    return np.frombuffer(b''.join(p.data for p in pieces), dtype='<i2')


def test_a_stream_yields_windows_of_s16le_audio_sentence_by_sentence(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    assert isinstance(adapter, StreamAdapter)
    pieces, usage = run(adapter, {'sentences': TEXT, 'voice': 'vits-1', 'speed': 1.0})
    sentences = [p.meta['sentence'] for p in pieces]
    assert sentences == sorted(sentences) and set(sentences) == {0, 1}
    assert all(p.meta['sampleRate'] == 22050 for p in pieces)
    assert all(0 < len(p.data) <= 2 * 22050 and len(p.data) % 512 == 0 for p in pieces)  # <= 1 s, whole frames
    assert max(len(p.data) for p in pieces) == 2 * 45 * 256  # a 45-frame window
    audio = pcm(pieces)
    assert adapter.probe()
    assert usage == {'characters': sum(len(s) for s in TEXT), 'sentences': 2,
                     'audioSeconds': round(len(audio) / 22050, 3)}
    assert 2.0 < len(audio) / 22050 < 12.0
    assert int(np.abs(audio).max()) > 1000  # audible


def test_the_same_request_gives_the_same_audio_and_voices_differ(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    first = pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0'})[0])
    again = pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0'})[0])
    other = pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-2'})[0])
    reseeded = pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0', 'seed': 7})[0])
    assert np.array_equal(first, again)
    assert not np.array_equal(first[:len(other)], other[:len(first)])
    assert not np.array_equal(first[:len(reseeded)], reseeded[:len(first)])
    # one sentence alone sounds as it does in a longer request (its noise depends on its own text)
    alone = pcm(run(adapter, {'sentences': TEXT[1:], 'voice': 'vits-0'})[0])
    assert np.array_equal(first[-len(alone):], alone)


def test_windowed_streaming_equals_decoding_each_sentence_whole(cache_dir: Path) -> None:
    windowed = pcm(run(make_adapter(cache_dir), {'sentences': TEXT, 'voice': 'vits-1'})[0])
    whole_pieces, _ = run(make_adapter(cache_dir, chunkFrames=2000), {'sentences': TEXT, 'voice': 'vits-1'})
    assert len(whole_pieces) == 2  # one window a sentence
    whole = pcm(whole_pieces)
    assert windowed.shape == whole.shape
    assert int(np.abs(windowed.astype(np.int32) - whole.astype(np.int32)).max()) <= 1


def test_speed_scales_the_length(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    normal = len(pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0'})[0]))
    fast = len(pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0', 'speed': 2.0})[0]))
    slow = len(pcm(run(adapter, {'sentences': TEXT, 'voice': 'vits-0', 'speed': 0.5})[0]))
    assert 0.4 < fast / normal < 0.7
    assert 1.7 < slow / normal < 2.3


def test_streams_of_one_voice_share_decoder_forwards_and_keep_their_audio(cache_dir: Path) -> None:
    alone = make_adapter(cache_dir)
    a_alone = pcm(run(alone, {'sentences': TEXT, 'voice': 'vits-0'})[0])
    b_alone = pcm(run(alone, {'sentences': TEXT[:1], 'voice': 'vits-0', 'seed': 3})[0])
    together = make_adapter(cache_dir)
    a = together.open_stream(stream_request({'sentences': TEXT, 'voice': 'vits-0'}))
    b = together.open_stream(stream_request({'sentences': TEXT[:1], 'voice': 'vits-0', 'seed': 3}))
    outputs: Dict[str, List[StreamPiece]] = {'a': [], 'b': []}
    live = {'a': a, 'b': b}
    while live:  # the host's round: each open stream advances by one piece
        for key, generator in list(live.items()):
            try:
                outputs[key].append(next(generator))
            except StopIteration:
                del live[key]
    a_audio, b_audio = pcm(outputs['a']), pcm(outputs['b'])
    assert np.abs(a_audio.astype(np.int32) - a_alone.astype(np.int32)).max() <= 1
    assert np.abs(b_audio.astype(np.int32) - b_alone.astype(np.int32)).max() <= 1
    batches_alone = alone.stats().eager_batches
    windows = len(outputs['a']) + len(outputs['b'])
    assert batches_alone == windows  # alone: one forward a window
    assert together.stats().eager_batches < windows  # together: windows of both in one forward


def test_a_cancelled_stream_stops_and_releases_its_voice(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    request = stream_request({'sentences': TEXT, 'voice': 'vits-2'})
    generator = adapter.open_stream(request)
    next(generator)
    request.cancelled.set()
    with pytest.raises(StopIteration):
        next(generator)
    assert adapter.evict_resource('vits-2') > 0  # no longer in use


def test_a_generator_closed_mid_stream_releases_its_voice(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    generator = adapter.open_stream(stream_request({'sentences': TEXT, 'voice': 'vits-2'}))
    next(generator)
    generator.close()  # type: ignore[attr-defined]
    assert adapter.evict_resource('vits-2') > 0


@pytest.mark.parametrize('params, code', [
    ({'sentences': ['Hi.'], 'voice': 'vits-0', 'format': 'mp3'}, 'unsupported_option'),
    ({'sentences': [], 'voice': 'vits-0'}, 'unsupported_option'),
    ({'sentences': ['Hi.', ' '], 'voice': 'vits-0'}, 'unsupported_option'),
    ({'sentences': ['Hi.'], 'voice': 'vits-0', 'speed': 4.5}, 'unsupported_option'),
    ({'sentences': ['Hi.'], 'voice': 'vits-0', 'speed': 0.2}, 'unsupported_option'),
    ({'sentences': ['Hi.']}, 'unsupported_option'),
    ({'sentences': ['Hi.'], 'voice': 'alloy'}, 'resource_not_found'),
])
def test_bad_params_fail_the_stream_at_open(cache_dir: Path, params: Dict[str, Any], code: str) -> None:
    adapter = make_adapter(cache_dir)
    with pytest.raises(InstanceError) as caught:
        adapter.open_stream(stream_request(params))
    assert caught.value.code == code


def test_the_resource_names_the_voice(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    pieces = list(adapter.open_stream(stream_request({'sentences': ['Hi.'], 'voice': 'vits-1'}, 'vits-1')))
    assert pieces
    with pytest.raises(InstanceError):
        adapter.open_stream(stream_request({'sentences': ['Hi.'], 'voice': 'vits-1'}, 'vits-2'))


def test_the_catalogue_lists_every_voice(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir)
    catalog = adapter.catalog()
    assert [entry['name'] for entry in catalog] == ['vits-0', 'vits-1', 'vits-2']
    assert catalog[0] == {'name': 'vits-0', 'kind': 'voice', 'language': 'en-US', 'sampleRate': 22050,
                          'gender': None, 'description': 'random VITS voice (tiny, seed 0, #0)'}
    assert sorted(p.name for p in (cache_dir / 'tiny-seed0').iterdir()) == ['vits-0.pt', 'vits-1.pt', 'vits-2.pt']


def test_a_voices_dir_with_a_lightning_checkpoint_and_its_piper_config(tmp_path: Path) -> None:
    state, _ = random_state(TINY, 42)
    torch.save({'state_dict': {f'model_g.{k}': v for k, v in state.items()}, 'epoch': 1}, tmp_path / 'amy.ckpt')
    symbols = ['_', '^', '$', ' '] + list('abcdefghijklmnopqrstuvwxyz.,')
    config = {'dataset': 'amy', 'audio': {'sample_rate': 22050}, 'phoneme_type': 'text',
              'language': {'code': 'en_GB'}, 'inference': {'noise_scale': 0.5, 'length_scale': 1.2, 'noise_w': 0.6},
              'phoneme_id_map': {s: [i] for i, s in enumerate(symbols)}}
    (tmp_path / 'amy.onnx.json').write_text(json.dumps(config), encoding='utf-8')
    torch.save(state, tmp_path / 'bob.pt')
    adapter = VitsAdapter()
    adapter.load(LoadContext('i-0', 'vits-test', {'config': 'tiny', 'voicesDir': str(tmp_path), 'phonemizer': 'text'}))
    adapter.warmup()
    catalog = {entry['name']: entry for entry in adapter.catalog()}
    assert sorted(catalog) == ['amy', 'bob']
    assert catalog['amy']['language'] == 'en-GB' and catalog['amy']['description'] == 'amy'
    pieces, usage = run(adapter, {'sentences': ['Hello there.'], 'voice': 'amy'})
    assert pieces and usage['sentences'] == 1


def test_a_voices_dir_file_that_does_not_match_fails_its_load(tmp_path: Path) -> None:
    state, _ = random_state(TINY, 42)
    del state['dec.conv_post.weight']
    torch.save(state, tmp_path / 'broken.pt')
    adapter = VitsAdapter()
    adapter.load(LoadContext('i-0', 'vits-test', {'config': 'tiny', 'voicesDir': str(tmp_path), 'phonemizer': 'text'}))
    with pytest.raises(InstanceError) as caught:
        adapter.load_resource('broken', 'voice', {})
    assert caught.value.code == 'load_failed' and 'dec.conv_post.weight' in caught.value.message


@pytest.mark.skipif(not espeak_available(), reason='needs libespeak-ng.so.1')
def test_espeak_phonemes_drive_the_default_phonemizer(cache_dir: Path) -> None:
    adapter = make_adapter(cache_dir, phonemizer='espeak')
    pieces, usage = run(adapter, {'sentences': ['Hello world.'], 'voice': 'vits-0'})
    assert pieces and 0.3 < usage['audioSeconds'] < 3.0
    assert EspeakPhonemizer().phonemize('Hello world.', 'en-us') == 'həlˈoʊ wˈɜːld.'


@pytest.mark.parametrize('options, code', [
    ({'nope': 1}, 'load_failed'),
    ({'dtype': 'fp16'}, 'load_failed'),
    ({'config': 'huge'}, 'load_failed'),
    ({'randomVoices': 0}, 'load_failed'),
    ({'preloadVoices': ['vits-9']}, 'load_failed'),
    ({'residentBudgetBytes': -1}, 'load_failed'),
])
def test_bad_options_fail_the_load(cache_dir: Path, options: Dict[str, Any], code: str) -> None:
    adapter = VitsAdapter()
    base: Dict[str, Any] = {'config': 'tiny', 'randomVoices': 2, 'voiceCacheDir': str(cache_dir), 'phonemizer': 'text',
                            'device': 'cpu'}
    base.update(options)
    with pytest.raises(InstanceError) as caught:
        adapter.load(LoadContext('i-0', 'vits-test', base))
    assert caught.value.code == code


def test_load_and_warmup_report_their_boot_stages(cache_dir: Path) -> None:
    adapter = VitsAdapter()
    info = adapter.load(LoadContext('i-0', 'vits-test', {'config': 'tiny', 'randomVoices': 3, 'voiceCacheDir': str(cache_dir),
                                                         'phonemizer': 'text', 'preloadVoices': ['vits-0']}))
    stages = [s.stage for s in info.stages]
    assert stages[0] == 'model_build' and 'weight_read' in stages  # no upload on the CPU
    [read] = [s for s in info.stages if s.stage == 'weight_read']
    assert read.bytes > 0
    assert [s.stage for s in adapter.warmup().stages] == ['warmup']  # no graphs on the CPU
    # A voice loaded for a request later is not a boot stage.
    adapter.load_resource('vits-1', 'voice', {})
    adapter.close()


@pytest.mark.skipif(not espeak_available(), reason='needs libespeak-ng.so.1')
def test_espeak_phonemes_keep_the_clause_punctuation_as_piper_does() -> None:
    # piper-phonemize src/phonemize.cpp appends each clause's terminator (. ? ! and ", " ": " "; ") to the
    # phonemes; its src/test.cpp expects "this, is: a; test." -> "ðˈɪs, ɪz: ˈeɪ; tˈɛst.". Piper voices are
    # trained with these symbols (pauses, question intonation).
    phonemizer = EspeakPhonemizer()
    assert phonemizer.phonemize('this, is: a; test.', 'en-us') == 'ðˈɪs, ɪz: ˈeɪ; tˈɛst.'
    assert phonemizer.phonemize('Are you there?', 'en-us').endswith('?')


@pytest.mark.skipif(not espeak_available(), reason='needs libespeak-ng.so.1')
def test_espeak_language_switch_flags_are_not_phonemes() -> None:
    # espeak-ng marks words of another language with "(en)" ... "(fr)"; piper-phonemize drops these flags
    # (phonemize.cpp, keepLanguageFlags false). Kept, '(' ')' and the letters are mapped to ids and spoken.
    phonemes = EspeakPhonemizer().phonemize("J'aime le football.", 'fr')
    assert '(' not in phonemes and ')' not in phonemes, phonemes


@pytest.mark.skipif(not espeak_available(), reason='needs libespeak-ng.so.1')
def test_espeak_phonemes_of_text_after_a_nul_character_are_not_dropped() -> None:
    # The text goes to espeak_TextToPhonemes as a NUL-terminated C string: U+0000 in the input (valid JSON)
    # silently ends it there.
    phonemes = EspeakPhonemizer().phonemize('Hello\x00 world.', 'en-us')
    assert 'wˈɜːld' in phonemes, phonemes
