import base64
import io
import json
import struct
from pathlib import Path
from typing import Any, Dict, List

import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.messages import (
    KNOWN_TAGS,
    MESSAGE_NAMES,
    TAG_BATCH_RESULT,
    TAG_ERROR,
    TAG_HEARTBEAT,
    TAG_HEARTBEAT_ACK,
    TAG_LOAD_REQUEST,
    TAG_RUN_BATCH,
    TAG_RUN_SEQUENCE_BATCH,
    TAG_SEQUENCE_RESULT,
    TAG_STREAM_END,
    BatchItem,
    BatchResult,
    BootStage,
    CancelStream,
    CatalogEntry,
    Close,
    Closed,
    EndSessions,
    EngineCounter,
    Error,
    EvictResource,
    Heartbeat,
    HeartbeatAck,
    Hello,
    ItemResult,
    LoadRequest,
    LoadResource,
    LoadResult,
    Message,
    ResourceCounters,
    ResourceEvicted,
    ResourceInfo,
    ResourceLoaded,
    RunBatch,
    RunSequenceBatch,
    Segment,
    SegmentDecoding,
    SequenceItem,
    SequenceItemResult,
    SequenceResult,
    SessionsEnded,
    StartStream,
    StreamChunk,
    StreamCredit,
    StreamEnd,
    Transcript,
    WarmupRequest,
    WarmupResult,
    WireError,
    Word,
)
from voxmux_host.protocol import (
    HEADER_BYTES,
    MAGIC,
    MAX_BODY_BYTES,
    MAX_META_BYTES,
    PROTOCOL_VERSION,
    Frame,
    ProtocolError,
    decode_frame,
    decode_header,
    decode_message,
    encode_frame,
    encode_message,
    from_frame,
    join_states,
    read_frame,
    split_sequence_body,
    split_states,
    wire_of,
)

GOLDEN_DIR = Path(__file__).resolve().parents[2] / 'test' / 'fixtures' / 'protocol'
GOLDEN_NAMES = sorted(path.stem for path in GOLDEN_DIR.glob('*.bin'))


def header(tag: int, meta_length: int, body_length: int = 0, *, magic: int = MAGIC, version: int = PROTOCOL_VERSION,
           flags: int = 0, correlation_id: int = 1) -> bytes:
    return struct.pack('<IHHIIII', magic, version, tag, flags, correlation_id, meta_length, body_length)


def frame_bytes(tag: int, meta: bytes, body: bytes = b'', **fields: Any) -> bytes:
    return header(tag, len(meta), len(body), **fields) + meta + body


def compact(value: Any) -> str:
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False)


# -- golden frames ------------------------------------------------------------------------------


def test_golden_files_cover_every_message_type() -> None:
    types = {json.loads((GOLDEN_DIR / f'{name}.json').read_text('utf-8'))['type'] for name in GOLDEN_NAMES}
    assert types == set(KNOWN_TAGS)


@pytest.mark.parametrize('name', GOLDEN_NAMES)
def test_golden_frame_decodes_to_its_twin(name: str) -> None:
    data = (GOLDEN_DIR / f'{name}.bin').read_bytes()
    twin = json.loads((GOLDEN_DIR / f'{name}.json').read_text('utf-8'))
    frame = decode_frame(data)
    assert MESSAGE_NAMES[frame.type] == twin['name']
    assert (frame.type, twin['version'], twin['flags']) == (twin['type'], PROTOCOL_VERSION, 0)
    assert frame.correlation_id == twin['correlationId']
    # Compare serialised forms so that key order counts too.
    assert compact(frame.meta) == compact(twin['meta'])
    assert bytes(frame.body) == base64.b64decode(twin['bodyBase64'])


