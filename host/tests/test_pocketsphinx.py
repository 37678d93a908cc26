"""The pocketsphinx adapter on speech synthesised by flite, in process and through a host."""
import os
import shutil
import subprocess
import wave
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import pytest

from host_process import HostProcess, host_argv
from voxmux_host.errors import InstanceError
from voxmux_host.model_api import LoadContext, ItemFailure, BatchInput, Transcript
from voxmux_host.messages import (
    BatchItem,
    BatchResult,
    Close,
    Closed,
    Hello,
    LoadRequest,
    LoadResult,
    RunBatch,
    WarmupRequest,
    WarmupResult,
)

pytest.importorskip('pocketsphinx.pocketsphinx')
from voxmux_host.models.pocketsphinx_asr import (  # noqa: E402
    DEFAULT_HMM_PATH,
    PocketsphinxAdapter,
    clean_word,
    is_filler,
    to_pcm16,
)

pytestmark = [
    pytest.mark.skipif(shutil.which('flite') is None, reason='flite is not installed'),
    pytest.mark.skipif(not os.path.isdir(DEFAULT_HMM_PATH), reason='pocketsphinx-en-us is not installed'),
]

SENTENCE = 'the weather today is sunny and warm with a light breeze from the west'
SECOND_SENTENCE = 'turn off the lights in the kitchen and close the door'
MAX_WER = 0.35
SAMPLE_RATE_HZ = 16000


def word_error_rate(reference: str, hypothesis: str) -> float:
    ref, hyp = reference.split(), hypothesis.split()
    distance = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        previous, distance[0] = distance[0], i
        for j, hyp_word in enumerate(hyp, 1):
            current = min(distance[j] + 1, distance[j - 1] + 1, previous + (ref_word != hyp_word))
            previous, distance[j] = distance[j], current
    return distance[len(hyp)] / len(ref)


def synthesize(text: str, path: Path) -> npt.NDArray[np.int16]:
    subprocess.run(['flite', '-voice', 'slt', '-t', text, '-o', str(path)], check=True, capture_output=True)
    with wave.open(str(path)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE_HZ, 1, 2)
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype='<i2').astype(np.int16)


@pytest.fixture(scope='module')
def speech(tmp_path_factory: pytest.TempPathFactory) -> npt.NDArray[np.int16]:
    return synthesize(SENTENCE, tmp_path_factory.mktemp('speech') / 'sentence.wav')


@pytest.fixture(scope='module')
def second_speech(tmp_path_factory: pytest.TempPathFactory) -> npt.NDArray[np.int16]:
    return synthesize(SECOND_SENTENCE, tmp_path_factory.mktemp('speech') / 'second.wav')


@pytest.fixture(scope='module')
def adapter() -> Iterator[PocketsphinxAdapter]:
    loaded = PocketsphinxAdapter()
    loaded.load(LoadContext('ps-0', 'pocketsphinx-en-us', {}))
    loaded.warmup()
    yield loaded
    loaded.close()


def run_one(adapter: PocketsphinxAdapter, request: BatchInput) -> Transcript:
    [result] = adapter.run([request])
    assert isinstance(result, Transcript), result
    return result


def test_transcribes_a_synthesized_sentence_with_word_times(
        adapter: PocketsphinxAdapter, speech: npt.NDArray[np.int16]) -> None:
    result = run_one(adapter, BatchInput('r', speech, 'en', None, True))
    assert word_error_rate(SENTENCE, result.text) <= MAX_WER, result.text
    assert result.language == 'en'
    assert result.duration_s == pytest.approx(len(speech) / SAMPLE_RATE_HZ)
    assert result.words is not None and ' '.join(w.word for w in result.words) == result.text
    times = [t for w in result.words for t in (w.start, w.end)]
    assert times == sorted(times) and 0 <= times[0] and times[-1] <= result.duration_s + 0.01
    assert result.segments is not None and len(result.segments) == 1
    assert result.segments[0].text == result.text


