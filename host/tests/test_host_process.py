"""The instance process end to end over real sockets and pipes, with the ``test`` adapter."""
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from host_process import HostProcess, elapsed_since, host_argv
from voxmux_host.fakes.test_engine import CRASH_EXIT_CODE, echo_text
from voxmux_host.messages import (
    BatchItem,
    BatchResult,
    Close,
    Closed,
    EngineCounter,
    Error,
    Heartbeat,
    HeartbeatAck,
    Hello,
    LoadRequest,
    LoadResult,
    RunBatch,
    WarmupRequest,
    WarmupResult,
)
from voxmux_host.protocol import PROTOCOL_VERSION, encode_message

Spawn = Callable[[Sequence[str]], HostProcess]


def audio(seed: int, samples: int) -> npt.NDArray[np.int16]:
    return np.random.default_rng(seed).integers(-32768, 32768, samples, dtype=np.int16)


def run_batch(batch_id: str, *items: Any) -> RunBatch:
    """items: (requestId, audio, prompt, wordTimestamps) tuples."""
    requests = tuple(BatchItem(rid, len(a), None, prompt, words, 'transcribe', 0.0, False) for rid, a, prompt, words in items)
    body = b''.join(np.asarray(a, dtype='<i2').tobytes() for _, a, _, _ in items)
    return RunBatch(batch_id, requests, body)


def start_loaded(spawn: Spawn, options: Dict[str, Any], *extra: str, lock: Optional[str] = None) -> HostProcess:
    host = spawn(host_argv('test', *extra))
    host.expect(Hello)
    host.request(LoadRequest('test-0', 'echo', 'test', options, lock), 1, LoadResult)
    return host


def test_host_runs_the_whole_lifecycle_and_answers_heartbeats_during_a_slow_batch(spawn: Spawn) -> None:
    host = spawn(host_argv('test', '--probe-interval-ms', '20'))
    hello, correlation_id = host.expect(Hello)
    assert (hello.protocol_version, hello.pid, correlation_id) == (PROTOCOL_VERSION, host.proc.pid, 0)
    assert list(hello.adapters) == ['classical-diarizer', 'debian-voices', 'parakeet', 'pocketsphinx', 'sortformer', 'test', 'vits', 'whisper']

    loaded = host.request(LoadRequest('test-0', 'echo', 'test', {'batchDelayMs': 600}, None), 1, LoadResult)
    assert (loaded.model, loaded.device) == ('echo', 'cpu')
    # The host times creating the adapter (its imports) as the first boot stage (#20).
    assert [s.stage for s in loaded.stages] == ['import'] and loaded.stages[0].ms >= 0
    assert host.request(WarmupRequest(), 2, WarmupResult).stages == ()
    idle = host.request(Heartbeat(1), 3, HeartbeatAck)
    assert (idle.seq, idle.state, idle.busy_ms, idle.queued_batches) == (1, 'idle', 0, 0)

    first, second = audio(1, 1600), audio(2, 800)
    host.send(run_batch('b-1', ('r-1', first, None, True), ('r-2', second, None, False)), 4)
    host.send(run_batch('b-2', ('r-3', audio(3, 10), None, False)), 5)
    time.sleep(0.2)  # let b-1 start: this test is about answers while the model is busy
    sent = time.monotonic()
    host.send(Heartbeat(2), 6)
    ack, correlation_id = host.expect(HeartbeatAck)
    assert elapsed_since(sent) < 0.25
    assert (correlation_id, ack.seq, ack.state, ack.queued_batches) == (6, 2, 'busy', 1)
    assert 100 <= ack.busy_ms < 600

    result, correlation_id = host.expect(BatchResult)
    assert (correlation_id, result.batch_id) == (4, 'b-1')
    assert result.compute_ms >= 600
    ok_1, ok_2 = (r.transcript for r in result.results)
    assert ok_1 is not None and ok_2 is not None
    assert (result.results[0].request_id, ok_1.text, ok_1.duration_s) == ('r-1', echo_text(first), 0.1)
    assert (result.results[1].request_id, ok_2.text, ok_2.words) == ('r-2', echo_text(second), None)
    assert ok_1.words is not None and [w.word for w in ok_1.words] == ok_1.text.split(' ')
    assert ok_1.segments is not None and len(ok_1.segments) == 1
    result, correlation_id = host.expect(BatchResult)
    assert (correlation_id, result.batch_id) == (5, 'b-2')

    after = host.request(Heartbeat(3), 7, HeartbeatAck)
    assert (after.state, after.busy_ms, after.queued_batches, after.eager_batches) == ('idle', 0, 0, 2)
    assert after.engine_counters == (EngineCounter('requests', 3.0),)  # the adapter's own counts
    host.request(Close(), 8, Closed)
    assert host.wait() == 0
    assert host.recv() is None