@pytest.mark.parametrize('name', GOLDEN_NAMES)
def test_golden_twin_reencodes_to_the_same_bytes(name: str) -> None:
    data = (GOLDEN_DIR / f'{name}.bin').read_bytes()
    twin = json.loads((GOLDEN_DIR / f'{name}.json').read_text('utf-8'))
    rebuilt = Frame(twin['type'], twin['correlationId'], twin['meta'], base64.b64decode(twin['bodyBase64']))
    assert encode_frame(rebuilt) == data


@pytest.mark.parametrize('name', GOLDEN_NAMES)
def test_golden_message_roundtrips_through_its_dataclass(name: str) -> None:
    data = (GOLDEN_DIR / f'{name}.bin').read_bytes()
    message, correlation_id = decode_message(data)
    assert type(message).__name__ == MESSAGE_NAMES[data[6]]
    assert encode_message(message, correlation_id) == data


def test_run_batch_golden_holds_two_requests_and_their_samples() -> None:
    message, correlation_id = decode_message((GOLDEN_DIR / 'run-batch.bin').read_bytes())
    assert isinstance(message, RunBatch) and correlation_id == 7
    assert [item.samples for item in message.requests] == [3, 2]
    assert len(message.body) == 2 * 5
    assert struct.unpack('<5h', message.body) == (0, 16384, -8192, 32767, -32768)


def test_batch_result_golden_holds_one_success_and_one_failure() -> None:
    message, _ = decode_message((GOLDEN_DIR / 'batch-result.bin').read_bytes())
    assert isinstance(message, BatchResult)
    ok, failed = message.results
    assert ok.transcript is not None and ok.transcript.words is not None and len(ok.transcript.words) == 2
    assert failed.transcript is None and failed.error == WireError('invalid_audio', 'Expected at least one sample: got 0')


def test_sequence_goldens_split_into_audio_and_states() -> None:
    batch, _ = decode_message((GOLDEN_DIR / 'run-sequence-batch.bin').read_bytes())
    assert isinstance(batch, RunSequenceBatch)
    parts = split_sequence_body(batch)
    assert [(part.audio.tolist(), part.state) for part in parts] == [([100, -100], b''), ([7], b'state')]
    result, _ = decode_message((GOLDEN_DIR / 'sequence-result.bin').read_bytes())
    assert isinstance(result, SequenceResult)
    assert split_states(result) == [b'\x01\x02\x03', b'']


# -- encoding -----------------------------------------------------------------------------------


def test_encode_writes_the_documented_header_and_compact_meta() -> None:
    expected = b'VXMX' + struct.pack('<HHIIII', 7, TAG_HEARTBEAT, 0, 9, 9, 0) + b'{"seq":5}'
    assert encode_message(Heartbeat(5), 9) == expected


def test_encode_keeps_documented_key_order_and_raw_utf8() -> None:
    data = encode_message(Error('model_failed', 'Échec → x', 'r-1'), 3)
    assert data[HEADER_BYTES:] == '{"code":"model_failed","message":"Échec → x","requestId":"r-1"}'.encode()


def test_encode_writes_integral_floats_as_integers() -> None:
    data = encode_message(BatchResult('b', (), 12.0), 1)
    assert data[HEADER_BYTES:] == b'{"batchId":"b","results":[],"computeMs":12}'


def test_encode_rejects_non_finite_numbers() -> None:
    with pytest.raises(ProtocolError):
        encode_message(BatchResult('b', (), float('nan')), 1)


@pytest.mark.parametrize('body_bytes', [0, 2, 3, 5, 8], ids=['empty', 'one sample', 'odd', 'odd plus one',
                                                               'float32 sized'])
def test_encode_rejects_a_run_batch_whose_body_does_not_match_its_samples(body_bytes: int) -> None:
    with pytest.raises(ProtocolError):
        encode_message(RunBatch('b', (item('r', 2),), b'\x00' * body_bytes), 1)


def test_run_batch_body_is_two_bytes_per_sample() -> None:
    message = RunBatch('b', (item('r1', 3), item('r2', 2)), struct.pack('<5h', 1, -1, 0, 32767, -32768))
    decoded, _ = decode_message(encode_message(message, 1))
    assert isinstance(decoded, RunBatch) and bytes(decoded.body) == bytes(message.body)


