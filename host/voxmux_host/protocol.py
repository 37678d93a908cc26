"""The instance wire format of docs/protocol.md (version 2): frames and typed messages.

A frame is a 24-byte little-endian header, ``metaLength`` bytes of compact UTF-8 JSON meta and
``bodyLength`` bytes of binary body. This module has two layers:

- ``Frame`` with ``encode_frame``, ``decode_header``, ``decode_frame`` and ``read_frame``: the
  header checks and the JSON meta, independent of the message kind;
- message dataclasses with ``to_frame``/``from_frame`` (and the shortcuts ``encode_message``
  and ``decode_message``): the meta fields of each message, checked strictly.

Every malformed input raises ``ProtocolError``, whose wire code is ``bad_frame``. The module
uses the standard library only, so small fixture processes can import it cheaply.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, List, Optional, Protocol, Tuple, Type, Union

from .errors import WIRE_ERROR_CODES, InstanceError

MAGIC = 0x584D5856  # the bytes 'V X M X' when written little-endian
PROTOCOL_VERSION = 2
HEADER_BYTES = 24
MAX_META_BYTES = 1 << 20
MAX_BODY_BYTES = 1 << 30
MAX_U32 = 0xFFFFFFFF

_HEADER = struct.Struct('<IHHIIII')

# Message tags. Down: supervisor -> instance. Up: instance -> supervisor.
TAG_LOAD_REQUEST = 0x01
TAG_WARMUP_REQUEST = 0x02
TAG_RUN_BATCH = 0x03
TAG_HEARTBEAT = 0x04
TAG_CLOSE = 0x05
TAG_HELLO = 0x81
TAG_LOAD_RESULT = 0x82
TAG_WARMUP_RESULT = 0x83
TAG_BATCH_RESULT = 0x84
TAG_HEARTBEAT_ACK = 0x85
TAG_CLOSED = 0x86
TAG_ERROR = 0x8F

CONTROLLER_TAGS = frozenset({TAG_LOAD_REQUEST, TAG_WARMUP_REQUEST, TAG_RUN_BATCH, TAG_HEARTBEAT, TAG_CLOSE})
HOST_TAGS = frozenset({
    TAG_HELLO, TAG_LOAD_RESULT, TAG_WARMUP_RESULT, TAG_BATCH_RESULT, TAG_HEARTBEAT_ACK, TAG_CLOSED, TAG_ERROR,
})
KNOWN_TAGS = CONTROLLER_TAGS | HOST_TAGS

HEARTBEAT_STATES = ('idle', 'busy', 'wedged')

#: RunBatch audio: 16 kHz mono 16-bit PCM, int16 little-endian; float value = int16 / 32768.
BYTES_PER_SAMPLE = 2


class ByteInput(Protocol):
    """What :func:`read_frame` reads from: ``readinto`` returns how many bytes it wrote into the buffer
    (fewer than the buffer holds is allowed), 0 at end of input."""

    def readinto(self, buffer: memoryview, /) -> Optional[int]: ...


class ProtocolError(InstanceError):
    """A malformed frame or message: the receiver logs it and closes the connection."""

    def __init__(self, message: str) -> None:
        super().__init__('bad_frame', message)


# ---------------------------------------------------------------------------------------------
# Frames


@dataclass(frozen=True)
class FrameHeader:
    type: int
    correlation_id: int
    meta_length: int
    body_length: int


@dataclass(frozen=True)
class Frame:
    """One decoded frame. ``meta`` keeps the key order it was written or read in."""

    type: int
    correlation_id: int
    meta: Dict[str, Any]
    body: Union[bytes, bytearray] = b''


def encode_meta(meta: Dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, keys in the order given; integral floats are written as integers.

    Integral floats are normalised so that Python and JavaScript write the same bytes for
    the same value (Python writes ``3.0`` where JSON.stringify writes ``3``).
    """
    try:
        text = json.dumps(_canonical(meta), separators=(',', ':'), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ProtocolError(f'Expected meta to be JSON-serialisable: {err}') from err
    return text.encode('utf-8')


def encode_frame(frame: Frame) -> bytes:
    if frame.type not in KNOWN_TAGS:
        raise ProtocolError(f'Expected a known message type: got 0x{frame.type:02X}')
    if not 0 <= frame.correlation_id <= MAX_U32:
        raise ProtocolError(f'Expected correlationId to be a u32: got {frame.correlation_id}')
    meta = encode_meta(frame.meta)
    if len(meta) > MAX_META_BYTES:
        raise ProtocolError(f'Expected metaLength to be at most {MAX_META_BYTES}: got {len(meta)}')
    if len(frame.body) > MAX_BODY_BYTES:
        raise ProtocolError(f'Expected bodyLength to be at most {MAX_BODY_BYTES}: got {len(frame.body)}')
    header = _HEADER.pack(MAGIC, PROTOCOL_VERSION, frame.type, 0, frame.correlation_id, len(meta), len(frame.body))
    return b''.join((header, meta, bytes(frame.body)))


def decode_header(data: Union[bytes, bytearray, memoryview]) -> FrameHeader:
    if len(data) != HEADER_BYTES:
        raise ProtocolError(f'Expected a {HEADER_BYTES}-byte header: got {len(data)} bytes')
    magic, version, tag, flags, correlation_id, meta_length, body_length = _HEADER.unpack(data)
    if magic != MAGIC:
        raise ProtocolError(f'Expected magic 0x{MAGIC:08X}: got 0x{magic:08X}')
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f'Expected version {PROTOCOL_VERSION}: got {version}')
    if tag not in KNOWN_TAGS:
        raise ProtocolError(f'Expected a known message type: got 0x{tag:02X}')
    if flags != 0:
        raise ProtocolError(f'Expected flags 0: got 0x{flags:08X}')
    if meta_length > MAX_META_BYTES:
        raise ProtocolError(f'Expected metaLength to be at most {MAX_META_BYTES}: got {meta_length}')
    if body_length > MAX_BODY_BYTES:
        raise ProtocolError(f'Expected bodyLength to be at most {MAX_BODY_BYTES}: got {body_length}')
    return FrameHeader(tag, correlation_id, meta_length, body_length)