def test_batch_result_holds_per_request_failures_beside_successes(spawn: Spawn) -> None:
    host = start_loaded(spawn, {})
    clip = audio(4, 160)
    host.send(run_batch('b', ('ok', clip, None, False), ('fail', clip, 'voxmux-test:fail', False),
                        ('bad', clip, 'voxmux-test:bad-audio', False), ('words', clip, None, True)), 2)
    result, _ = host.expect(BatchResult)
    outcomes = [(r.request_id, 'ok' if r.error is None else r.error.code) for r in result.results]
    assert outcomes == [('ok', 'ok'), ('fail', 'model_failed'), ('bad', 'invalid_audio'), ('words', 'ok')]
    words = result.results[3].transcript
    assert words is not None and words.words is not None


def test_the_next_batch_runs_while_the_last_ones_results_are_built(spawn: Spawn) -> None:
    # Each batch: 600 ms of model work (main thread), then 600 ms building its results (finisher).
    # Back to back, b-2's model work overlaps b-1's finish: b-2's result comes about 1.8 s after
    # both were sent, where one thread doing both parts in turn would need 2.4 s.
    host = start_loaded(spawn, {'batchDelayMs': 600, 'finishDelayMs': 600})
    sent = time.monotonic()
    host.send(run_batch('b-1', ('r-1', audio(20, 160), None, False)), 2)
    host.send(run_batch('b-2', ('r-2', audio(21, 160), None, False)), 3)
    first, correlation_id = host.expect(BatchResult)
    assert (first.batch_id, correlation_id) == ('b-1', 2) and first.compute_ms >= 1200
    second, correlation_id = host.expect(BatchResult)
    assert (second.batch_id, correlation_id) == ('b-2', 3)
    assert 1.7 <= elapsed_since(sent) < 2.2
    # While b-2's results were being built, nothing ran: a heartbeat then says idle.
    assert host.request(Heartbeat(1), 4, HeartbeatAck).state == 'idle'


def test_the_next_batch_is_staged_while_the_last_one_runs(spawn: Spawn) -> None:
    # Each batch: 600 ms of staging (stager thread), then 600 ms of model work (main thread). Staged
    # ahead, b-2's staging overlaps b-1's model work: b-2's result comes about 1.8 s after both were
    # sent, where staging each batch just before running it would need 2.4 s. The echo reads the
    # staged copies, so the results also show that each batch got its own.
    host = start_loaded(spawn, {'stageDelayMs': 600, 'batchDelayMs': 600})
    clips = audio(22, 160), audio(23, 320)
    sent = time.monotonic()
    host.send(run_batch('b-1', ('r-1', clips[0], None, False)), 2)
    host.send(run_batch('b-2', ('r-2', clips[1], None, False)), 3)
    for batch_id, clip in zip(('b-1', 'b-2'), clips):
        result, _ = host.expect(BatchResult)
        assert result.batch_id == batch_id
        transcript = result.results[0].transcript
        assert transcript is not None and transcript.text == echo_text(clip)
    assert 1.7 <= elapsed_since(sent) < 2.2