def test_a_long_pause_splits_segments_and_keeps_times_absolute(
        adapter: PocketsphinxAdapter, speech: npt.NDArray[np.int16], second_speech: npt.NDArray[np.int16]) -> None:
    pause = np.zeros(SAMPLE_RATE_HZ, dtype=np.int16)
    audio = np.concatenate([speech, pause, second_speech])
    result = run_one(adapter, BatchInput('r', audio, None, None, True))
    assert result.segments is not None and len(result.segments) == 2
    first, second = result.segments
    assert word_error_rate(SENTENCE, first.text) <= MAX_WER
    assert word_error_rate(SECOND_SENTENCE, second.text) <= MAX_WER
    assert second.start - first.end > 0.5
    # The second sentence starts after the first clip and the pause: silence is counted in time.
    assert second.start >= (len(speech) + len(pause)) / SAMPLE_RATE_HZ - 0.05
    assert result.text == f'{first.text} {second.text}'


def test_a_transcript_does_not_depend_on_what_the_instance_decoded_before(
        speech: npt.NDArray[np.int16], second_speech: npt.NDArray[np.int16]) -> None:
    # The decoder keeps channel estimates (noise level, cepstral mean) from one utterance to the
    # next unless each request starts a new stream: the same audio then gave another transcript
    # after loud noise or after itself.
    noise = np.random.default_rng(3).normal(0, 3000, 2 * SAMPLE_RATE_HZ).astype(np.int16)
    transcripts: List[Tuple[str, List[Tuple[str, float, float]]]] = []
    histories: List[List[npt.NDArray[np.int16]]] = [[], [noise], [second_speech, speech]]
    for before in histories:
        fresh = PocketsphinxAdapter()
        fresh.load(LoadContext('ps-1', 'pocketsphinx-en-us', {}))
        for audio in before:
            run_one(fresh, BatchInput('before', audio))
        result = run_one(fresh, BatchInput('r', speech, None, None, True))
        assert result.words is not None
        transcripts.append((result.text, [(w.word, w.start, w.end) for w in result.words]))
        fresh.close()
    assert transcripts[1] == transcripts[0]
    assert transcripts[2] == transcripts[0]


@pytest.mark.parametrize('samples', [0, SAMPLE_RATE_HZ])
def test_empty_or_silent_audio_gives_empty_text(adapter: PocketsphinxAdapter, samples: int) -> None:
    result = run_one(adapter, BatchInput('r', np.zeros(samples, dtype=np.int16), None, None, True))
    assert (result.text, result.segments, result.words) == ('', (), ())


def test_words_are_left_out_unless_asked_for(adapter: PocketsphinxAdapter, speech: npt.NDArray[np.int16]) -> None:
    assert run_one(adapter, BatchInput('r', speech)).words is None


def test_per_request_failures_do_not_fail_the_batch(
        adapter: PocketsphinxAdapter, speech: npt.NDArray[np.int16]) -> None:
    floats = speech.astype(np.float32) / 32768  # not the wire format
    results = adapter.run([BatchInput('fr', speech, 'fr'), BatchInput('float', floats),  # type: ignore[arg-type]
                           BatchInput('ok', speech[:SAMPLE_RATE_HZ])])
    assert [r.code for r in results if isinstance(r, ItemFailure)] == ['unsupported_option', 'invalid_audio']
    assert isinstance(results[2], Transcript)


@pytest.mark.parametrize('options', [{'hmmPath': '/nonexistent'}, {'lmPath': '/nonexistent.lm'}, {'beam': 1}])
def test_bad_options_fail_the_load(options: Dict[str, Any]) -> None:
    with pytest.raises(InstanceError) as caught:
        PocketsphinxAdapter().load(LoadContext('i', 'm', options))
    assert caught.value.code == 'load_failed'


def test_to_pcm16_dithers_only_digital_silence_seeded_by_the_audio() -> None:
    audio = np.array([0] * 64 + [5, -32768, 32767, -1] + [0] * 64, dtype=np.int16)
    before = audio.copy()
    pcm = np.frombuffer(to_pcm16(audio), dtype='<i2')
    assert np.array_equal(audio, before)  # the request's audio (a view of the batch body) is not written
    assert pcm[64:68].tolist() == [5, -32768, 32767, -1]
    silent = np.concatenate([pcm[:64], pcm[68:]])
    assert set(silent.tolist()) <= {-1, 0, 1} and np.count_nonzero(silent) > 0
    assert to_pcm16(audio) == pcm.tobytes()  # the same audio, the same dither


