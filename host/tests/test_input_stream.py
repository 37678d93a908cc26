"""The host's input stream: whole frames off a socket in one read per part, pipes as before."""
import fcntl
import io
import os
import socket
import threading
import time
from typing import Iterator, List, Tuple

import pytest

from voxmux_host.input_stream import PIPE_BYTES, SocketInput, open_input
from voxmux_host.messages import TAG_RUN_BATCH
from voxmux_host.protocol import Frame, ProtocolError, encode_frame, read_frame

BODY_BYTES = 4 << 20  # many times a socket's default buffer (about 200 KiB)


class Counting:
    def __init__(self, inner: SocketInput) -> None:
        self.inner = inner
        self.sizes: List[int] = []

    def readinto(self, buffer: memoryview, /) -> int:
        count = self.inner.readinto(buffer)
        self.sizes.append(count)
        return count


@pytest.fixture
def pair() -> Iterator[Tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield ours, theirs
    ours.close()
    theirs.close()


def frame(correlation_id: int, body_bytes: int = BODY_BYTES) -> Frame:
    body = bytes((correlation_id + i) % 251 for i in range(251)) * (body_bytes // 251) + bytes(body_bytes % 251)
    return Frame(TAG_RUN_BATCH, correlation_id, {'batchId': f'b-{correlation_id}'}, body)


def send_in_pieces(sock: socket.socket, data: bytes, piece: int = 65_537, pause_every: int = 16) -> threading.Thread:
    """Sends ``data`` in pieces, with a short pause after every ``pause_every`` pieces (a writer slower
    than the reader), then shuts down."""

    def write() -> None:
        view = memoryview(data)
        for start in range(0, len(view), piece):
            sock.sendall(view[start : start + piece])
            if start // piece % pause_every == 0:
                time.sleep(0.001)
        sock.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_frame_larger_than_the_socket_buffer_is_read_in_one_read_per_part(pair: Tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    frames = [frame(1), frame(2, 1000)]
    writer = send_in_pieces(theirs, b''.join(encode_frame(f) for f in frames))
    stream = Counting(SocketInput(ours))
    assert read_frame(stream) == frames[0]
    # Header, meta and body: one read each, though the body came in 65 pieces.
    meta_bytes = len(encode_frame(frames[0])) - 24 - BODY_BYTES
    assert stream.sizes == [24, meta_bytes, BODY_BYTES]
    assert read_frame(stream) == frames[1]
    assert read_frame(stream) is None
    writer.join()


def test_plain_reads_of_the_same_socket_take_many_reads(pair: Tuple[socket.socket, socket.socket]) -> None:
    # What SocketInput avoids (and why: every read hands the GIL back and forth).
    ours, theirs = pair
    # A pause after every piece: even a reader slowed by a busy machine then finds a piece at a time.
    writer = send_in_pieces(theirs, encode_frame(frame(1)), pause_every=1)
    reads = 0
    with os.fdopen(ours.detach(), 'rb', buffering=0) as raw:

        class Plain:
            def readinto(self, buffer: memoryview, /) -> int:
                nonlocal reads
                reads += 1
                return raw.readinto(buffer) or 0

        assert read_frame(Plain()) == frame(1)
    assert reads > 10
    writer.join()


def test_input_ending_inside_a_frame_is_a_protocol_error(pair: Tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    data = encode_frame(frame(1))
    writer = send_in_pieces(theirs, data[: len(data) - 10])
    with pytest.raises(ProtocolError, match=f'Expected {BODY_BYTES} bytes before end of input: got {BODY_BYTES - 10}'):
        read_frame(SocketInput(ours))
    writer.join()


def test_open_input_reads_a_stream_socket_with_socket_input(pair: Tuple[socket.socket, socket.socket]) -> None:
    ours, theirs = pair
    stream = open_input(ours.detach())
    assert isinstance(stream, SocketInput)
    theirs.sendall(encode_frame(frame(7, 10)))
    theirs.shutdown(socket.SHUT_WR)
    assert read_frame(stream) == frame(7, 10)
    stream.close()


def test_open_input_reads_a_pipe_unbuffered_with_a_wider_buffer() -> None:
    read_end, write_end = os.pipe()
    stream = open_input(read_end)
    assert isinstance(stream, io.FileIO)
    try:
        get_pipe_size = getattr(fcntl, 'F_GETPIPE_SZ', 1032)
        assert fcntl.fcntl(read_end, get_pipe_size) == PIPE_BYTES
        os.write(write_end, encode_frame(frame(3, 100)))
        os.close(write_end)
        assert read_frame(stream) == frame(3, 100)
    finally:
        stream.close()


def test_open_input_leaves_a_datagram_socket_to_plain_reads() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    fd = ours.detach()
    stream = open_input(fd)
    assert isinstance(stream, io.FileIO)
    try:
        assert stream.fileno() == fd
        theirs.send(b'abc')
        assert stream.readinto(memoryview(bytearray(3))) == 3
    finally:
        stream.close()
        theirs.close()