def decode_meta(data: Union[bytes, bytearray, memoryview]) -> Dict[str, Any]:
    try:
        text = bytes(data).decode('utf-8')
    except UnicodeDecodeError as err:
        raise ProtocolError(f'Expected meta to be UTF-8: {err}') from err
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as err:
        raise ProtocolError(f'Expected meta to be JSON: {err}') from err
    if not isinstance(value, dict):
        raise ProtocolError(f'Expected meta to be a JSON object: got {type(value).__name__}')
    return value


def decode_frame(data: Union[bytes, bytearray, memoryview]) -> Frame:
    """Decode exactly one frame that fills ``data``."""
    view = memoryview(data)
    if len(view) < HEADER_BYTES:
        raise ProtocolError(f'Expected at least {HEADER_BYTES} bytes: got {len(view)}')
    header = decode_header(view[:HEADER_BYTES])
    expected = HEADER_BYTES + header.meta_length + header.body_length
    if len(view) != expected:
        raise ProtocolError(f'Expected a frame of {expected} bytes: got {len(view)}')
    meta = decode_meta(view[HEADER_BYTES:HEADER_BYTES + header.meta_length])
    body = bytes(view[HEADER_BYTES + header.meta_length:])
    return Frame(header.type, header.correlation_id, meta, body)


def read_frame(stream: ByteInput) -> Optional[Frame]:
    """Read one frame from a blocking stream; None on end of input at a frame boundary.

    The body is returned as a ``bytearray`` so that numpy views of it are writable.
    """
    first = _read_exactly(stream, HEADER_BYTES, allow_eof=True)
    if first is None:
        return None
    header = decode_header(first)
    meta = decode_meta(_read_exactly(stream, header.meta_length) or b'')
    body = _read_exactly(stream, header.body_length) or bytearray()
    return Frame(header.type, header.correlation_id, meta, body)


def _read_exactly(stream: ByteInput, size: int, allow_eof: bool = False) -> Optional[bytearray]:
    buffer = bytearray(size)
    view = memoryview(buffer)
    filled = 0
    while filled < size:
        count = stream.readinto(view[filled:])
        if not count:
            if filled == 0 and allow_eof:
                return None
            raise ProtocolError(f'Expected {size} bytes before end of input: got {filled}')
        filled += count
    return buffer