@pytest.mark.parametrize('transport', ['socket', 'pipe'])
def test_a_batch_larger_than_the_channels_buffer_arrives_whole(transport: str, tmp_path: Path) -> None:
    # 6 MB of audio: many times a socket's or pipe's buffer, so it crosses in many pieces.
    host = HostProcess(host_argv('test'), tmp_path / 'stderr.log', transport=transport)
    try:
        host.expect(Hello)
        host.request(LoadRequest('test-0', 'echo', 'test', {}, None), 1, LoadResult)
        clips = audio(30, 1_500_000), audio(31, 1_500_001)
        host.send(run_batch('big', ('r-1', clips[0], None, False), ('r-2', clips[1], None, False)), 2)
        result, _ = host.expect(BatchResult)
        assert [r.transcript.text for r in result.results if r.transcript is not None] == [echo_text(c) for c in clips]
        host.close_input()
        assert host.wait() == 0
    finally:
        host.stop()


def test_a_batch_whose_results_cannot_be_built_fails_and_the_next_one_does_not(spawn: Spawn) -> None:
    host = start_loaded(spawn, {})
    clip = audio(22, 160)
    host.send(run_batch('b-1', ('r-1', clip, None, False), ('r-2', clip, 'voxmux-test:fail-finish', False)), 2)
    host.send(run_batch('b-2', ('r-3', clip, None, False)), 3)
    failed, _ = host.expect(BatchResult)
    assert failed.batch_id == 'b-1'
    assert [(r.request_id, r.error and r.error.code) for r in failed.results] == [
        ('r-1', 'model_failed'), ('r-2', 'model_failed')]
    assert all(r.error is not None and 'RuntimeError' in r.error.message for r in failed.results)
    ok, _ = host.expect(BatchResult)
    assert ok.batch_id == 'b-2' and ok.results[0].transcript is not None


def test_close_sends_the_results_of_batches_that_ran_before_closed(spawn: Spawn) -> None:
    host = start_loaded(spawn, {'finishDelayMs': 300})
    host.send(run_batch('b-1', ('r-1', audio(23, 16), None, False)), 2)
    host.send(Close(), 3)
    result, _ = host.expect(BatchResult)
    assert result.batch_id == 'b-1'
    host.expect(Closed)
    assert host.wait() == 0


def test_crash_prompt_ends_the_process_mid_batch_without_a_result(spawn: Spawn) -> None:
    host = start_loaded(spawn, {})
    host.send(run_batch('b', ('ok', audio(5, 16), None, False), ('boom', audio(5, 16), 'voxmux-test:crash', False)), 2)
    assert host.recv() is None
    assert host.wait() == CRASH_EXIT_CODE


def test_crash_after_batches_ends_the_process_when_that_many_batches_ran(spawn: Spawn) -> None:
    host = start_loaded(spawn, {'crashAfterBatches': 1})
    host.send(run_batch('b-1', ('r-1', audio(6, 16), None, False)), 2)
    host.expect(BatchResult)
    host.send(run_batch('b-2', ('r-2', audio(6, 16), None, False)), 3)
    assert host.recv() is None
    assert host.wait() == CRASH_EXIT_CODE


def test_hung_batch_keeps_heartbeats_answered_with_growing_busy_ms(spawn: Spawn) -> None:
    host = start_loaded(spawn, {})
    host.send(run_batch('b', ('r', audio(7, 16), 'voxmux-test:hang', False)), 2)
    time.sleep(0.15)
    first = host.request(Heartbeat(1), 3, HeartbeatAck)
    time.sleep(0.3)
    second = host.request(Heartbeat(2), 4, HeartbeatAck)
    assert (first.state, second.state) == ('busy', 'busy')
    assert second.busy_ms - first.busy_ms >= 250
    # End of input while a batch runs: nothing can use its result, so the process leaves at once.
    host.close_input()
    assert host.wait(timeout_s=3) == 0


