"""The test adapter's diarization sequence mode: deterministic turns from loudness levels, resumable state."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
from numpy.typing import NDArray

from voxmux_host.fakes.test_engine import TestEngineAdapter
from voxmux_host.model_api import ItemFailure, LoadContext, SequenceInput, SequenceOutput

RATE = 16000


def _adapter() -> TestEngineAdapter:
    adapter = TestEngineAdapter()
    adapter.load(LoadContext('i', 'm', {}))
    return adapter


def _tone(seconds: float, amplitude: int) -> NDArray[np.int16]:
    n = int(seconds * RATE)
    return (np.where(np.arange(n) % 2 == 0, 1, -1) * amplitude).astype(np.int16)


def _item(audio: NDArray[np.int16], seq: int, state: Optional[bytes], offset: float, is_last: bool = False,
          **options: Any) -> SequenceInput:
    return SequenceInput('r', 's', seq, audio, state, is_last, {'chunkOffsetS': offset, **options})


def _run(adapter: TestEngineAdapter, item: SequenceInput) -> SequenceOutput:
    out = adapter.run_sequence([item])[0]
    assert isinstance(out, SequenceOutput), out
    return out


def _conversation() -> NDArray[np.int16]:
    # speaker 0 (level 1), silence, speaker 1 (level 3), speaker 0 again
    return np.concatenate([_tone(1.0, 3000), _tone(0.5, 0), _tone(1.5, 8000), _tone(1.0, 3000)])


def test_whole_file_gives_a_turn_per_loudness_run() -> None:
    out = _run(_adapter(), _item(_conversation(), 0, None, 0.0, is_last=True))
    assert out.output == {'finalized': [{'start': 0.0, 'end': 1.0, 'speaker': 0}, {'start': 1.5, 'end': 3.0, 'speaker': 1},
                                        {'start': 3.0, 'end': 4.0, 'speaker': 0}],
                          'provisional': [], 'speakers': 2}
    assert len(out.state) < 1 << 20


def test_chunks_give_the_whole_file_timeline_and_the_open_turn_is_provisional() -> None:
    adapter = _adapter()
    audio = _conversation()
    chunks: List[NDArray[np.int16]] = [audio[:int(2.0 * RATE)], audio[int(2.0 * RATE):]]
    first = _run(adapter, _item(chunks[0], 0, None, 0.0))
    assert first.output['finalized'] == [{'start': 0.0, 'end': 1.0, 'speaker': 0}]
    assert first.output['provisional'] == [{'start': 1.5, 'end': 2.0, 'speaker': 1}]
    # resumed on a fresh adapter with the state: the same as one run
    second = _run(_adapter(), _item(chunks[1], 1, first.state, 2.0, is_last=True))
    assert second.output['finalized'] == [{'start': 1.5, 'end': 3.0, 'speaker': 1}, {'start': 3.0, 'end': 4.0, 'speaker': 0}]
    assert second.output['provisional'] == []


def test_speech_regions_silence_frames_outside_them_and_max_speakers_caps() -> None:
    out = _run(_adapter(), _item(_conversation(), 0, None, 0.0, is_last=True, speech=[[0.0, 1.0]]))
    assert out.output['finalized'] == [{'start': 0.0, 'end': 1.0, 'speaker': 0}]
    capped = _run(_adapter(), _item(_conversation(), 0, None, 0.0, is_last=True, maxSpeakers=1))
    assert capped.output['speakers'] == 1
    assert {s['speaker'] for s in capped.output['finalized']} == {0}


def test_bad_options_and_states_fail_the_item() -> None:
    adapter = _adapter()
    bad: List[Dict[str, Any]] = [{'chunkOffsetS': -1}, {'chunkOffsetS': 0, 'maxSpeakers': 0},
                                 {'chunkOffsetS': 0, 'speech': [[2, 1]]}, {'chunkOffsetS': 0, 'other': 1}]
    for options in bad:
        out = adapter.run_sequence([SequenceInput('r', 's', 0, _tone(0.2, 3000), None, False, options)])[0]
        assert isinstance(out, ItemFailure) and out.code == 'unsupported_option', options
    out = adapter.run_sequence([_item(_tone(0.2, 3000), 1, b'not json', 0.0)])[0]
    assert isinstance(out, ItemFailure) and out.code == 'invalid_audio'