def item(request_id: str, samples: int) -> BatchItem:
    return BatchItem(request_id, samples, None, None, False, 'transcribe', 0.0, False)


def seq_item(session_id: str, samples: int, state_in: Any = 'new', state_bytes: int = 0) -> SequenceItem:
    return SequenceItem(f'r-{session_id}', session_id, 0, samples, state_in, state_bytes, False, {})


MESSAGES: List[Message] = [
    LoadRequest('i', 'm', 'test', {'a': [1, {'b': None}], 'ü': 'ß'}, None),
    WarmupRequest(),
    RunBatch('b', (BatchItem('r1', 1, 'en', 'p', True, 'translate', 0.5, True), item('r2', 0)), struct.pack('<h', -1234)),
    Heartbeat(0),
    Close(),
    RunSequenceBatch('b', (seq_item('s1', 1), seq_item('s2', 0, 'attached', 2), seq_item('s3', 1, 'resident')),
                     b'\x01\x00' + b'st' + b'\x02\x00'),
    EndSessions(()),
    StartStream('st', 'r', None, {}, 0, b''),
    StreamCredit('st', 3),
    CancelStream('st'),
    LoadResource('v', 'voice', {'path': '/x'}),
    EvictResource('v'),
    Hello(1, '0.1.0', 1, ()),
    LoadResult('m', 'cpu', 0, 0, 0, ('batch', 'stream'),
               (CatalogEntry('v', 'voice', 'en-US', 22050, None, 'a voice'),
                CatalogEntry('w', 'voice', 'en-GB', 16000, 'female', '')),
               (BootStage('weight_read', 12.5, 1 << 33), BootStage('device_upload', 0, 0))),
    WarmupResult(0, 0, ()),
    WarmupResult(1, 2, (BootStage('graph_capture', 0.125, 0),)),
    BatchResult('b', (ItemResult('r1', None, Transcript('', 'en', 0.0, None, None)),
                      ItemResult('r2', None, Transcript('a b', 'en', 1.5, (Segment(0, 1.5, 'a b', SegmentDecoding(3000, (50365, 7, 50400), 0.2, -0.31, 1.7, 0.01)),
                                                         Segment(1.5, 1.5, '', None)),
                                                        (Word('a', 0, 0.75), Word('b', 0.75, 1.5)))),
                      ItemResult('r3', WireError('out_of_memory', 'x'), None)), 0.125),
    HeartbeatAck(1, 'wedged', 5, 2, 3, 4, 5, 6, 7, (ResourceInfo('v', 'voice', 'host', 9),),
                 ResourceCounters(1, 2, 3, 4, 5, 6.5, 0.25, 100, 9),
                 (EngineCounter('encoderWindows', 12), EngineCounter('audioSeconds', 90.5))),
    HeartbeatAck(2, 'idle', 0, 0, 0, 0, 0, 0, 0, (), None, ()),
    Closed(),
    SequenceResult('b', (SequenceItemResult('r', 's', 2, None, {'x': 1}, 3),), 1.5, join_states([b'abc'])),
    SessionsEnded(('s',)),
    StreamChunk('st', 2, {}, b'\x00' * 7),
    StreamEnd('st', 0, None, WireError('stream_cancelled', 'cancelled')),
    ResourceLoaded('v', 'voice', 'device', 1, 2, 'host'),
    ResourceEvicted('v', 1),
    Error('bad_frame', 'x', None),
]


def test_the_round_trip_list_holds_every_message() -> None:
    assert {wire_of(m).tag for m in MESSAGES} == set(KNOWN_TAGS)


@pytest.mark.parametrize('message', MESSAGES, ids=[type(m).__name__ for m in MESSAGES])
def test_every_message_roundtrips(message: Any) -> None:
    data = encode_message(message, 42)
    decoded, correlation_id = decode_message(data)
    assert correlation_id == 42
    assert decoded == message


