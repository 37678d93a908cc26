"""The misbehaving hosts in test/fixtures/instances/ misbehave exactly as documented."""
import signal
import time
from typing import Callable, Sequence

import pytest

from host_process import HostProcess, fixture_argv
from voxmux_host.messages import Error, Heartbeat, HeartbeatAck, Hello, LoadRequest
from voxmux_host.protocol import PROTOCOL_VERSION, ProtocolError

Spawn = Callable[[Sequence[str]], HostProcess]


def test_wrong_version_announces_protocol_version_99(spawn: Spawn) -> None:
    host = spawn(fixture_argv('wrong_version.py'))
    hello, correlation_id = host.expect(Hello)
    assert (hello.protocol_version, correlation_id) == (99, 0)
    host.close_input()
    assert host.wait() == 0


def test_bad_frame_writes_bytes_that_do_not_decode(spawn: Spawn) -> None:
    host = spawn(fixture_argv('bad_frame.py'))
    received = host.recv()
    assert isinstance(received, ProtocolError) and received.code == 'bad_frame'
    host.close_input()
    assert host.wait() == 0


def test_crash_on_start_exits_1_before_any_frame(spawn: Spawn) -> None:
    host = spawn(fixture_argv('crash_on_start.py'))
    assert host.recv() is None
    assert host.wait() == 1


def test_silent_sends_nothing_until_input_ends(spawn: Spawn) -> None:
    host = spawn(fixture_argv('silent.py'))
    time.sleep(0.3)
    assert host.proc.poll() is None
    host.close_input()
    assert host.recv() is None
    assert host.wait() == 0


def test_oom_exit_kills_itself_with_sigkill_on_load(spawn: Spawn) -> None:
    host = spawn(fixture_argv('oom_exit.py'))
    assert host.expect(Hello)[0].protocol_version == PROTOCOL_VERSION
    assert host.request(Heartbeat(1), 1, HeartbeatAck).seq == 1
    host.send(LoadRequest('i', 'm', 'test', {}, None), 2)
    assert host.recv() is None
    assert host.wait() == -signal.SIGKILL


def test_oom_exit_in_error_mode_answers_load_with_out_of_memory(spawn: Spawn) -> None:
    host = spawn(fixture_argv('oom_exit.py', '--mode', 'error'))
    host.expect(Hello)
    error = host.request(LoadRequest('i', 'm', 'test', {}, None), 2, Error)
    assert (error.code, error.request_id) == ('out_of_memory', None)
    host.close_input()
    assert host.wait() == 0


@pytest.mark.parametrize('name', ['wrong_version.py', 'bad_frame.py', 'silent.py', 'oom_exit.py'])
def test_fixtures_exit_when_input_ends(spawn: Spawn, name: str) -> None:
    host = spawn(fixture_argv(name))
    host.close_input()
    assert host.wait(timeout_s=5) == 0
