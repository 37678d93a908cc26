"""How fast the host's reader thread takes a batch's frame off its input socket, with and without busy threads.

The supervisor sends each batch as one frame on the instance's fd 3, a Unix stream socket: a batch of
32 clips of 45 s is a body of 46 MB. The reader thread reads it while the host's other threads run
Python (the main thread between decode chunks, the finisher building texts, the stager). A socket
gives at most its buffer per read, and each read hands the GIL back and forth once.

This sends ``--frames`` frames of ``--body-mib`` MiB from a writer process over a socket pair and
reads them with ``read_frame``, as the host's reader does, in two ways side by side: plain unbuffered
reads (what the host did before ``input_stream.SocketInput``) and ``SocketInput`` (``MSG_WAITALL``),
each once with no other thread and once with ``--busy-threads`` threads that only run Python (the
worst case: some thread always wants the GIL). The host's own switch interval is set.

    /usr/bin/python3 host/bench_input.py --out input.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from voxmux_host.host import GIL_SWITCH_INTERVAL_S  # noqa: E402
from voxmux_host.input_stream import SocketInput  # noqa: E402
from voxmux_host.messages import TAG_RUN_BATCH  # noqa: E402
from voxmux_host.protocol import ByteInput, Frame, encode_frame, read_frame  # noqa: E402

MIB = 1 << 20


def write_frames(fd: int, frames: int, body_bytes: int) -> None:
    """The writer process: ``frames`` frames on the socket ``fd``, as fast as it takes them."""
    frame = encode_frame(Frame(TAG_RUN_BATCH, 1, {'requests': []}, bytes(body_bytes)))
    with socket.socket(fileno=fd) as sock:
        for _ in range(frames):
            sock.sendall(frame)


class _Counting:
    """Counts the reads of another input."""

    def __init__(self, inner: ByteInput) -> None:
        self.inner = inner
        self.reads = 0

    def readinto(self, buffer: memoryview, /) -> int:
        self.reads += 1
        return self.inner.readinto(buffer) or 0


def run(mode: str, busy_threads: int, frames: int, body_bytes: int) -> Dict[str, Any]:
    ours, theirs = socket.socketpair()
    writer = subprocess.Popen(
        [sys.executable, __file__, '--write-fd', str(theirs.fileno()), '--frames', str(frames),
         '--body-bytes', str(body_bytes)],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    stream: ByteInput = SocketInput(ours) if mode == 'waitall' else os.fdopen(ours.detach(), 'rb', buffering=0)
    counting = _Counting(stream)
    stop = threading.Event()

    def spin() -> None:
        count = 0
        while not stop.is_set():
            count += 1

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(busy_threads)]
    for thread in spinners:
        thread.start()
    times_ms: List[float] = []
    try:
        for _ in range(frames):
            start = time.perf_counter()
            frame = read_frame(counting)
            times_ms.append((time.perf_counter() - start) * 1000)
            if frame is None or len(frame.body) != body_bytes:
                raise RuntimeError('Expected a whole frame from the writer')
    finally:
        stop.set()
        for thread in spinners:
            thread.join()
        writer.wait()
    # The first frame includes the writer's start-up.
    steady = times_ms[1:]
    median = statistics.median(steady)
    return {
        'mode': mode,
        'busyThreads': busy_threads,
        'frames': len(steady),
        'msPerFrameP50': round(median, 2),
        'msPerFrameMax': round(max(steady), 2),
        'mbPerS': round(body_bytes / 1e6 / (median / 1000), 1),
        'readsPerFrame': round(counting.reads / frames, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0] if __doc__ else None)
    parser.add_argument('--frames', type=int, default=12)
    parser.add_argument('--body-mib', type=float, default=44.0, help='the body of 32 clips of 45 s is 44 MiB')
    parser.add_argument('--busy-threads', type=int, default=2)
    parser.add_argument('--out', default='bench-input.json')
    parser.add_argument('--write-fd', type=int, help=argparse.SUPPRESS)
    parser.add_argument('--body-bytes', type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write_fd is not None:
        write_frames(args.write_fd, args.frames, args.body_bytes)
        return 0
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    body_bytes = int(args.body_mib * MIB)
    rows = [
        run(mode, busy, args.frames, body_bytes)
        for busy in (0, args.busy_threads)
        for mode in ('plain', 'waitall')
    ]
    print('mode     busy threads  ms/frame p50  ms/frame max    MB/s  reads/frame')
    for row in rows:
        print(f"{row['mode']:<8} {row['busyThreads']:>12} {row['msPerFrameP50']:>13} {row['msPerFrameMax']:>13}"
              f" {row['mbPerS']:>7} {row['readsPerFrame']:>12}")
    report = {
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'machine': {'python': platform.python_version(), 'cpus': os.cpu_count(), 'platform': platform.platform()},
        'switchIntervalS': GIL_SWITCH_INTERVAL_S,
        'bodyBytes': body_bytes,
        'command': ' '.join([Path(sys.executable).name, *sys.argv]),
        'rows': rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + '\n')
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