def test_protocol_error_is_an_instance_error_with_code_bad_frame() -> None:
    err = ProtocolError('x')
    assert isinstance(err, InstanceError) and err.code == 'bad_frame'


# -- invalid headers ----------------------------------------------------------------------------

HEARTBEAT_META = b'{"seq":1}'

BAD_HEADERS = {
    'wrong magic': header(TAG_HEARTBEAT, len(HEARTBEAT_META), magic=0x584D5857) + HEARTBEAT_META,
    'magic written big-endian': header(TAG_HEARTBEAT, len(HEARTBEAT_META), magic=0x56584D58) + HEARTBEAT_META,
    'version 0': header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=0) + HEARTBEAT_META,
    'version 1 (float32 audio)': header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=1) + HEARTBEAT_META,
    'version 2 (no sequences or streams)': header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=2) + HEARTBEAT_META,
    'version 3 (no catalogue or resource counters)':
        header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=3) + HEARTBEAT_META,
    'version 4 (no boot stages, no task or temperature in batch items)':
        header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=4) + HEARTBEAT_META,
    'version 6 (no piece in batch items)': header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=6) + HEARTBEAT_META,
    'version 8': header(TAG_HEARTBEAT, len(HEARTBEAT_META), version=8) + HEARTBEAT_META,
    'flags 1': header(TAG_HEARTBEAT, len(HEARTBEAT_META), flags=1) + HEARTBEAT_META,
    'flags high bit': header(TAG_HEARTBEAT, len(HEARTBEAT_META), flags=0x80000000) + HEARTBEAT_META,
    'type 0x00': header(0x00, len(HEARTBEAT_META)) + HEARTBEAT_META,
    'type 0x0D': header(0x0D, len(HEARTBEAT_META)) + HEARTBEAT_META,
    'type 0x8D': header(0x8D, len(HEARTBEAT_META)) + HEARTBEAT_META,
    'type 0x90': header(0x90, len(HEARTBEAT_META)) + HEARTBEAT_META,
    'type 0xFFFF': header(0xFFFF, len(HEARTBEAT_META)) + HEARTBEAT_META,
    'meta over 1 MiB': header(TAG_HEARTBEAT, MAX_META_BYTES + 1),
    'body over 1 GiB': header(TAG_RUN_BATCH, 2, MAX_BODY_BYTES + 1),
    'meta length past the end': header(TAG_HEARTBEAT, len(HEARTBEAT_META) + 1) + HEARTBEAT_META,
    'short header': header(TAG_HEARTBEAT, 0)[:HEADER_BYTES - 1],
}