def test_failed_probe_marks_the_instance_wedged(spawn: Spawn) -> None:
    host = start_loaded(spawn, {'wedgeProbe': True}, '--probe-interval-ms', '30')
    assert poll_state(host, 'wedged') == 'wedged'


def test_probe_past_its_timeout_marks_the_instance_wedged(spawn: Spawn) -> None:
    host = start_loaded(spawn, {'probeDelayMs': 3000}, '--probe-interval-ms', '30', '--probe-timeout-ms', '100')
    assert poll_state(host, 'wedged') == 'wedged'
    # Wedged is reported, not fatal: the supervisor decides, and the host still serves frames.
    host.send(run_batch('b', ('r', audio(8, 16), None, False)), 90)
    host.expect(BatchResult)


def test_healthy_probe_leaves_the_instance_idle(spawn: Spawn) -> None:
    host = start_loaded(spawn, {}, '--probe-interval-ms', '10', '--probe-timeout-ms', '1000')
    time.sleep(0.3)
    assert host.request(Heartbeat(1), 2, HeartbeatAck).state == 'idle'


def poll_state(host: HostProcess, wanted: str, timeout_s: float = 3.0) -> str:
    deadline = time.monotonic() + timeout_s
    seq = 100
    state = ''
    while time.monotonic() < deadline:
        seq += 1
        state = host.request(Heartbeat(seq), seq, HeartbeatAck).state
        if state == wanted:
            break
        time.sleep(0.05)
    return state


def test_close_finishes_queued_batches_even_when_input_ends_after_it(spawn: Spawn) -> None:
    host = start_loaded(spawn, {'batchDelayMs': 100})
    host.send(run_batch('b-1', ('r-1', audio(9, 16), None, False)), 2)
    host.send(run_batch('b-2', ('r-2', audio(9, 16), None, False)), 3)
    host.send(Close(), 4)
    host.close_input()
    assert [host.expect(BatchResult)[1], host.expect(BatchResult)[1], host.expect(Closed)[1]] == [2, 3, 4]
    assert host.wait() == 0


