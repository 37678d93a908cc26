"""Reading weight files with parallel large reads (#20): the bytes equal the file's, a checkpoint read
that way loads equal to ``torch.load`` of the file, and a short file fails clearly."""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np
import pytest
import torch

from voxmux_host.weight_read import MemoryReader, read_range


@pytest.fixture()
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(np.random.default_rng(3).integers(0, 256, 1_000_003, dtype=np.uint8).tobytes())
    return path


@pytest.mark.parametrize("threads,block_bytes", [(1, 1 << 20), (4, 4096), (8, 65_537), (3, 10_000_000)])
def test_reads_the_range_exactly_whatever_the_threads_and_block_size(
    data_file: Path, threads: int, block_bytes: int
) -> None:
    whole = data_file.read_bytes()
    got = read_range(str(data_file), 513, 900_000, threads=threads, block_bytes=block_bytes)
    assert got.data.tobytes() == whole[513:900_513]
    assert got.ms >= 0
    assert read_range(str(data_file), 0, 0).data.size == 0


def test_a_file_shorter_than_the_range_fails_with_eof(data_file: Path) -> None:
    with pytest.raises(EOFError, match="ends at byte 1000003"):
        read_range(str(data_file), 1000, 1_000_000, threads=4, block_bytes=100_000)
    with pytest.raises(FileNotFoundError):
        read_range(str(data_file) + ".absent", 0, 10)
    with pytest.raises(ValueError):
        read_range(str(data_file), 0, 10, threads=0)


def test_a_checkpoint_read_in_parallel_loads_equal_to_torch_load_of_the_file(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(5)
    state = {
        "encoder.weight": torch.randn(300, 257, generator=generator),
        "encoder.bias": torch.randn(257, generator=generator).to(torch.bfloat16),
        "steps": torch.arange(7),
        "empty": torch.zeros(0),
    }
    path = tmp_path / "weights.ckpt"
    torch.save(state, path)
    expected = torch.load(path, map_location="cpu")
    read = read_range(str(path), 0, os.path.getsize(path), threads=4, block_bytes=8192)
    loaded = torch.load(cast(BinaryIO, MemoryReader(read.data)), map_location="cpu")
    assert list(loaded) == list(expected)
    for name, tensor in expected.items():
        assert loaded[name].dtype == tensor.dtype and torch.equal(loaded[name], tensor), name


def test_memory_reader_reads_and_seeks_like_a_file() -> None:
    data = np.frombuffer(b"0123456789", dtype=np.uint8)
    reader = MemoryReader(data)
    assert reader.read(3) == b"012"
    assert reader.seek(-2, io.SEEK_END) == 8 and reader.read() == b"89"
    assert reader.read(5) == b""
    reader.seek(4)
    assert reader.tell() == 4 and reader.read(2) == b"45"
    with pytest.raises(ValueError):
        reader.seek(-1)
