"""The classical-diarizer adapter: accuracy on synthesized conversations (whole file and 15 s chunks),
sessions resumed from their state, the output shape of the diarization engine contract, and every
failure path."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pytest
from numpy.typing import NDArray

from diarization_support import SAMPLE_RATE_HZ, conversation, score_der, turns_from_segments
from voxmux_host.errors import InstanceError
from voxmux_host.model_api import ItemFailure, LoadContext, SequenceAdapter, SequenceInput, SequenceOutput
from voxmux_host.models.classical_diarizer.adapter import ClassicalDiarizerAdapter
from voxmux_host.registry import create_adapter
from voxmux_host.protocol import MAX_STATE_BYTES

CHUNK_S = 15
FOUR_FLITE = (('flite-slt', 'flite-rms', 'flite-awb', 'flite-kal16'), 1, 75.0)
THREE_MIXED = (('flite-kal', 'espeak-en-us+f2', 'espeak-en-gb-scotland+m3'), 2, 50.0)

Result = Union[SequenceOutput, ItemFailure]


def _adapter(options: Optional[Dict[str, Any]] = None) -> ClassicalDiarizerAdapter:
    adapter = ClassicalDiarizerAdapter()
    adapter.load(LoadContext('i0', 'diarizer', dict(options or {})))
    return adapter


def _item(audio: NDArray[np.int16], *, seq: int = 0, state: Optional[bytes] = None, is_last: bool = True,
          options: Optional[Dict[str, Any]] = None) -> SequenceInput:
    return SequenceInput(f'r{seq}', 's1', seq, audio, state, is_last, dict(options or {}))


def _run(adapter: ClassicalDiarizerAdapter, item: SequenceInput) -> Result:
    [result] = adapter.run_sequence([item])
    return result


def _ok(result: Result) -> SequenceOutput:
    assert isinstance(result, SequenceOutput), result
    return result


def _chunks(audio: NDArray[np.int16], chunk_s: float = CHUNK_S) -> List[Tuple[float, NDArray[np.int16]]]:
    size = int(chunk_s * SAMPLE_RATE_HZ)
    return [(at / SAMPLE_RATE_HZ, audio[at:at + size]) for at in range(0, audio.size, size)]


def _session(adapter: ClassicalDiarizerAdapter, audio: NDArray[np.int16],
             extra: Optional[Dict[str, Any]] = None) -> List[SequenceOutput]:
    outputs: List[SequenceOutput] = []
    state: Optional[bytes] = None
    chunks = _chunks(audio)
    for seq, (offset, chunk) in enumerate(chunks):
        options = {'chunkOffsetS': offset, **(extra or {})}
        output = _ok(_run(adapter, _item(chunk, seq=seq, state=state, is_last=seq == len(chunks) - 1,
                                         options=options)))
        outputs.append(output)
        state = output.state
    return outputs


_UNDISTURBED: Dict[Tuple[Tuple[str, ...], int, float], List[SequenceOutput]] = {}


def _undisturbed(spec: Tuple[Tuple[str, ...], int, float]) -> List[SequenceOutput]:
    """The session of 15 s chunks of a conversation with default options, run once per test process."""
    if spec not in _UNDISTURBED:
        _UNDISTURBED[spec] = _session(_adapter(), conversation(*spec).audio)
    return _UNDISTURBED[spec]


def _finalized(outputs: Sequence[SequenceOutput]) -> List[Dict[str, Any]]:
    return [segment for output in outputs for segment in output.output['finalized']]


def _check_shape(segments: Sequence[Dict[str, Any]]) -> None:
    """The contract: sorted by start, ids from 0 in order of first appearance, no overlap within a speaker."""
    starts = [s['start'] for s in segments]
    assert starts == sorted(starts)
    order: List[int] = []
    for s in segments:
        assert s['start'] < s['end']
        if s['speaker'] not in order:
            order.append(s['speaker'])
    assert order == list(range(len(order)))
    for speaker in order:
        own = [s for s in segments if s['speaker'] == speaker]
        assert all(a['end'] <= b['start'] for a, b in zip(own, own[1:]))


@pytest.mark.parametrize('spec', [FOUR_FLITE, THREE_MIXED], ids=['four-flite', 'three-mixed'])
def test_a_whole_file_is_diarized_with_a_der_of_at_most_10_percent(spec: Tuple[Tuple[str, ...], int, float]) -> None:
    talk = conversation(*spec)
    output = _ok(_run(_adapter(), _item(talk.audio))).output
    assert output['provisional'] == []
    _check_shape(output['finalized'])
    score = score_der(talk.turns, turns_from_segments(output['finalized']))
    assert score.der <= 0.10, score
    assert output['speakers'] == len(spec[0])


@pytest.mark.parametrize('spec', [FOUR_FLITE, THREE_MIXED], ids=['four-flite', 'three-mixed'])
def test_a_session_of_15_s_chunks_is_diarized_with_a_der_of_at_most_15_percent(
        spec: Tuple[Tuple[str, ...], int, float]) -> None:
    talk = conversation(*spec)
    outputs = _undisturbed(spec)
    segments = _finalized(outputs)
    _check_shape(segments)
    assert outputs[-1].output['provisional'] == []
    score = score_der(talk.turns, turns_from_segments(segments))
    assert score.der <= 0.15, score
    for output in outputs:
        assert len(output.state) < MAX_STATE_BYTES
        # Provisional segments follow the finalized ones.
        final, guessed = output.output['finalized'], output.output['provisional']
        if final and guessed:
            assert guessed[0]['start'] >= final[-1]['end']


def test_a_session_resumed_from_its_state_on_another_instance_gives_the_same_timeline() -> None:
    talk = conversation(*FOUR_FLITE)
    undisturbed = _undisturbed(FOUR_FLITE)
    chunks = _chunks(talk.audio)
    for cut in (2,):
        state: Optional[bytes] = None
        resumed: List[SequenceOutput] = []
        adapter = _adapter()
        for seq, (offset, chunk) in enumerate(chunks):
            if seq == cut:
                adapter = _adapter()  # a fresh instance: only the state carries the session over
            output = _ok(_run(adapter, _item(chunk, seq=seq, state=state, is_last=seq == len(chunks) - 1,
                                             options={'chunkOffsetS': offset})))
            resumed.append(output)
            state = output.state
        assert [o.output for o in resumed] == [o.output for o in undisturbed]
        assert [o.state for o in resumed] == [o.state for o in undisturbed]


def test_the_gateways_speech_regions_are_used_when_given() -> None:
    talk = conversation(*THREE_MIXED)
    adapter = _adapter()
    silent = _ok(_run(adapter, _item(talk.audio, options={'speech': []}))).output
    assert silent == {'finalized': [], 'provisional': [], 'speakers': 0}
    # Regions from a perfect voice activity detector: the speech the reference says there is.
    regions = [[t.start, t.end] for t in talk.turns]
    output = _ok(_run(adapter, _item(talk.audio, options={'speech': regions}))).output
    spans = [(s['start'], s['end']) for s in output['finalized']]
    assert all(any(a - 0.02 <= start and end <= b + 0.02 for a, b in regions) for start, end in spans)
    assert score_der(talk.turns, turns_from_segments(output['finalized'])).der <= 0.10


def test_a_sessions_speech_regions_are_relative_to_each_chunk() -> None:
    talk = conversation(*THREE_MIXED)
    chunks = _chunks(talk.audio)
    state: Optional[bytes] = None
    segments: List[Dict[str, Any]] = []
    adapter = _adapter()
    for seq, (offset, chunk) in enumerate(chunks):
        end = offset + chunk.size / SAMPLE_RATE_HZ
        speech = [[max(t.start, offset) - offset, min(t.end, end) - offset] for t in talk.turns
                  if t.end > offset and t.start < end]
        output = _ok(_run(adapter, _item(chunk, seq=seq, state=state, is_last=seq == len(chunks) - 1,
                                         options={'chunkOffsetS': offset, 'speech': speech})))
        segments += output.output['finalized']
        state = output.state
    assert score_der(talk.turns, turns_from_segments(segments)).der <= 0.15


def test_max_and_min_speakers_bound_the_speakers_found() -> None:
    talk = conversation(*THREE_MIXED)
    adapter = _adapter()
    two = _ok(_run(adapter, _item(talk.audio, options={'maxSpeakers': 2}))).output
    assert two['speakers'] == 2 and {s['speaker'] for s in two['finalized']} == {0, 1}
    four = _ok(_run(adapter, _item(talk.audio, options={'minSpeakers': 4}))).output
    assert four['speakers'] == 4
    online = _session(adapter, talk.audio, {'maxSpeakers': 2})
    assert {s['speaker'] for s in _finalized(online)} <= {0, 1}
    assert max(o.output['speakers'] for o in online) <= 2
    # A session is not split to reach minSpeakers: a chunk may hold fewer voices than the session.
    at_least_five = _session(adapter, talk.audio, {'minSpeakers': 5})
    assert {s['speaker'] for s in _finalized(at_least_five)} == {0, 1, 2}


def test_the_engine_caps_max_speakers_at_its_own_maximum() -> None:
    talk = conversation(*THREE_MIXED)
    output = _ok(_run(_adapter({'maxSpeakers': 2}), _item(talk.audio, options={'maxSpeakers': 6}))).output
    assert output['speakers'] <= 2


def test_silence_and_empty_audio_have_no_speakers() -> None:
    adapter = _adapter()
    for audio in (np.zeros(3 * SAMPLE_RATE_HZ, dtype=np.int16), np.zeros(0, dtype=np.int16)):
        assert _ok(_run(adapter, _item(audio))).output == {'finalized': [], 'provisional': [], 'speakers': 0}
        first = _ok(_run(adapter, _item(audio, is_last=False)))
        assert first.output['speakers'] == 0
        assert _ok(_run(adapter, _item(audio, seq=1, state=first.state))).output['finalized'] == []


def test_the_same_session_gives_the_same_bytes_every_time() -> None:
    talk = conversation(*THREE_MIXED)
    first, second = _undisturbed(THREE_MIXED), _session(_adapter(), talk.audio)
    assert [o.state for o in first] == [o.state for o in second]


@pytest.mark.parametrize('options, words', [
    ({'language': 'en'}, 'language'),
    ({'maxSpeakers': 0}, 'maxSpeakers'),
    ({'minSpeakers': 'two'}, 'minSpeakers'),
    ({'minSpeakers': 3, 'maxSpeakers': 2}, 'at most maxSpeakers'),
    ({'chunkOffsetS': -1}, 'chunkOffsetS'),
    ({'speech': 'all'}, 'speech'),
    ({'speech': [[2.0, 1.0]]}, 'startS <= endS'),
    ({'speech': [[0.0]]}, 'startS'),
])
def test_a_bad_item_option_fails_that_item_with_unsupported_option(options: Dict[str, Any], words: str) -> None:
    adapter = _adapter()
    audio = np.zeros(SAMPLE_RATE_HZ, dtype=np.int16)
    good, bad = adapter.run_sequence([_item(audio), _item(audio, options=options)])
    assert isinstance(good, SequenceOutput)
    assert isinstance(bad, ItemFailure) and bad.code == 'unsupported_option' and words in bad.message


def test_audio_longer_than_max_item_seconds_fails_with_invalid_audio_and_the_session_goes_on() -> None:
    adapter = _adapter({'maxItemSeconds': 2})
    audio = conversation(*THREE_MIXED).audio
    first = _ok(_run(adapter, _item(audio[:SAMPLE_RATE_HZ], is_last=False)))
    failed = _run(adapter, _item(audio[:3 * SAMPLE_RATE_HZ], seq=1, state=first.state, is_last=False))
    assert isinstance(failed, ItemFailure) and failed.code == 'invalid_audio' and 'at most 2 s' in failed.message
    # The host keeps the state of the last item that succeeded: the retry with a shorter chunk continues.
    assert isinstance(_run(adapter, _item(audio[:SAMPLE_RATE_HZ], seq=1, state=first.state)), SequenceOutput)


def test_a_mismatched_or_corrupt_state_fails_the_item() -> None:
    adapter = _adapter()
    audio = np.zeros(SAMPLE_RATE_HZ, dtype=np.int16)
    state = _ok(_run(adapter, _item(audio, is_last=False))).state
    later = _ok(_run(adapter, _item(audio, seq=1, state=state, is_last=False))).state
    mismatched = _run(adapter, _item(audio, seq=1, state=later))
    assert isinstance(mismatched, ItemFailure) and mismatched.code == 'model_failed' and 'item 2' in mismatched.message
    for corrupt in (b'', b'garbage', state[:12], state[:-1]):
        failed = _run(adapter, _item(audio, seq=1, state=corrupt))
        assert isinstance(failed, ItemFailure) and failed.code == 'model_failed', corrupt


@pytest.mark.parametrize('options', [{'speakers': 2}, {'maxSpeakers': 0}, {'maxSpeakers': 17},
                                     {'clusterThreshold': 'high'}, {'maxItemSeconds': 0}])
def test_a_bad_load_option_fails_the_load(options: Dict[str, Any]) -> None:
    with pytest.raises(InstanceError) as caught:
        _adapter(options)
    assert caught.value.code == 'load_failed'


def test_the_registry_serves_it_as_a_sequence_adapter_that_warms_up() -> None:
    adapter = create_adapter('classical-diarizer')
    assert isinstance(adapter, SequenceAdapter) and adapter.work_kinds == ('sequence',)
    adapter.load(LoadContext('i0', 'diarizer', {}))
    adapter.warmup()
    assert adapter.probe() is True




def test_chunks_of_any_length_follow_each_other_without_gaps_in_time() -> None:
    talk = conversation(*THREE_MIXED)
    adapter = _adapter()
    state: Optional[bytes] = None
    segments: List[Dict[str, Any]] = []
    at, seq = 0, 0
    # Odd lengths (not whole 10 ms frames), one of a single sample, with speech regions that run past the chunk.
    for size in (7 * SAMPLE_RATE_HZ + 37, 1, 5 * SAMPLE_RATE_HZ + 101, 13 * SAMPLE_RATE_HZ + 80):
        chunk = talk.audio[at:at + size]
        options: Dict[str, Any] = {'chunkOffsetS': at / SAMPLE_RATE_HZ}
        if seq == 1:
            options['speech'] = [[0.0, 0.5]]
        output = _ok(_run(adapter, _item(chunk, seq=seq, state=state, is_last=False, options=options)))
        segments += output.output['finalized']
        state, at, seq = output.state, at + size, seq + 1
    last = _ok(_run(adapter, _item(talk.audio[at:], seq=seq, state=state,
                                   options={'chunkOffsetS': at / SAMPLE_RATE_HZ})))
    segments += last.output['finalized']
    _check_shape(segments)
    assert segments[-1]['end'] <= talk.seconds + 0.01
    assert score_der(talk.turns, turns_from_segments(segments)).der <= 0.15


def test_a_session_whose_only_speaker_has_no_usable_piece_yet_goes_on_with_max_speakers() -> None:
    """A first chunk whose only speech is shorter than MIN_PIECE_FRAMES (0.5 s, a "yes") opens
    speaker 0 with no kept pieces. With maxSpeakers 1 (or once maxSpeakers such ids exist), the next
    chunk's speech forms a cluster holding no known speaker's pieces and no id is left, so
    cluster_session would look for the nearest *named* cluster among none (np.argmin of an empty list,
    a ValueError that run_sequence does not turn into an ItemFailure, for every later chunk)."""
    adapter = _adapter()
    rng = np.random.default_rng(0)
    first = rng.normal(0, 3000, 2 * SAMPLE_RATE_HZ).astype(np.int16)
    second = rng.normal(0, 3000, 2 * SAMPLE_RATE_HZ).astype(np.int16)
    out = _ok(_run(adapter, _item(first, is_last=False,
                                  options={'maxSpeakers': 1, 'chunkOffsetS': 0.0, 'speech': [[0.5, 0.8]]})))
    assert out.output['finalized'] == [{'start': 0.5, 'end': 0.8, 'speaker': 0}]
    result = _run(adapter, _item(second, seq=1, state=out.state, is_last=False,
                                 options={'maxSpeakers': 1, 'chunkOffsetS': 2.0, 'speech': [[0.2, 1.5]]}))
    output = _ok(result)
    assert output.output['finalized'] == [{'start': 2.2, 'end': 3.5, 'speaker': 0}]
    assert output.output['speakers'] == 1


def test_short_utterances_of_one_voice_in_successive_chunks_keep_one_speaker_id() -> None:
    """The same voice saying something shorter than 0.5 s in each chunk keeps one speaker id in a session,
    as in the whole file (a speaker with no usable piece keeps its longest: with none, the next chunk's
    cluster would match no known speaker and open another id, and the ninth such chunk would find no id
    left)."""
    adapter = _adapter()
    rng = np.random.default_rng(0)
    chunks = [rng.normal(0, 3000, 2 * SAMPLE_RATE_HZ).astype(np.int16) for _ in range(4)]
    state: Optional[bytes] = None
    speakers = []
    for seq, chunk in enumerate(chunks):
        out = _ok(_run(adapter, _item(chunk, seq=seq, state=state, is_last=seq == len(chunks) - 1,
                                      options={'chunkOffsetS': 2.0 * seq, 'speech': [[0.5, 0.9]]})))
        speakers += [s['speaker'] for s in out.output['finalized']]
        state = out.state
    whole = _ok(_run(adapter, _item(np.concatenate(chunks),
                                    options={'speech': [[0.5 + 2 * k, 0.9 + 2 * k] for k in range(4)]})))
    assert [s['speaker'] for s in whole.output['finalized']] == [0, 0, 0, 0]
    assert speakers == [0, 0, 0, 0]


def test_the_session_goes_on_with_the_next_number_after_a_failed_chunk() -> None:
    """A failed item keeps its number (the scheduler's checkpoint stays the state of the last item that
    succeeded, and sequence-check.ts accepts only nextSeq = failed + 1 afterwards; docs/operations.md:
    "the session goes on with the next number, the failed chunk's audio counted in the offsets"): the
    state goes on with a later number than the one it expects."""
    adapter = _adapter({'maxItemSeconds': 2})
    audio = conversation(*THREE_MIXED).audio
    first = _ok(_run(adapter, _item(audio[:SAMPLE_RATE_HZ], is_last=False, options={'chunkOffsetS': 0.0})))
    failed = _run(adapter, _item(audio[:3 * SAMPLE_RATE_HZ], seq=1, state=first.state, is_last=False,
                                 options={'chunkOffsetS': 1.0}))
    assert isinstance(failed, ItemFailure) and failed.code == 'invalid_audio'
    after = _run(adapter, _item(audio[4 * SAMPLE_RATE_HZ:5 * SAMPLE_RATE_HZ], seq=2, state=first.state,
                                options={'chunkOffsetS': 4.0}))
    assert isinstance(after, SequenceOutput), after


def test_a_chunk_after_a_failed_one_closes_the_running_speech_and_starts_at_its_offset() -> None:
    """Speech running at the end of the last successful chunk ended with its audio when the next chunk
    starts later (a failed chunk between): it is finalized where its audio ended, and the next chunk's
    segments are placed at its chunkOffsetS, not right after the kept speech."""
    adapter = _adapter()
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 3000, 3 * SAMPLE_RATE_HZ).astype(np.int16)
    first = _ok(_run(adapter, _item(noise[:2 * SAMPLE_RATE_HZ], is_last=False,
                                    options={'chunkOffsetS': 0.0, 'speech': [[0.5, 2.0]]})))
    assert first.output['finalized'] == [] and first.output['provisional'][-1]['end'] == 2.0
    after = _ok(_run(adapter, _item(noise[2 * SAMPLE_RATE_HZ:], seq=2, state=first.state, is_last=True,
                                    options={'chunkOffsetS': 5.0, 'speech': [[0.0, 1.0]]})))
    segments = after.output['finalized']
    assert segments[0]['start'] == 0.5 and max(s['end'] for s in segments if s['start'] < 5.0) == 2.0
    assert segments[-1] == {'start': 5.0, 'end': 6.0, 'speaker': segments[-1]['speaker']}


def test_an_item_after_failed_first_items_starts_the_session_at_its_offset() -> None:
    """Without a checkpoint (the session's first items all failed) the scheduler sends the next item with
    no state: it starts the session at its chunkOffsetS."""
    adapter = _adapter()
    noise = np.random.default_rng(2).normal(0, 3000, 2 * SAMPLE_RATE_HZ).astype(np.int16)
    out = _ok(_run(adapter, _item(noise, seq=2, is_last=True, options={'chunkOffsetS': 4.0, 'speech': [[0.5, 1.5]]})))
    assert [(s['start'], s['end']) for s in out.output['finalized']] == [(4.5, 5.5)]
