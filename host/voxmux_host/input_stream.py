"""The host's input (fd 3) as a blocking byte stream whose reads fill a buffer with few GIL hand-offs.

The supervisor starts an instance with a Unix stream socket as fd 3 (Node's ``'pipe'`` stdio is a
socket pair). A socket hands over at most its buffer per ``read`` (about 200 KiB by default), and a
batch of 45 s clips is a body of tens of MiB. Every read releases the GIL for the system call and
has to take it back afterwards: while the host's main and finisher threads keep the GIL busy, each
hand-off waits up to a switch interval, and the reader fell far behind the GPU. :class:`SocketInput`
asks the kernel for the whole remainder at once (``MSG_WAITALL``): one system call, one GIL hand-off,
whatever the socket's buffer. ``host/bench_input.py`` measures both (on a 2-core machine, a 44 MiB
body with two busy threads: 365 ms with plain reads, 49 ms with :class:`SocketInput`;
bench/results/host-input-2026-12-03.md).

Anything else (a pipe, a file) is read with plain unbuffered reads, after asking for 1 MiB pipe
buffers where it is a pipe.
"""
from __future__ import annotations

import fcntl
import os
import socket
import stat

from .protocol import ByteInput

#: The pipe buffer asked for when the input is a pipe (best effort, see :func:`widen_pipe`).
PIPE_BYTES = 1 << 20


class SocketInput:
    """A connected stream socket read with ``MSG_WAITALL``: a read returns fewer bytes than asked for
    only at end of input, on an error or when a signal interrupts it (:func:`read_frame` then reads on)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def readinto(self, buffer: memoryview, /) -> int:
        return self._sock.recv_into(buffer, len(buffer), socket.MSG_WAITALL)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()


def is_stream_socket(fd: int) -> bool:
    return stat.S_ISSOCK(os.fstat(fd).st_mode)


def open_input(fd: int) -> ByteInput:
    """The input stream on ``fd`` (which it takes over): :class:`SocketInput` for a stream socket where
    the platform has ``MSG_WAITALL``, otherwise an unbuffered file. (Unbuffered: a buffered reader's
    lock, held by the blocked reader thread, can abort interpreter exit.)"""
    if is_stream_socket(fd) and hasattr(socket, 'MSG_WAITALL'):
        sock = socket.socket(fileno=fd)
        if sock.type == socket.SOCK_STREAM:
            sock.setblocking(True)
            return SocketInput(sock)
        sock.detach()
    widen_pipe(fd)
    return os.fdopen(fd, 'rb', buffering=0)


def widen_pipe(fd: int) -> None:
    """Asks for 1 MiB pipe buffers: a batch of audio then crosses in a few reads, not hundreds.

    Best effort: not a pipe, not Linux, or above /proc/sys/fs/pipe-max-size leaves it as it is.
    """
    set_pipe_size = getattr(fcntl, 'F_SETPIPE_SZ', 1031)
    try:
        fcntl.fcntl(fd, set_pipe_size, PIPE_BYTES)
    except OSError:
        pass