@pytest.mark.parametrize('data', BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_decode_frame_rejects_a_bad_header(data: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_frame(data)
    assert caught.value.code == 'bad_frame'


@pytest.mark.parametrize('data', BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
def test_read_frame_rejects_a_bad_header(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        read_frame(io.BytesIO(data))


def test_decode_header_accepts_lengths_at_their_limits() -> None:
    parsed = decode_header(header(TAG_RUN_BATCH, MAX_META_BYTES, MAX_BODY_BYTES, correlation_id=0xFFFFFFFF))
    assert (parsed.meta_length, parsed.body_length, parsed.correlation_id) == (
        MAX_META_BYTES, MAX_BODY_BYTES, 0xFFFFFFFF)


def test_decode_frame_rejects_trailing_bytes() -> None:
    with pytest.raises(ProtocolError):
        decode_frame(encode_message(Heartbeat(1), 1) + b'\x00')


BAD_META = {
    'empty': b'',
    'null': b'null',
    'array': b'[]',
    'string': b'"seq"',
    'truncated json': b'{"seq":1',
    'invalid utf-8': b'{"seq":1,"x":"\xff"}',
    'NaN': b'{"seq":NaN}',
    'Infinity': b'{"seq":Infinity}',
}


@pytest.mark.parametrize('meta', BAD_META.values(), ids=BAD_META.keys())
def test_meta_that_is_not_a_json_object_is_a_bad_frame(meta: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_frame(frame_bytes(TAG_HEARTBEAT, meta))


# -- reading a stream ---------------------------------------------------------------------------


def test_read_frame_returns_none_at_end_of_input_between_frames() -> None:
    stream = io.BytesIO(encode_message(Heartbeat(1), 1) + encode_message(Close(), 2))
    first, second = read_frame(stream), read_frame(stream)
    assert first is not None and second is not None
    assert (first.type, second.correlation_id) == (TAG_HEARTBEAT, 2)
    assert read_frame(stream) is None


@pytest.mark.parametrize('cut', [1, HEADER_BYTES - 1, HEADER_BYTES + 3, -1])
def test_read_frame_rejects_end_of_input_inside_a_frame(cut: int) -> None:
    data = encode_message(RunBatch('b', (item('r', 2),), b'\x00' * 4), 1)
    with pytest.raises(ProtocolError):
        read_frame(io.BytesIO(data[:cut]))


def test_read_frame_body_is_writable() -> None:
    frame = read_frame(io.BytesIO(encode_message(RunBatch('b', (item('r', 1),), b'\x00' * 2), 1)))
    assert frame is not None and isinstance(frame.body, bytearray)


# -- message fields -----------------------------------------------------------------------------


def run_batch_meta(**overrides: Any) -> Dict[str, Any]:
    item: Dict[str, Any] = {'requestId': 'r', 'samples': 1, 'language': None, 'prompt': None, 'wordTimestamps': False}
    meta: Dict[str, Any] = {'batchId': 'b', 'requests': [item]}
    meta.update(overrides)
    return meta


BAD_MESSAGES: Dict[str, Frame] = {
    'missing field': Frame(TAG_HEARTBEAT, 1, {}),
    'unknown field': Frame(TAG_HEARTBEAT, 1, {'seq': 1, 'extra': 2}),
    'string for integer': Frame(TAG_HEARTBEAT, 1, {'seq': '1'}),
    'boolean for integer': Frame(TAG_HEARTBEAT, 1, {'seq': True}),
    'negative integer': Frame(TAG_HEARTBEAT, 1, {'seq': -1}),
    'fractional integer': Frame(TAG_HEARTBEAT, 1, {'seq': 1.5}),
    'body on a bodiless message': Frame(TAG_HEARTBEAT, 1, {'seq': 1}, b'\x00'),
    'options not an object': Frame(TAG_LOAD_REQUEST, 1, {
        'instanceId': 'i', 'model': 'm', 'adapter': 'a', 'options': [], 'loadLockPath': None}),
    'run batch body too short': Frame(TAG_RUN_BATCH, 1, run_batch_meta(), b'\x00' * 1),
    'run batch body too long': Frame(TAG_RUN_BATCH, 1, run_batch_meta(), b'\x00' * 3),
    'run batch body of float32 samples': Frame(TAG_RUN_BATCH, 1, run_batch_meta(), b'\x00' * 4),
    'run batch body of an odd length': Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[
        {'requestId': 'r', 'samples': 2, 'language': None, 'prompt': None, 'wordTimestamps': False}]), b'\x00' * 5),
    'run batch without requests': Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[]), b''),
    'run batch duplicate ids': Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[
        run_batch_meta()['requests'][0], run_batch_meta()['requests'][0]]), b'\x00' * 4),
    'run batch request not an object': Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[1]), b''),
    'run batch request missing wordTimestamps': Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[
        {'requestId': 'r', 'samples': 1, 'language': None, 'prompt': None}]), b'\x00' * 2),
    'heartbeat ack unknown state': Frame(TAG_HEARTBEAT_ACK, 1, {
        'seq': 1, 'state': 'sleepy', 'busyMs': 0, 'queuedBatches': 0, 'memoryBytes': 0, 'eagerBatches': 0,
        'graphReplays': 0, 'sessions': 0, 'streams': 0, 'resources': []}),
    'error with unknown code': Frame(TAG_ERROR, 1, {'code': 'oops', 'message': 'x', 'requestId': None}),
    'result failure with unknown code': Frame(TAG_BATCH_RESULT, 1, {'batchId': 'b', 'results': [
        {'requestId': 'r', 'error': {'code': 'oops', 'message': 'x'}, 'transcript': None}], 'computeMs': 1}),
    'result transcript missing words': Frame(TAG_BATCH_RESULT, 1, {'batchId': 'b', 'results': [
        {'requestId': 'r', 'error': None, 'transcript': {'text': '', 'language': 'en', 'durationS': 0,
                                                        'segments': None}}], 'computeMs': 1}),
    'result with neither error nor transcript': Frame(TAG_BATCH_RESULT, 1, {'batchId': 'b', 'results': [
        {'requestId': 'r', 'error': None, 'transcript': None}], 'computeMs': 1}),
    'sequence batch with two items of one session': Frame(TAG_RUN_SEQUENCE_BATCH, 1, {'batchId': 'b', 'items': [
        seq_item('s', 0).to_meta(), seq_item('s', 0).to_meta()]}),
    'sequence batch state without attached': Frame(TAG_RUN_SEQUENCE_BATCH, 1, {'batchId': 'b', 'items': [
        seq_item('s', 0, 'resident', 2).to_meta()]}, b'xx'),
    'sequence batch state over 1 MiB': Frame(TAG_RUN_SEQUENCE_BATCH, 1, {'batchId': 'b', 'items': [
        seq_item('s', 0, 'attached', (1 << 20) + 1).to_meta()]}, b'\x00' * ((1 << 20) + 1)),
    'sequence batch body too short': Frame(TAG_RUN_SEQUENCE_BATCH, 1, {'batchId': 'b', 'items': [
        seq_item('s', 1, 'attached', 2).to_meta()]}, b'\x00' * 3),
    'sequence result body too long': Frame(TAG_SEQUENCE_RESULT, 1, {'batchId': 'b', 'results': [
        SequenceItemResult('r', 's', 0, None, {}, 1).to_meta()], 'computeMs': 1}, b'ab'),
    'stream end with usage and error': Frame(TAG_STREAM_END, 1, {'streamId': 's', 'chunks': 0, 'usage': {},
                                                                 'error': {'code': 'bad_frame', 'message': 'x'}}),
}