def _reject_constant(name: str) -> Any:
    raise ValueError(f'{name} is not valid JSON')


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------
# Meta field checks


class _Meta:
    """Reads the fields of one meta object strictly: each listed once, with its type, no others."""

    def __init__(self, meta: Dict[str, Any], where: str) -> None:
        self._meta = meta
        self._where = where
        self._seen: List[str] = []

    def _take(self, key: str) -> Any:
        if key not in self._meta:
            raise ProtocolError(f'Expected {self._where}.{key}: it is missing')
        self._seen.append(key)
        return self._meta[key]

    def _fail(self, key: str, expected: str, value: Any) -> ProtocolError:
        shown = json.dumps(value, ensure_ascii=False, default=str)
        if len(shown) > 64:
            shown = shown[:64] + '...'
        return ProtocolError(f'Expected {self._where}.{key} to be {expected}: got {shown}')

    def string(self, key: str) -> str:
        value = self._take(key)
        if not isinstance(value, str):
            raise self._fail(key, 'a string', value)
        return value

    def optional_string(self, key: str) -> Optional[str]:
        value = self._take(key)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, 'a string or null', value)
        return value

    def integer(self, key: str) -> int:
        value = self._take(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self._fail(key, 'a non-negative integer', value)
        return value

    def number(self, key: str) -> float:
        value = self._take(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self._fail(key, 'a number', value)
        return value

    def boolean(self, key: str) -> bool:
        value = self._take(key)
        if not isinstance(value, bool):
            raise self._fail(key, 'a boolean', value)
        return value

    def obj(self, key: str) -> Dict[str, Any]:
        value = self._take(key)
        if not isinstance(value, dict):
            raise self._fail(key, 'an object', value)
        return value

    def array(self, key: str) -> List[Any]:
        value = self._take(key)
        if not isinstance(value, list):
            raise self._fail(key, 'an array', value)
        return value

    def optional_array(self, key: str) -> Optional[List[Any]]:
        value = self._take(key)
        if value is not None and not isinstance(value, list):
            raise self._fail(key, 'an array or null', value)
        return value

    def one_of(self, key: str, allowed: Tuple[str, ...]) -> str:
        value = self._take(key)
        if not isinstance(value, str) or value not in allowed:
            raise self._fail(key, 'one of ' + ', '.join(allowed), value)
        return value

    def done(self) -> None:
        extra = [key for key in self._meta if key not in self._seen]
        if extra:
            raise ProtocolError(f'Expected no other fields in {self._where}: got {", ".join(extra)}')


def _item(value: Any, where: str) -> _Meta:
    if not isinstance(value, dict):
        raise ProtocolError(f'Expected {where} to be an object: got {type(value).__name__}')
    return _Meta(value, where)


def _no_body(frame: Frame, name: str) -> None:
    if len(frame.body) != 0:
        raise ProtocolError(f'Expected no body in {name}: got {len(frame.body)} bytes')


# ---------------------------------------------------------------------------------------------
# Messages. Each lists its meta fields in the order docs/protocol.md gives.


@dataclass(frozen=True)
class LoadRequest:
    TYPE: ClassVar[int] = TAG_LOAD_REQUEST
    NAME: ClassVar[str] = 'LoadRequest'
    instance_id: str
    model: str
    adapter: str
    options: Dict[str, Any] = field(default_factory=dict)
    load_lock_path: Optional[str] = None

    def to_meta(self) -> Dict[str, Any]:
        return {
            'instanceId': self.instance_id,
            'model': self.model,
            'adapter': self.adapter,
            'options': self.options,
            'loadLockPath': self.load_lock_path,
        }

    @classmethod
    def from_frame(cls, frame: Frame) -> 'LoadRequest':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.string('instanceId'), m.string('model'), m.string('adapter'), m.obj('options'),
                      m.optional_string('loadLockPath'))
        m.done()
        return message


@dataclass(frozen=True)
class WarmupRequest:
    TYPE: ClassVar[int] = TAG_WARMUP_REQUEST
    NAME: ClassVar[str] = 'WarmupRequest'

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'WarmupRequest':
        _no_body(frame, cls.NAME)
        _Meta(frame.meta, cls.NAME).done()
        return cls()


@dataclass(frozen=True)
class BatchItem:
    """One request of a RunBatch; its audio is ``samples`` int16 values of the body."""

    request_id: str
    samples: int
    language: Optional[str] = None
    prompt: Optional[str] = None
    word_timestamps: bool = False

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'samples': self.samples,
            'language': self.language,
            'prompt': self.prompt,
            'wordTimestamps': self.word_timestamps,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str) -> 'BatchItem':
        m = _item(value, where)
        item = cls(m.string('requestId'), m.integer('samples'), m.optional_string('language'),
                   m.optional_string('prompt'), m.boolean('wordTimestamps'))
        m.done()
        return item