def test_end_of_input_when_idle_exits_0(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    host.close_input()
    assert host.wait() == 0


def test_garbage_on_the_input_is_a_bad_frame_and_exits_3(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    host.send_bytes(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    error, correlation_id = host.expect(Error)
    assert (error.code, correlation_id) == ('bad_frame', 0)
    assert host.wait() == 3


def test_a_host_message_sent_down_is_a_bad_frame(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    host.send_bytes(encode_message(Closed(), 1))
    assert host.expect(Error)[0].code == 'bad_frame'
    assert host.wait() == 3


def test_load_failures_are_reported_and_the_host_keeps_serving(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    failures = [
        host.request(LoadRequest('i', 'm', 'test', {'failLoad': True}, None), 1, Error),
        host.request(LoadRequest('i', 'm', 'test', {'noSuchOption': 1}, None), 2, Error),
        host.request(LoadRequest('i', 'm', 'pocketsphinx', {}, None), 3, Error),
        host.request(LoadRequest('i', 'm', 'test', {}, '/nonexistent-dir/voxmux.lock'), 4, Error),
    ]
    assert [f.code for f in failures] == ['load_failed'] * 4
    assert "Expected adapter 'test': got 'pocketsphinx'" in failures[2].message
    host.request(LoadRequest('i', 'm', 'test', {}, None), 5, LoadResult)
    assert host.request(LoadRequest('i', 'm', 'test', {}, None), 6, Error).code == 'load_failed'


def test_work_before_load_is_rejected_with_an_error_frame(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    assert host.request(run_batch('b', ('r', audio(10, 4), None, False)), 1, Error).code == 'model_failed'
    assert host.request(WarmupRequest(), 2, Error).code == 'model_failed'


def test_crash_on_load_ends_the_process(spawn: Spawn) -> None:
    host = spawn(host_argv('test'))
    host.expect(Hello)
    host.send(LoadRequest('i', 'm', 'test', {'crashOnLoad': True}, None), 1)
    assert host.recv() is None
    assert host.wait() == CRASH_EXIT_CODE


LOAD_DELAY_MS = 400


def load_two_at_once(spawn: Spawn, lock_path: Optional[str] = None) -> float:
    """Seconds from sending two LoadRequests (each followed by its WarmupRequest: the lock is held through
    warmup) to the later WarmupResult."""
    hosts = [spawn(host_argv('test')) for _ in range(2)]
    for host in hosts:
        host.expect(Hello)
    started = time.monotonic()
    for host in hosts:
        host.send(LoadRequest('i', 'm', 'test', {'loadDelayMs': LOAD_DELAY_MS}, lock_path), 1)
        host.send(WarmupRequest(), 2)
    for host in hosts:
        host.expect(LoadResult)
        host.expect(WarmupResult)
    return elapsed_since(started)


def test_the_load_lock_is_held_until_the_warmup_ends(spawn: Spawn, tmp_path: Path) -> None:
    lock = str(tmp_path / 'load.lock')
    host = spawn(host_argv('test'))
    host.expect(Hello)
    host.request(LoadRequest('i', 'm', 'test', {}, lock), 1, LoadResult)
    with open(lock, 'ab') as other:  # another instance's load on the same machine waits
        with pytest.raises(BlockingIOError):
            fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        host.request(WarmupRequest(), 2, WarmupResult)
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once warmed up


def test_load_lock_serializes_loads_that_share_it(spawn: Spawn, tmp_path: Path) -> None:
    assert load_two_at_once(spawn, str(tmp_path / 'load.lock')) >= 2 * LOAD_DELAY_MS / 1000 * 0.95


def test_loads_without_a_lock_overlap(spawn: Spawn) -> None:
    assert load_two_at_once(spawn, None) < 2 * LOAD_DELAY_MS / 1000 * 0.95


def test_logs_are_json_lines(spawn: Spawn) -> None:
    host = start_loaded(spawn, {})
    host.request(Close(), 2, Closed)
    assert host.wait() == 0
    records = [json.loads(line) for line in host.stderr_text().splitlines()]
    assert records and all({'level', 'msg', 'time'} <= record.keys() for record in records)


@pytest.mark.parametrize('argv', [
    ['--adapter', 'nope'], ['--adapter', 'test', '--probe-interval-ms', '-1'],
    ['--adapter', 'test', '--probe-timeout-ms', '0'], [],
])
def test_bad_arguments_exit_2(spawn: Spawn, argv: List[str]) -> None:
    host = spawn(host_argv('test')[:3] + argv)
    assert host.wait() == 2


def test_the_host_process_runs_with_the_hosts_gil_switch_interval() -> None:
    import subprocess
    import sys

    from host_process import HOST_DIR
    from voxmux_host.host import GIL_SWITCH_INTERVAL_S

    env = dict(os.environ, PYTHONPATH=str(HOST_DIR))
    # The entry point sets it first thing; without protocol pipes it then returns 2 at once.
    code = ('import sys; from voxmux_host.__main__ import main; '
            'rc = main(["--adapter", "test"]); print(rc, sys.getswitchinterval())')
    done = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=10)
    rc, interval = done.stdout.split()
    assert (int(rc), float(interval)) == (2, GIL_SWITCH_INTERVAL_S)
    assert GIL_SWITCH_INTERVAL_S < 0.005  # below Python's default


def test_missing_protocol_pipes_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    from host_process import HOST_DIR

    env = dict(os.environ, PYTHONPATH=str(HOST_DIR))
    # pass_fds=() with close_fds=True leaves fds 3 and 4 closed in the child.
    done = subprocess.run([sys.executable, '-m', 'voxmux_host', '--adapter', 'test'], env=env, capture_output=True,
                          timeout=10)
    assert done.returncode == 2