def test_fillers_and_alternate_pronunciations_are_cleaned() -> None:
    assert [w for w in ['<s>', '</s>', '<sil>', '[NOISE]', '[SPEECH]', '++BREATH++', 'and'] if not is_filler(w)] == [
        'and']
    assert [clean_word(w) for w in ['into(2)', 'read(12)', "o'clock"]] == ['into', 'read', "o'clock"]


def test_host_serves_pocketsphinx_over_the_protocol(
        spawn: Callable[[Sequence[str]], HostProcess], speech: npt.NDArray[np.int16]) -> None:
    host = spawn(host_argv('pocketsphinx'))
    assert 'pocketsphinx' in host.expect(Hello)[0].adapters
    host.request(LoadRequest('ps-0', 'pocketsphinx-en-us', 'pocketsphinx', {}, None), 1, LoadResult)
    host.request(WarmupRequest(), 2, WarmupResult)
    silence = np.zeros(4000, dtype=np.int16)
    items: List[BatchItem] = [BatchItem('speech', len(speech), 'en', None, True, 'transcribe', 0.0, False),
                              BatchItem('silence', len(silence), None, None, False, 'transcribe', 0.0, False)]
    body = speech.astype('<i2').tobytes() + silence.astype('<i2').tobytes()
    result = host.request(RunBatch('b-1', tuple(items), body), 3, BatchResult)
    spoken, quiet = (r.transcript for r in result.results)
    assert spoken is not None and quiet is not None
    assert word_error_rate(SENTENCE, spoken.text) <= MAX_WER
    assert spoken.words is not None and len(spoken.words) == len(spoken.text.split())
    assert (quiet.text, quiet.segments, quiet.words) == ('', (), None)
    host.request(Close(), 4, Closed)
    assert host.wait() == 0


# -- speech synthesis (#18): the default ASR engine understands the CPU voices -----------------

SPOKEN = (SENTENCE, SECOND_SENTENCE, 'please call me back when you get home tonight')
MAX_SYNTHESIS_WER = 0.25


def to_16k(pcm: bytes, rate: int) -> npt.NDArray[np.int16]:
    """The recogniser's rate, by linear interpolation: enough for speech-band audio at 8 and 32 kHz."""
    samples = np.frombuffer(pcm, dtype='<i2').astype(np.float64)
    if rate == SAMPLE_RATE_HZ:
        return samples.astype(np.int16)
    count = int(len(samples) * SAMPLE_RATE_HZ / rate)
    return np.interp(np.arange(count) * rate / SAMPLE_RATE_HZ, np.arange(len(samples)), samples).astype(np.int16)


@pytest.mark.parametrize('voice', ['flite-slt', 'flite-rms', 'flite-awb', 'flite-kal16', 'flite-kal',
                                   'festival-slt-hts', 'festival-kal', 'festival-ked'])
def test_pocketsphinx_recovers_the_text_spoken_by_the_debian_voices(adapter: PocketsphinxAdapter, voice: str) -> None:
    from voxmux_host.model_api import StreamRequest
    from voxmux_host.models.debian_voices.adapter import DebianVoicesAdapter

    if voice.startswith('festival-') and shutil.which('festival') is None:
        pytest.skip('festival is not installed')
    voices = DebianVoicesAdapter()
    voices.load(LoadContext('dv-0', 'voxmux-speech-cpu', {'voices': [voice]}))
    try:
        errors, words = 0.0, 0
        for sentence in SPOKEN:
            pieces = list(voices.open_stream(StreamRequest('s', 'r', None, {'sentences': [sentence], 'voice': voice},
                                                           b'')))
            audio = to_16k(b''.join(p.data for p in pieces), pieces[0].meta['sampleRate'])
            text = run_one(adapter, BatchInput('r', audio, 'en', None, False)).text
            errors += word_error_rate(sentence, text) * len(sentence.split())
            words += len(sentence.split())
    finally:
        voices.close()
    assert errors / words <= MAX_SYNTHESIS_WER, voice
