"""``split_batch``: a RunBatch body becomes one int16 view per request, without copies."""
import io

import numpy as np

from voxmux_host.host import split_batch
from voxmux_host.messages import BatchItem, RunBatch
from voxmux_host.protocol import encode_message, from_frame, read_frame


def pcm_batch(*lengths: int) -> RunBatch:
    samples = np.arange(sum(lengths), dtype='<i2') * 7 - 300
    requests = tuple(BatchItem(f'r{i}', n, 'en' if i == 0 else None, None, i == 1, 'transcribe', 0.0, False) for i, n in enumerate(lengths))
    return RunBatch('b', requests, bytearray(samples.tobytes()))


def test_split_batch_yields_int16_views_of_each_request_in_order() -> None:
    batch = pcm_batch(3, 0, 5)
    inputs = split_batch(batch)
    assert [i.request_id for i in inputs] == ['r0', 'r1', 'r2']
    assert [i.audio.shape for i in inputs] == [(3,), (0,), (5,)]
    assert all(i.audio.dtype == np.int16 for i in inputs)
    everything = np.frombuffer(batch.body, dtype='<i2')
    assert np.array_equal(inputs[0].audio, everything[:3])
    assert np.array_equal(inputs[2].audio, everything[3:])
    assert (inputs[0].language, inputs[1].word_timestamps) == ('en', True)


def test_split_batch_views_share_the_body_read_from_the_wire_and_are_writable() -> None:
    frame = read_frame(io.BytesIO(encode_message(pcm_batch(2, 4), 1)))
    assert frame is not None
    batch = from_frame(frame)
    assert isinstance(batch, RunBatch)
    first, second = split_batch(batch)
    for audio in (first.audio, second.audio):
        assert np.shares_memory(audio, np.frombuffer(frame.body, dtype=np.uint8))
        assert audio.flags.writeable and audio.flags.c_contiguous
    second.audio[0] = 12345
    assert frame.body[4:6] == (12345).to_bytes(2, 'little')


def test_split_batch_reads_little_endian_extremes() -> None:
    body = bytes.fromhex('0080' 'ff7f' 'ffff' '0100')  # -32768, 32767, -1, 1
    [only] = split_batch(RunBatch('b', (BatchItem('r', 4, None, None, False, 'transcribe', 0.0, False),), body))
    assert only.audio.tolist() == [-32768, 32767, -1, 1]
