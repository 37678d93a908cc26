"""Spawns a model host (or a fixture) with the protocol channels on fds 3 and 4: Unix stream sockets, as the
supervisor gives them (Node's 'pipe' stdio is a socket pair), or pipes."""
from __future__ import annotations

import fcntl
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Type, TypeVar, Union

from voxmux_host.messages import Message
from voxmux_host.protocol import ProtocolError, encode_message, from_frame, read_frame

HOST_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = HOST_DIR.parent
FIXTURE_INSTANCES = REPO_DIR / 'test' / 'fixtures' / 'instances'
RECV_TIMEOUT_S = 10.0

T = TypeVar('T')
Received = Union[Tuple[Message, int], ProtocolError, None]


def host_argv(adapter: str, *extra: str) -> List[str]:
    return [sys.executable, '-m', 'voxmux_host', '--adapter', adapter, *extra]


def fixture_argv(name: str, *extra: str) -> List[str]:
    return [sys.executable, str(FIXTURE_INSTANCES / name), *extra]


def _channel(transport: str) -> Tuple[int, int]:
    """(read end, write end) file descriptors, both close-on-exec."""
    if transport == 'pipe':
        return os.pipe()
    if transport != 'socket':
        raise ValueError(f"Expected transport 'socket' or 'pipe': got {transport!r}")
    read_end, write_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return read_end.detach(), write_end.detach()


class HostProcess:
    """One child process; frames go down on its fd 3 and come up on its fd 4 (``transport``: 'socket' or
    'pipe')."""

    def __init__(self, argv: Sequence[str], stderr_path: Path, transport: str = 'socket') -> None:
        down_r, down_w = _channel(transport)
        up_r, up_w = _channel(transport)

        def move_pipes() -> None:
            # Runs in the child between fork and exec. Lift both ends above 10 first, so that
            # placing one on fd 3 or 4 cannot overwrite the other.
            high_r = fcntl.fcntl(down_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(up_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            os.close(high_r)
            os.close(high_w)

        env = dict(os.environ, PYTHONPATH=str(HOST_DIR))
        self.stderr_path = stderr_path
        with open(stderr_path, 'wb') as stderr:
            # close_fds=False: every other descriptor here is close-on-exec already, and
            # closing would also close the fds 3 and 4 that move_pipes() has just placed.
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                         env=env, cwd=str(HOST_DIR), close_fds=False, preexec_fn=move_pipes)
        os.close(down_r)
        os.close(up_w)
        self._down: Optional[int] = down_w
        self._received: 'queue.Queue[Received]' = queue.Queue()
        self._reader = threading.Thread(target=self._read, args=(os.fdopen(up_r, 'rb', buffering=0),), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        with stream:
            while True:
                try:
                    frame = read_frame(stream)
                    if frame is None:
                        self._received.put(None)
                        return
                    self._received.put((from_frame(frame), frame.correlation_id))
                except ProtocolError as err:
                    self._received.put(err)
                    return

    def send(self, message: Message, correlation_id: int = 0) -> None:
        self.send_bytes(encode_message(message, correlation_id))

    def send_bytes(self, data: bytes) -> None:
        assert self._down is not None, 'input already closed'
        view = memoryview(data)
        while view:
            view = view[os.write(self._down, view):]

    def recv(self, timeout_s: float = RECV_TIMEOUT_S) -> Received:
        """The next message with its correlation id; None at end of output; a ProtocolError as is."""
        try:
            return self._received.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f'No frame within {timeout_s} s; stderr: {self.stderr_text()}') from None

    def expect(self, kind: Type[T], timeout_s: float = RECV_TIMEOUT_S) -> Tuple[T, int]:
        """The next message, which must be a ``kind`` (a class, or a tuple of classes)."""
        name = getattr(kind, '__name__', repr(kind))
        received = self.recv(timeout_s)
        assert isinstance(received, tuple), f'Expected {name}: got {received!r}; {self.stderr_text()}'
        message, correlation_id = received
        assert isinstance(message, kind), f'Expected {name}: got {message!r}'
        return message, correlation_id

    def nothing_within(self, timeout_s: float) -> bool:
        """True when no frame comes within ``timeout_s``."""
        try:
            received = self._received.get(timeout=timeout_s)
        except queue.Empty:
            return True
        raise AssertionError(f'Expected nothing within {timeout_s} s: got {received!r}')

    def request(self, message: Message, correlation_id: int, kind: Type[T]) -> T:
        self.send(message, correlation_id)
        reply, got = self.expect(kind)
        assert got == correlation_id
        return reply

    def close_input(self) -> None:
        if self._down is not None:
            os.close(self._down)
            self._down = None

    def wait(self, timeout_s: float = RECV_TIMEOUT_S) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors='replace')

    def stop(self) -> None:
        self.close_input()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
