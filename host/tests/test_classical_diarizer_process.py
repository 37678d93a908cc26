"""The classical-diarizer in a real instance process: sessions in sequence batches, with the state
resident in the host or attached to the item (a session moved to another instance)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from diarization_support import SAMPLE_RATE_HZ, conversation
from host_process import HostProcess, host_argv
from voxmux_host.messages import Hello, LoadRequest, LoadResult, RunSequenceBatch, SequenceItem, SequenceResult
from voxmux_host.protocol import split_states

Spawn = Callable[[Sequence[str]], HostProcess]
#: session, seq, stateIn, audio, attached state, isLast, options
Item = Tuple[str, int, str, NDArray[np.int16], bytes, bool, Dict[str, Any]]


def _batch(batch_id: str, *items: Item) -> RunSequenceBatch:
    meta = tuple(SequenceItem(f'{batch_id}-{i}', session, seq, audio.size,
                              state_in, len(attached), is_last, options)  # type: ignore[arg-type]
                 for i, (session, seq, state_in, audio, attached, is_last, options) in enumerate(items))
    body = b''.join(audio.astype('<i2').tobytes() + attached for _, _, _, audio, attached, _, _ in items)
    return RunSequenceBatch(batch_id, meta, body)


def _outputs(result: SequenceResult) -> List[Any]:
    return [r.output if r.error is None else r.error.code for r in result.results]


def test_sessions_run_in_the_instance_with_resident_or_attached_state(spawn: Spawn) -> None:
    talk = conversation(('flite-kal', 'espeak-en-us+f2', 'espeak-en-gb-scotland+m3'), 2, 50.0)
    size = 15 * SAMPLE_RATE_HZ
    first, second = talk.audio[:size], talk.audio[size:2 * size]
    host = spawn(host_argv('classical-diarizer'))
    host.expect(Hello)
    loaded = host.request(LoadRequest('d-0', 'diarizer', 'classical-diarizer', {}, None), 1, LoadResult)
    assert loaded.work_kinds == ('sequence',)

    one = host.request(_batch('q1', ('a', 0, 'new', first, b'', False, {'chunkOffsetS': 0}),
                              ('w', 0, 'new', talk.audio, b'', True, {'maxSpeakers': 4})), 2, SequenceResult)
    a0, whole = _outputs(one)
    assert whole['speakers'] == 3 and whole['provisional'] == []
    assert a0['finalized'] and a0['finalized'][0]['speaker'] == 0
    state_a0 = split_states(one)[0]

    # Session a goes on with its resident state; b is a on another instance, its state attached.
    two = host.request(_batch('q2', ('a', 1, 'resident', second, b'', False, {'chunkOffsetS': 15}),
                              ('b', 1, 'attached', second, state_a0, False, {'chunkOffsetS': 15})), 3,
                       SequenceResult)
    resident, attached = _outputs(two)
    assert resident == attached
    assert resident['finalized'][0]['start'] >= 15 - 8  # the speech held over from chunk 0 at most
    states = split_states(two)
    assert states[0] == states[1]

    # A bad option fails its item alone, and the session's state stays as it was.
    three = host.request(_batch('q3', ('a', 2, 'resident', second, b'', False, {'chunkOffsetS': 30, 'x': 1}),
                                ('b', 2, 'attached', second, states[1], True, {'chunkOffsetS': 30})), 4,
                         SequenceResult)
    failed, done = _outputs(three)
    assert failed == 'unsupported_option' and done['provisional'] == []
    four = host.request(_batch('q4', ('a', 2, 'resident', second, b'', True, {'chunkOffsetS': 30})), 5, SequenceResult)
    assert _outputs(four) == [done]
