"""Reading weight files fast: large reads on several threads into one preallocated buffer.

One thread reading a file a chunk at a time waits for each read before it asks for the next, so a
device that serves many requests at once (NVMe, a network volume) sees a queue depth of one. Here
``threads`` threads each read ``block_bytes`` at a time with ``os.preadv`` (which releases the GIL
and writes straight into the buffer, no copy) until the range is read. The buffer is then
deserialized from memory (:class:`MemoryReader` for ``torch.load``).

bench/gpu/boot.sh measures this against the previous path (extracting the checkpoint to a
temporary file, then ``torch.load`` with ``mmap``).
"""
from __future__ import annotations

import io
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


import numpy as np
import numpy.typing as npt

__all__ = ['DEFAULT_BLOCK_BYTES', 'DEFAULT_THREADS', 'MemoryReader', 'RangeRead', 'read_range']

DEFAULT_THREADS = 8
DEFAULT_BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class RangeRead:
    """What :func:`read_range` read: the bytes (uint8, ``length`` long) and how long it took."""

    data: npt.NDArray[np.uint8]
    ms: float


def read_range(path: str, offset: int, length: int, *, threads: int = DEFAULT_THREADS,
               block_bytes: int = DEFAULT_BLOCK_BYTES) -> RangeRead:
    """Reads ``length`` bytes of ``path`` from ``offset`` with ``threads`` threads, ``block_bytes`` per read.

    Raises ``OSError`` when the file cannot be read and ``EOFError`` when it ends before the range does.
    """
    if offset < 0 or length < 0:
        raise ValueError(f'Expected a non-negative offset and length: got {offset} and {length}')
    if threads < 1 or block_bytes < 1:
        raise ValueError(f'Expected at least one thread and one byte per block: got {threads} and {block_bytes}')
    started = time.perf_counter()
    data = np.empty(length, dtype=np.uint8)
    view = data.data
    fd = os.open(path, os.O_RDONLY)
    try:
        def read_block(start: int) -> None:
            end = min(start + block_bytes, length)
            done = start
            while done < end:
                got = _pread_into(fd, view[done:end], offset + done)
                if got == 0:
                    raise EOFError(f'{path} ends at byte {offset + done}: expected {offset + length} bytes')
                done += got

        starts = range(0, length, block_bytes)
        if threads == 1 or len(starts) <= 1:
            for start in starts:
                read_block(start)
        else:
            with ThreadPoolExecutor(max_workers=min(threads, len(starts)), thread_name_prefix='weight-read') as pool:
                for _ in pool.map(read_block, starts):
                    pass
    finally:
        os.close(fd)
    return RangeRead(data, (time.perf_counter() - started) * 1000)


def _pread_into(fd: int, target: memoryview, offset: int) -> int:
    if hasattr(os, 'preadv'):
        return os.preadv(fd, [target], offset)
    chunk = os.pread(fd, len(target), offset)  # no preadv (macOS before 11): one extra copy
    target[:len(chunk)] = chunk
    return len(chunk)


class MemoryReader(io.RawIOBase):
    """A read-only, seekable file over a buffer, without copying it (``io.BytesIO`` copies): what
    ``torch.load`` reads a checkpoint from once it is in memory."""

    def __init__(self, data: npt.NDArray[np.uint8]) -> None:
        super().__init__()
        self._view = data.data.cast('B')
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: 'memoryview | bytearray') -> int:  # type: ignore[override]
        target = memoryview(buffer).cast('B')
        count = max(0, min(len(target), len(self._view) - self._position))
        target[:count] = self._view[self._position:self._position + count]
        self._position += count
        return count

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:
            raise ValueError(f'Cannot seek before the start: {base + offset}')
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

