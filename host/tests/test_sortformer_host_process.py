"""The sortformer adapter in instance processes, end to end over real sockets (tiny configuration, CPU):
two sessions batched with resident state, and one of them finished in a second process from the state
the first one returned, with the same output as finishing it in place; two batches in flight at once
(the second begins while the first finishes) give what one batch at a time gives."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from host_process import HostProcess, host_argv
from test_sortformer_streaming import TINY_OPTIONS, recording
from voxmux_host.messages import (Close, Closed, Hello, LoadRequest, LoadResult, RunSequenceBatch, SequenceItem,
                                  SequenceResult)
from voxmux_host.protocol import split_states

Spawn = Callable[[Sequence[str]], HostProcess]
#: session, seq, samples, stateIn, attached state, isLast
Item = Tuple[str, int, npt.NDArray[np.int16], str, bytes, bool]


def start(spawn: Spawn) -> HostProcess:
    host = spawn(host_argv('sortformer'))
    host.expect(Hello)
    loaded = host.request(LoadRequest('diar-0', 'diarize', 'sortformer', dict(TINY_OPTIONS), None), 1, LoadResult)
    assert loaded.work_kinds == ('sequence',)
    return host


def batch(batch_id: str, *items: Item) -> RunSequenceBatch:
    # No chunkOffsetS: each chunk follows the session's previous one (the gateway would send their sum).
    meta = tuple(SequenceItem(f'{batch_id}-{i}', session, seq, len(samples), state_in, len(attached),  # type: ignore[arg-type]
                              is_last, {})
                 for i, (session, seq, samples, state_in, attached, is_last) in enumerate(items))
    body = b''.join(samples.astype('<i2').tobytes() + attached for _, _, samples, _, attached, _ in items)
    return RunSequenceBatch(batch_id, meta, body)


def outputs(result: SequenceResult) -> List[Dict[str, Any]]:
    assert all(r.error is None for r in result.results), [r.error for r in result.results]
    return [r.output for r in result.results if r.output is not None]


def test_a_session_finished_in_another_process_matches_finishing_in_place(spawn: Spawn) -> None:
    a, b = recording(6.0, 30), recording(5.0, 31)
    cut_a, cut_b = [0, 40000, 70000, a.shape[0]], [0, 30000, 60000, b.shape[0]]
    host = start(spawn)
    first = host.request(batch('q1', ('a', 0, a[: cut_a[1]], 'new', b'', False),
                               ('b', 0, b[: cut_b[1]], 'new', b'', False)), 2, SequenceResult)
    assert len(outputs(first)) == 2
    second = host.request(batch('q2', ('a', 1, a[cut_a[1]: cut_a[2]], 'resident', b'', False),
                                ('b', 1, b[cut_b[1]: cut_b[2]], 'resident', b'', False)), 3, SequenceResult)
    state_a = split_states(second)[0]
    assert 0 < len(state_a) < 1 << 20
    in_place = host.request(batch('q3', ('a', 2, a[cut_a[2]:], 'resident', b'', True),
                                  ('b', 2, b[cut_b[2]:], 'resident', b'', True)), 4, SequenceResult)
    host.request(Close(), 5, Closed)
    assert host.wait() == 0

    other = start(spawn)
    resumed = other.request(batch('q3', ('a', 2, a[cut_a[2]:], 'attached', state_a, True)), 2, SequenceResult)
    assert outputs(resumed)[0] == outputs(in_place)[0]
    assert outputs(resumed)[0]['provisional'] == []
    other.request(Close(), 3, Closed)
    assert other.wait() == 0


def test_two_batches_in_flight_give_what_one_at_a_time_gives(spawn: Spawn) -> None:
    audios = [recording(5.0, 50 + i) for i in range(4)]
    cuts = [[0, 30000, 55000, a.shape[0]] for a in audios]

    def round_items(k: int, sessions: Sequence[int]) -> List[Item]:
        return [(f's{i}', k, audios[i][cuts[i][k]:cuts[i][k + 1]], 'new' if k == 0 else 'resident', b'', k == 2)
                for i in sessions]

    def run(in_flight: bool) -> List[List[Dict[str, Any]]]:
        host = start(spawn)
        correlation = 2
        results: List[List[Dict[str, Any]]] = []
        for k in range(3):
            first, second = batch(f'q{k}a', *round_items(k, (0, 1))), batch(f'q{k}b', *round_items(k, (2, 3)))
            if in_flight:  # both sent before either answers, as the scheduler does with two in flight
                host.send(first, correlation)
                host.send(second, correlation + 1)
                answers = [host.expect(SequenceResult)[0], host.expect(SequenceResult)[0]]
            else:
                answers = [host.request(first, correlation, SequenceResult),
                           host.request(second, correlation + 1, SequenceResult)]
            correlation += 2
            assert [a.batch_id for a in answers] == [f'q{k}a', f'q{k}b']  # results in the order the batches ran
            results.extend(outputs(a) for a in answers)
        host.request(Close(), correlation, Closed)
        assert host.wait() == 0
        return results

    assert run(in_flight=True) == run(in_flight=False)