@dataclass(frozen=True)
class RunBatch:
    TYPE: ClassVar[int] = TAG_RUN_BATCH
    NAME: ClassVar[str] = 'RunBatch'
    batch_id: str
    requests: Tuple[BatchItem, ...]
    body: Union[bytes, bytearray] = b''  # int16 LE samples of every request, in request order

    def to_meta(self) -> Dict[str, Any]:
        return {'batchId': self.batch_id, 'requests': [item.to_meta() for item in self.requests]}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'RunBatch':
        m = _Meta(frame.meta, cls.NAME)
        batch_id = m.string('batchId')
        raw = m.array('requests')
        m.done()
        if not raw:
            raise ProtocolError('Expected RunBatch.requests to hold at least one request: got none')
        requests = tuple(BatchItem.from_meta(value, f'RunBatch.requests[{i}]') for i, value in enumerate(raw))
        ids = [item.request_id for item in requests]
        if len(set(ids)) != len(ids):
            raise ProtocolError('Expected unique requestIds in RunBatch.requests: got duplicates')
        _check_body_length(requests, frame.body)
        return cls(batch_id, requests, frame.body)

    def validate(self) -> None:
        _check_body_length(self.requests, self.body)


def _check_body_length(requests: Tuple[BatchItem, ...], body: Union[bytes, bytearray]) -> None:
    samples = sum(item.samples for item in requests)
    expected = BYTES_PER_SAMPLE * samples
    if len(body) != expected:
        raise ProtocolError(f'Expected a RunBatch body of {expected} bytes ({samples} int16 samples): '
                            f'got {len(body)}')


@dataclass(frozen=True)
class Heartbeat:
    TYPE: ClassVar[int] = TAG_HEARTBEAT
    NAME: ClassVar[str] = 'Heartbeat'
    seq: int

    def to_meta(self) -> Dict[str, Any]:
        return {'seq': self.seq}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'Heartbeat':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.integer('seq'))
        m.done()
        return message


@dataclass(frozen=True)
class Close:
    TYPE: ClassVar[int] = TAG_CLOSE
    NAME: ClassVar[str] = 'Close'

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'Close':
        _no_body(frame, cls.NAME)
        _Meta(frame.meta, cls.NAME).done()
        return cls()


@dataclass(frozen=True)
class Hello:
    TYPE: ClassVar[int] = TAG_HELLO
    NAME: ClassVar[str] = 'Hello'
    protocol_version: int
    host_version: str
    pid: int
    adapters: Tuple[str, ...]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'protocolVersion': self.protocol_version,
            'hostVersion': self.host_version,
            'pid': self.pid,
            'adapters': list(self.adapters),
        }

    @classmethod
    def from_frame(cls, frame: Frame) -> 'Hello':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        protocol_version, host_version, pid = m.integer('protocolVersion'), m.string('hostVersion'), m.integer('pid')
        adapters = m.array('adapters')
        m.done()
        if not all(isinstance(name, str) for name in adapters):
            raise ProtocolError('Expected Hello.adapters to be an array of strings')
        return cls(protocol_version, host_version, pid, tuple(adapters))