@pytest.mark.parametrize('frame', BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_message_with_bad_fields_is_a_bad_frame(frame: Frame) -> None:
    with pytest.raises(ProtocolError):
        from_frame(frame)
    # The same frame from the wire fails the same way.
    with pytest.raises(ProtocolError):
        decode_message(encode_frame(frame))


def test_run_batch_accepts_requests_with_zero_samples() -> None:
    message = from_frame(Frame(TAG_RUN_BATCH, 1, run_batch_meta(requests=[
        {'requestId': 'r', 'samples': 0, 'language': None, 'prompt': None, 'wordTimestamps': False,
         'task': 'transcribe', 'temperature': 0, 'piece': False}]), b''))
    assert isinstance(message, RunBatch) and message.requests[0].samples == 0


def test_decode_accepts_fields_in_any_order() -> None:
    meta = b'{"requestId":null,"message":"m","code":"bad_frame"}'
    message, _ = decode_message(frame_bytes(TAG_ERROR, meta))
    assert message == Error('bad_frame', 'm', None)
    assert encode_message(message, 1)[HEADER_BYTES:] == b'{"code":"bad_frame","message":"m","requestId":null}'


def test_known_tags_match_the_documented_table() -> None:
    documented: List[int] = [*range(0x01, 0x0D), *range(0x81, 0x8D), 0x8F]
    assert sorted(KNOWN_TAGS) == documented


def test_committed_golden_files_match_the_generator() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(GOLDEN_DIR / 'generate.py'), '--check'], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