@dataclass(frozen=True)
class LoadResult:
    TYPE: ClassVar[int] = TAG_LOAD_RESULT
    NAME: ClassVar[str] = 'LoadResult'
    model: str
    device: str
    parameters: int
    memory_bytes: int
    load_ms: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'model': self.model,
            'device': self.device,
            'parameters': self.parameters,
            'memoryBytes': self.memory_bytes,
            'loadMs': self.load_ms,
        }

    @classmethod
    def from_frame(cls, frame: Frame) -> 'LoadResult':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.string('model'), m.string('device'), m.integer('parameters'), m.integer('memoryBytes'),
                      m.integer('loadMs'))
        m.done()
        return message


@dataclass(frozen=True)
class WarmupResult:
    TYPE: ClassVar[int] = TAG_WARMUP_RESULT
    NAME: ClassVar[str] = 'WarmupResult'
    warmup_ms: int
    graphs_captured: int

    def to_meta(self) -> Dict[str, Any]:
        return {'warmupMs': self.warmup_ms, 'graphsCaptured': self.graphs_captured}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'WarmupResult':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.integer('warmupMs'), m.integer('graphsCaptured'))
        m.done()
        return message


@dataclass(frozen=True)
class ResultSegment:
    start: float  # seconds
    end: float  # seconds
    text: str

    def to_meta(self) -> Dict[str, Any]:
        return {'start': self.start, 'end': self.end, 'text': self.text}

    @classmethod
    def from_meta(cls, value: Any, where: str) -> 'ResultSegment':
        m = _item(value, where)
        segment = cls(m.number('start'), m.number('end'), m.string('text'))
        m.done()
        return segment


@dataclass(frozen=True)
class ResultWord:
    word: str
    start: float  # seconds
    end: float  # seconds

    def to_meta(self) -> Dict[str, Any]:
        return {'word': self.word, 'start': self.start, 'end': self.end}

    @classmethod
    def from_meta(cls, value: Any, where: str) -> 'ResultWord':
        m = _item(value, where)
        word = cls(m.string('word'), m.number('start'), m.number('end'))
        m.done()
        return word


@dataclass(frozen=True)
class ResultOk:
    request_id: str
    text: str
    language: str
    duration_s: float
    segments: Optional[Tuple[ResultSegment, ...]] = None
    words: Optional[Tuple[ResultWord, ...]] = None

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'ok': True,
            'text': self.text,
            'language': self.language,
            'durationS': self.duration_s,
            'segments': None if self.segments is None else [s.to_meta() for s in self.segments],
            'words': None if self.words is None else [w.to_meta() for w in self.words],
        }


@dataclass(frozen=True)
class ResultFailure:
    request_id: str
    code: str  # a wire code
    message: str

    def to_meta(self) -> Dict[str, Any]:
        return {'requestId': self.request_id, 'ok': False, 'code': self.code, 'message': self.message}


BatchItemResult = Union[ResultOk, ResultFailure]


def _result_from_meta(value: Any, where: str) -> BatchItemResult:
    m = _item(value, where)
    request_id = m.string('requestId')
    ok = m.boolean('ok')
    if not ok:
        code = m.one_of('code', WIRE_ERROR_CODES)
        failure = ResultFailure(request_id, code, m.string('message'))
        m.done()
        return failure
    text, language, duration_s = m.string('text'), m.string('language'), m.number('durationS')
    raw_segments, raw_words = m.optional_array('segments'), m.optional_array('words')
    m.done()
    segments = None if raw_segments is None else tuple(
        ResultSegment.from_meta(s, f'{where}.segments[{i}]') for i, s in enumerate(raw_segments))
    words = None if raw_words is None else tuple(
        ResultWord.from_meta(w, f'{where}.words[{i}]') for i, w in enumerate(raw_words))
    return ResultOk(request_id, text, language, duration_s, segments, words)


@dataclass(frozen=True)
class BatchResult:
    TYPE: ClassVar[int] = TAG_BATCH_RESULT
    NAME: ClassVar[str] = 'BatchResult'
    batch_id: str
    results: Tuple[BatchItemResult, ...]
    compute_ms: float

    def to_meta(self) -> Dict[str, Any]:
        return {
            'batchId': self.batch_id,
            'results': [result.to_meta() for result in self.results],
            'computeMs': self.compute_ms,
        }

    @classmethod
    def from_frame(cls, frame: Frame) -> 'BatchResult':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        batch_id, raw, compute_ms = m.string('batchId'), m.array('results'), m.number('computeMs')
        m.done()
        results = tuple(_result_from_meta(value, f'BatchResult.results[{i}]') for i, value in enumerate(raw))
        return cls(batch_id, results, compute_ms)


@dataclass(frozen=True)
class HeartbeatAck:
    TYPE: ClassVar[int] = TAG_HEARTBEAT_ACK
    NAME: ClassVar[str] = 'HeartbeatAck'
    seq: int
    state: str  # one of HEARTBEAT_STATES
    busy_ms: int
    queued_batches: int
    memory_bytes: int = 0
    eager_batches: int = 0
    graph_replays: int = 0

    def to_meta(self) -> Dict[str, Any]:
        return {
            'seq': self.seq,
            'state': self.state,
            'busyMs': self.busy_ms,
            'queuedBatches': self.queued_batches,
            'memoryBytes': self.memory_bytes,
            'eagerBatches': self.eager_batches,
            'graphReplays': self.graph_replays,
        }

    @classmethod
    def from_frame(cls, frame: Frame) -> 'HeartbeatAck':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.integer('seq'), m.one_of('state', HEARTBEAT_STATES), m.integer('busyMs'),
                      m.integer('queuedBatches'), m.integer('memoryBytes'), m.integer('eagerBatches'),
                      m.integer('graphReplays'))
        m.done()
        return message


@dataclass(frozen=True)
class Closed:
    TYPE: ClassVar[int] = TAG_CLOSED
    NAME: ClassVar[str] = 'Closed'

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'Closed':
        _no_body(frame, cls.NAME)
        _Meta(frame.meta, cls.NAME).done()
        return cls()


@dataclass(frozen=True)
class Error:
    """The ``Error`` message (tag 0x8F): a failure of a whole request frame, or unsolicited."""

    TYPE: ClassVar[int] = TAG_ERROR
    NAME: ClassVar[str] = 'Error'
    code: str  # a wire code
    message: str
    request_id: Optional[str] = None

    def to_meta(self) -> Dict[str, Any]:
        return {'code': self.code, 'message': self.message, 'requestId': self.request_id}

    @classmethod
    def from_frame(cls, frame: Frame) -> 'Error':
        _no_body(frame, cls.NAME)
        m = _Meta(frame.meta, cls.NAME)
        message = cls(m.one_of('code', WIRE_ERROR_CODES), m.string('message'), m.optional_string('requestId'))
        m.done()
        return message


ControllerMessage = Union[LoadRequest, WarmupRequest, RunBatch, Heartbeat, Close]
HostMessage = Union[Hello, LoadResult, WarmupResult, BatchResult, HeartbeatAck, Closed, Error]
Message = Union[ControllerMessage, HostMessage]

_MESSAGE_TYPES: Tuple[Type[Any], ...] = (
    LoadRequest, WarmupRequest, RunBatch, Heartbeat, Close,
    Hello, LoadResult, WarmupResult, BatchResult, HeartbeatAck, Closed, Error,
)
MESSAGE_CLASSES: Dict[int, Type[Any]] = {cls.TYPE: cls for cls in _MESSAGE_TYPES}
MESSAGE_NAMES: Dict[int, str] = {tag: cls.NAME for tag, cls in MESSAGE_CLASSES.items()}


def to_frame(message: Message, correlation_id: int = 0) -> Frame:
    body: Union[bytes, bytearray] = b''
    if isinstance(message, RunBatch):
        message.validate()
        body = message.body
    return Frame(message.TYPE, correlation_id, message.to_meta(), body)


def from_frame(frame: Frame) -> Message:
    cls = MESSAGE_CLASSES.get(frame.type)
    if cls is None:
        raise ProtocolError(f'Expected a known message type: got 0x{frame.type:02X}')
    message: Message = cls.from_frame(frame)
    return message


def encode_message(message: Message, correlation_id: int = 0) -> bytes:
    return encode_frame(to_frame(message, correlation_id))


def decode_message(data: Union[bytes, bytearray, memoryview]) -> Tuple[Message, int]:
    """Decode one whole frame into its message and correlation id."""
    frame = decode_frame(data)
    return from_frame(frame), frame.correlation_id
