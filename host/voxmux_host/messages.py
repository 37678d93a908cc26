# Generated from src/protocol/message-table.ts by `npm run docs`: do not edit.
"""The messages of the instance protocol, version 3 (docs/protocol.md).

One frozen dataclass per named struct and per message, fields in wire order with snake_case names.
``to_meta()`` gives the JSON meta (camelCase keys, in wire order); ``from_meta()`` reads it strictly
(every field present, of its type, no other field) and raises ``ProtocolError`` otherwise. A message
whose body layout is not 'none' also holds ``body``. Frames, body checks and the shortcuts
``encode_message``/``decode_message`` are in ``protocol.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, FrozenSet, Literal, Optional, Tuple, Type, Union

from .protocol import (
    Body,
    MetaReader,
    read_array,
    read_boolean,
    read_enum,
    read_integer,
    read_json_object,
    read_number,
    read_optional,
    read_string,
)


SequenceItemStateIn = Literal['new', 'resident', 'attached']
SEQUENCE_ITEM_STATE_IN_VALUES: Tuple[SequenceItemStateIn, ...] = ('new', 'resident', 'attached')

WireErrorCode = Literal[
    'invalid_audio',
    'model_failed',
    'out_of_memory',
    'unsupported_option',
    'load_failed',
    'protocol_mismatch',
    'bad_frame',
    'instance_wedged',
    'stream_cancelled',
    'session_state_missing',
    'resource_not_found',
    'state_too_large',
]
WIRE_ERROR_CODE_VALUES: Tuple[WireErrorCode, ...] = (
    'invalid_audio',
    'model_failed',
    'out_of_memory',
    'unsupported_option',
    'load_failed',
    'protocol_mismatch',
    'bad_frame',
    'instance_wedged',
    'stream_cancelled',
    'session_state_missing',
    'resource_not_found',
    'state_too_large',
)

ResourceInfoResidency = Literal['device', 'host']
RESOURCE_INFO_RESIDENCY_VALUES: Tuple[ResourceInfoResidency, ...] = ('device', 'host')

LoadResultWorkKind = Literal['batch', 'sequence', 'stream']
LOAD_RESULT_WORK_KIND_VALUES: Tuple[LoadResultWorkKind, ...] = ('batch', 'sequence', 'stream')

HeartbeatAckState = Literal['idle', 'busy', 'wedged']
HEARTBEAT_ACK_STATE_VALUES: Tuple[HeartbeatAckState, ...] = ('idle', 'busy', 'wedged')

ResourceLoadedSource = Literal['disk', 'host', 'resident']
RESOURCE_LOADED_SOURCE_VALUES: Tuple[ResourceLoadedSource, ...] = ('disk', 'host', 'resident')


@dataclass(frozen=True)
class BatchItem:
    """Struct BatchItem (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('requestId', 'samples', 'language', 'prompt', 'wordTimestamps')

    request_id: str
    samples: int
    language: Optional[str]
    prompt: Optional[str]
    word_timestamps: bool

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'samples': self.samples,
            'language': self.language,
            'prompt': self.prompt,
            'wordTimestamps': self.word_timestamps,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'BatchItem') -> BatchItem:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('requestId', read_string),
            m.field('samples', read_integer),
            m.field('language', read_optional(read_string)),
            m.field('prompt', read_optional(read_string)),
            m.field('wordTimestamps', read_boolean),
        )


@dataclass(frozen=True)
class SequenceItem:
    """Struct SequenceItem (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = (
        'requestId',
        'sessionId',
        'seq',
        'samples',
        'stateIn',
        'stateBytes',
        'isLast',
        'options',
    )

    request_id: str
    session_id: str
    seq: int
    samples: int
    state_in: SequenceItemStateIn
    state_bytes: int
    is_last: bool
    options: Dict[str, Any]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'sessionId': self.session_id,
            'seq': self.seq,
            'samples': self.samples,
            'stateIn': self.state_in,
            'stateBytes': self.state_bytes,
            'isLast': self.is_last,
            'options': self.options,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'SequenceItem') -> SequenceItem:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('requestId', read_string),
            m.field('sessionId', read_string),
            m.field('seq', read_integer),
            m.field('samples', read_integer),
            m.field('stateIn', read_enum(SEQUENCE_ITEM_STATE_IN_VALUES)),
            m.field('stateBytes', read_integer),
            m.field('isLast', read_boolean),
            m.field('options', read_json_object),
        )


@dataclass(frozen=True)
class WireError:
    """Struct WireError (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('code', 'message')

    code: WireErrorCode
    message: str

    def to_meta(self) -> Dict[str, Any]:
        return {
            'code': self.code,
            'message': self.message,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'WireError') -> WireError:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('code', read_enum(WIRE_ERROR_CODE_VALUES)),
            m.field('message', read_string),
        )


@dataclass(frozen=True)
class Segment:
    """Struct Segment (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('start', 'end', 'text')

    start: float
    end: float
    text: str

    def to_meta(self) -> Dict[str, Any]:
        return {
            'start': self.start,
            'end': self.end,
            'text': self.text,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Segment') -> Segment:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('start', read_number),
            m.field('end', read_number),
            m.field('text', read_string),
        )


@dataclass(frozen=True)
class Word:
    """Struct Word (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('word', 'start', 'end')

    word: str
    start: float
    end: float

    def to_meta(self) -> Dict[str, Any]:
        return {
            'word': self.word,
            'start': self.start,
            'end': self.end,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Word') -> Word:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('word', read_string),
            m.field('start', read_number),
            m.field('end', read_number),
        )


@dataclass(frozen=True)
class Transcript:
    """Struct Transcript (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('text', 'language', 'durationS', 'segments', 'words')

    text: str
    language: str
    duration_s: float
    segments: Optional[Tuple[Segment, ...]]
    words: Optional[Tuple[Word, ...]]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'text': self.text,
            'language': self.language,
            'durationS': self.duration_s,
            'segments': None if self.segments is None else [v0.to_meta() for v0 in self.segments],
            'words': None if self.words is None else [v0.to_meta() for v0 in self.words],
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Transcript') -> Transcript:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('text', read_string),
            m.field('language', read_string),
            m.field('durationS', read_number),
            m.field('segments', read_optional(read_array(Segment.from_meta))),
            m.field('words', read_optional(read_array(Word.from_meta))),
        )


@dataclass(frozen=True)
class ItemResult:
    """Struct ItemResult (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('requestId', 'error', 'transcript')

    request_id: str
    error: Optional[WireError]
    transcript: Optional[Transcript]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'error': None if self.error is None else self.error.to_meta(),
            'transcript': None if self.transcript is None else self.transcript.to_meta(),
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'ItemResult') -> ItemResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('requestId', read_string),
            m.field('error', read_optional(WireError.from_meta)),
            m.field('transcript', read_optional(Transcript.from_meta)),
        )


@dataclass(frozen=True)
class ResourceInfo:
    """Struct ResourceInfo (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('name', 'kind', 'residency', 'bytes')

    name: str
    kind: str
    residency: ResourceInfoResidency
    bytes: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'name': self.name,
            'kind': self.kind,
            'residency': self.residency,
            'bytes': self.bytes,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'ResourceInfo') -> ResourceInfo:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('name', read_string),
            m.field('kind', read_string),
            m.field('residency', read_enum(RESOURCE_INFO_RESIDENCY_VALUES)),
            m.field('bytes', read_integer),
        )


@dataclass(frozen=True)
class SequenceItemResult:
    """Struct SequenceItemResult (docs/protocol.md)."""

    KEYS: ClassVar[Tuple[str, ...]] = ('requestId', 'sessionId', 'seq', 'error', 'output', 'stateBytes')

    request_id: str
    session_id: str
    seq: int
    error: Optional[WireError]
    output: Optional[Dict[str, Any]]
    state_bytes: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'requestId': self.request_id,
            'sessionId': self.session_id,
            'seq': self.seq,
            'error': None if self.error is None else self.error.to_meta(),
            'output': self.output,
            'stateBytes': self.state_bytes,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'SequenceItemResult') -> SequenceItemResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('requestId', read_string),
            m.field('sessionId', read_string),
            m.field('seq', read_integer),
            m.field('error', read_optional(WireError.from_meta)),
            m.field('output', read_optional(read_json_object)),
            m.field('stateBytes', read_integer),
        )


@dataclass(frozen=True)
class LoadRequest:
    """LoadRequest (tag 0x01, down, body none)."""

    TAG: ClassVar[int] = 0x01
    NAME: ClassVar[str] = 'LoadRequest'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('instanceId', 'model', 'adapter', 'options', 'loadLockPath')

    instance_id: str
    model: str
    adapter: str
    options: Dict[str, Any]
    load_lock_path: Optional[str]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'instanceId': self.instance_id,
            'model': self.model,
            'adapter': self.adapter,
            'options': self.options,
            'loadLockPath': self.load_lock_path,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'LoadRequest') -> LoadRequest:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('instanceId', read_string),
            m.field('model', read_string),
            m.field('adapter', read_string),
            m.field('options', read_json_object),
            m.field('loadLockPath', read_optional(read_string)),
        )


@dataclass(frozen=True)
class WarmupRequest:
    """WarmupRequest (tag 0x02, down, body none)."""

    TAG: ClassVar[int] = 0x02
    NAME: ClassVar[str] = 'WarmupRequest'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ()

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_meta(cls, value: Any, where: str = 'WarmupRequest') -> WarmupRequest:
        MetaReader(value, where, cls.KEYS)
        return cls()


@dataclass(frozen=True)
class RunBatch:
    """RunBatch (tag 0x03, down, body pcm16)."""

    TAG: ClassVar[int] = 0x03
    NAME: ClassVar[str] = 'RunBatch'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'pcm16'
    KEYS: ClassVar[Tuple[str, ...]] = ('batchId', 'requests')

    batch_id: str
    requests: Tuple[BatchItem, ...]
    body: Body

    def to_meta(self) -> Dict[str, Any]:
        return {
            'batchId': self.batch_id,
            'requests': [v0.to_meta() for v0 in self.requests],
        }

    @classmethod
    def from_meta(cls, value: Any, body: Body, where: str = 'RunBatch') -> RunBatch:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('batchId', read_string),
            m.field('requests', read_array(BatchItem.from_meta)),
            body,
        )


@dataclass(frozen=True)
class Heartbeat:
    """Heartbeat (tag 0x04, down, body none)."""

    TAG: ClassVar[int] = 0x04
    NAME: ClassVar[str] = 'Heartbeat'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('seq',)

    seq: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'seq': self.seq,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Heartbeat') -> Heartbeat:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('seq', read_integer),
        )


@dataclass(frozen=True)
class Close:
    """Close (tag 0x05, down, body none)."""

    TAG: ClassVar[int] = 0x05
    NAME: ClassVar[str] = 'Close'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ()

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Close') -> Close:
        MetaReader(value, where, cls.KEYS)
        return cls()


@dataclass(frozen=True)
class RunSequenceBatch:
    """RunSequenceBatch (tag 0x06, down, body sequence)."""

    TAG: ClassVar[int] = 0x06
    NAME: ClassVar[str] = 'RunSequenceBatch'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'sequence'
    KEYS: ClassVar[Tuple[str, ...]] = ('batchId', 'items')

    batch_id: str
    items: Tuple[SequenceItem, ...]
    body: Body

    def to_meta(self) -> Dict[str, Any]:
        return {
            'batchId': self.batch_id,
            'items': [v0.to_meta() for v0 in self.items],
        }

    @classmethod
    def from_meta(cls, value: Any, body: Body, where: str = 'RunSequenceBatch') -> RunSequenceBatch:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('batchId', read_string),
            m.field('items', read_array(SequenceItem.from_meta)),
            body,
        )


@dataclass(frozen=True)
class EndSessions:
    """EndSessions (tag 0x07, down, body none)."""

    TAG: ClassVar[int] = 0x07
    NAME: ClassVar[str] = 'EndSessions'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('sessionIds',)

    session_ids: Tuple[str, ...]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'sessionIds': list(self.session_ids),
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'EndSessions') -> EndSessions:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('sessionIds', read_array(read_string)),
        )


@dataclass(frozen=True)
class StartStream:
    """StartStream (tag 0x08, down, body bytes)."""

    TAG: ClassVar[int] = 0x08
    NAME: ClassVar[str] = 'StartStream'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'bytes'
    KEYS: ClassVar[Tuple[str, ...]] = ('streamId', 'requestId', 'resource', 'params', 'creditChunks')

    stream_id: str
    request_id: str
    resource: Optional[str]
    params: Dict[str, Any]
    credit_chunks: int
    body: Body

    def to_meta(self) -> Dict[str, Any]:
        return {
            'streamId': self.stream_id,
            'requestId': self.request_id,
            'resource': self.resource,
            'params': self.params,
            'creditChunks': self.credit_chunks,
        }

    @classmethod
    def from_meta(cls, value: Any, body: Body, where: str = 'StartStream') -> StartStream:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('streamId', read_string),
            m.field('requestId', read_string),
            m.field('resource', read_optional(read_string)),
            m.field('params', read_json_object),
            m.field('creditChunks', read_integer),
            body,
        )


@dataclass(frozen=True)
class StreamCredit:
    """StreamCredit (tag 0x09, down, body none)."""

    TAG: ClassVar[int] = 0x09
    NAME: ClassVar[str] = 'StreamCredit'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('streamId', 'chunks')

    stream_id: str
    chunks: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'streamId': self.stream_id,
            'chunks': self.chunks,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'StreamCredit') -> StreamCredit:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('streamId', read_string),
            m.field('chunks', read_integer),
        )


@dataclass(frozen=True)
class CancelStream:
    """CancelStream (tag 0x0A, down, body none)."""

    TAG: ClassVar[int] = 0x0A
    NAME: ClassVar[str] = 'CancelStream'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('streamId',)

    stream_id: str

    def to_meta(self) -> Dict[str, Any]:
        return {
            'streamId': self.stream_id,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'CancelStream') -> CancelStream:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('streamId', read_string),
        )


@dataclass(frozen=True)
class LoadResource:
    """LoadResource (tag 0x0B, down, body none)."""

    TAG: ClassVar[int] = 0x0B
    NAME: ClassVar[str] = 'LoadResource'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('name', 'kind', 'source')

    name: str
    kind: str
    source: Dict[str, Any]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'name': self.name,
            'kind': self.kind,
            'source': self.source,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'LoadResource') -> LoadResource:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('name', read_string),
            m.field('kind', read_string),
            m.field('source', read_json_object),
        )


@dataclass(frozen=True)
class EvictResource:
    """EvictResource (tag 0x0C, down, body none)."""

    TAG: ClassVar[int] = 0x0C
    NAME: ClassVar[str] = 'EvictResource'
    DIRECTION: ClassVar[str] = 'down'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('name',)

    name: str

    def to_meta(self) -> Dict[str, Any]:
        return {
            'name': self.name,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'EvictResource') -> EvictResource:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('name', read_string),
        )


@dataclass(frozen=True)
class Hello:
    """Hello (tag 0x81, up, body none)."""

    TAG: ClassVar[int] = 0x81
    NAME: ClassVar[str] = 'Hello'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('protocolVersion', 'hostVersion', 'pid', 'adapters')

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
    def from_meta(cls, value: Any, where: str = 'Hello') -> Hello:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('protocolVersion', read_integer),
            m.field('hostVersion', read_string),
            m.field('pid', read_integer),
            m.field('adapters', read_array(read_string)),
        )


@dataclass(frozen=True)
class LoadResult:
    """LoadResult (tag 0x82, up, body none)."""

    TAG: ClassVar[int] = 0x82
    NAME: ClassVar[str] = 'LoadResult'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('model', 'device', 'parameters', 'memoryBytes', 'loadMs', 'workKinds')

    model: str
    device: str
    parameters: int
    memory_bytes: int
    load_ms: int
    work_kinds: Tuple[LoadResultWorkKind, ...]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'model': self.model,
            'device': self.device,
            'parameters': self.parameters,
            'memoryBytes': self.memory_bytes,
            'loadMs': self.load_ms,
            'workKinds': list(self.work_kinds),
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'LoadResult') -> LoadResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('model', read_string),
            m.field('device', read_string),
            m.field('parameters', read_integer),
            m.field('memoryBytes', read_integer),
            m.field('loadMs', read_integer),
            m.field('workKinds', read_array(read_enum(LOAD_RESULT_WORK_KIND_VALUES))),
        )


@dataclass(frozen=True)
class WarmupResult:
    """WarmupResult (tag 0x83, up, body none)."""

    TAG: ClassVar[int] = 0x83
    NAME: ClassVar[str] = 'WarmupResult'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('warmupMs', 'graphsCaptured')

    warmup_ms: int
    graphs_captured: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'warmupMs': self.warmup_ms,
            'graphsCaptured': self.graphs_captured,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'WarmupResult') -> WarmupResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('warmupMs', read_integer),
            m.field('graphsCaptured', read_integer),
        )


@dataclass(frozen=True)
class BatchResult:
    """BatchResult (tag 0x84, up, body none)."""

    TAG: ClassVar[int] = 0x84
    NAME: ClassVar[str] = 'BatchResult'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('batchId', 'results', 'computeMs')

    batch_id: str
    results: Tuple[ItemResult, ...]
    compute_ms: float

    def to_meta(self) -> Dict[str, Any]:
        return {
            'batchId': self.batch_id,
            'results': [v0.to_meta() for v0 in self.results],
            'computeMs': self.compute_ms,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'BatchResult') -> BatchResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('batchId', read_string),
            m.field('results', read_array(ItemResult.from_meta)),
            m.field('computeMs', read_number),
        )


@dataclass(frozen=True)
class HeartbeatAck:
    """HeartbeatAck (tag 0x85, up, body none)."""

    TAG: ClassVar[int] = 0x85
    NAME: ClassVar[str] = 'HeartbeatAck'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = (
        'seq',
        'state',
        'busyMs',
        'queuedBatches',
        'memoryBytes',
        'eagerBatches',
        'graphReplays',
        'sessions',
        'streams',
        'resources',
    )

    seq: int
    state: HeartbeatAckState
    busy_ms: int
    queued_batches: int
    memory_bytes: int
    eager_batches: int
    graph_replays: int
    sessions: int
    streams: int
    resources: Tuple[ResourceInfo, ...]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'seq': self.seq,
            'state': self.state,
            'busyMs': self.busy_ms,
            'queuedBatches': self.queued_batches,
            'memoryBytes': self.memory_bytes,
            'eagerBatches': self.eager_batches,
            'graphReplays': self.graph_replays,
            'sessions': self.sessions,
            'streams': self.streams,
            'resources': [v0.to_meta() for v0 in self.resources],
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'HeartbeatAck') -> HeartbeatAck:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('seq', read_integer),
            m.field('state', read_enum(HEARTBEAT_ACK_STATE_VALUES)),
            m.field('busyMs', read_integer),
            m.field('queuedBatches', read_integer),
            m.field('memoryBytes', read_integer),
            m.field('eagerBatches', read_integer),
            m.field('graphReplays', read_integer),
            m.field('sessions', read_integer),
            m.field('streams', read_integer),
            m.field('resources', read_array(ResourceInfo.from_meta)),
        )


@dataclass(frozen=True)
class Closed:
    """Closed (tag 0x86, up, body none)."""

    TAG: ClassVar[int] = 0x86
    NAME: ClassVar[str] = 'Closed'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ()

    def to_meta(self) -> Dict[str, Any]:
        return {}

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Closed') -> Closed:
        MetaReader(value, where, cls.KEYS)
        return cls()


@dataclass(frozen=True)
class SequenceResult:
    """SequenceResult (tag 0x87, up, body states)."""

    TAG: ClassVar[int] = 0x87
    NAME: ClassVar[str] = 'SequenceResult'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'states'
    KEYS: ClassVar[Tuple[str, ...]] = ('batchId', 'results', 'computeMs')

    batch_id: str
    results: Tuple[SequenceItemResult, ...]
    compute_ms: float
    body: Body

    def to_meta(self) -> Dict[str, Any]:
        return {
            'batchId': self.batch_id,
            'results': [v0.to_meta() for v0 in self.results],
            'computeMs': self.compute_ms,
        }

    @classmethod
    def from_meta(cls, value: Any, body: Body, where: str = 'SequenceResult') -> SequenceResult:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('batchId', read_string),
            m.field('results', read_array(SequenceItemResult.from_meta)),
            m.field('computeMs', read_number),
            body,
        )


@dataclass(frozen=True)
class SessionsEnded:
    """SessionsEnded (tag 0x88, up, body none)."""

    TAG: ClassVar[int] = 0x88
    NAME: ClassVar[str] = 'SessionsEnded'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('sessionIds',)

    session_ids: Tuple[str, ...]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'sessionIds': list(self.session_ids),
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'SessionsEnded') -> SessionsEnded:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('sessionIds', read_array(read_string)),
        )


@dataclass(frozen=True)
class StreamChunk:
    """StreamChunk (tag 0x89, up, body bytes)."""

    TAG: ClassVar[int] = 0x89
    NAME: ClassVar[str] = 'StreamChunk'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'bytes'
    KEYS: ClassVar[Tuple[str, ...]] = ('streamId', 'index', 'meta')

    stream_id: str
    index: int
    meta: Dict[str, Any]
    body: Body

    def to_meta(self) -> Dict[str, Any]:
        return {
            'streamId': self.stream_id,
            'index': self.index,
            'meta': self.meta,
        }

    @classmethod
    def from_meta(cls, value: Any, body: Body, where: str = 'StreamChunk') -> StreamChunk:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('streamId', read_string),
            m.field('index', read_integer),
            m.field('meta', read_json_object),
            body,
        )


@dataclass(frozen=True)
class StreamEnd:
    """StreamEnd (tag 0x8A, up, body none)."""

    TAG: ClassVar[int] = 0x8A
    NAME: ClassVar[str] = 'StreamEnd'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('streamId', 'chunks', 'usage', 'error')

    stream_id: str
    chunks: int
    usage: Optional[Dict[str, Any]]
    error: Optional[WireError]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'streamId': self.stream_id,
            'chunks': self.chunks,
            'usage': self.usage,
            'error': None if self.error is None else self.error.to_meta(),
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'StreamEnd') -> StreamEnd:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('streamId', read_string),
            m.field('chunks', read_integer),
            m.field('usage', read_optional(read_json_object)),
            m.field('error', read_optional(WireError.from_meta)),
        )


@dataclass(frozen=True)
class ResourceLoaded:
    """ResourceLoaded (tag 0x8B, up, body none)."""

    TAG: ClassVar[int] = 0x8B
    NAME: ClassVar[str] = 'ResourceLoaded'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('name', 'kind', 'residency', 'bytes', 'loadMs', 'source')

    name: str
    kind: str
    residency: ResourceInfoResidency
    bytes: int
    load_ms: int
    source: ResourceLoadedSource

    def to_meta(self) -> Dict[str, Any]:
        return {
            'name': self.name,
            'kind': self.kind,
            'residency': self.residency,
            'bytes': self.bytes,
            'loadMs': self.load_ms,
            'source': self.source,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'ResourceLoaded') -> ResourceLoaded:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('name', read_string),
            m.field('kind', read_string),
            m.field('residency', read_enum(RESOURCE_INFO_RESIDENCY_VALUES)),
            m.field('bytes', read_integer),
            m.field('loadMs', read_integer),
            m.field('source', read_enum(RESOURCE_LOADED_SOURCE_VALUES)),
        )


@dataclass(frozen=True)
class ResourceEvicted:
    """ResourceEvicted (tag 0x8C, up, body none)."""

    TAG: ClassVar[int] = 0x8C
    NAME: ClassVar[str] = 'ResourceEvicted'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('name', 'bytes')

    name: str
    bytes: int

    def to_meta(self) -> Dict[str, Any]:
        return {
            'name': self.name,
            'bytes': self.bytes,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'ResourceEvicted') -> ResourceEvicted:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('name', read_string),
            m.field('bytes', read_integer),
        )


@dataclass(frozen=True)
class Error:
    """Error (tag 0x8F, up, body none)."""

    TAG: ClassVar[int] = 0x8F
    NAME: ClassVar[str] = 'Error'
    DIRECTION: ClassVar[str] = 'up'
    BODY_LAYOUT: ClassVar[str] = 'none'
    KEYS: ClassVar[Tuple[str, ...]] = ('code', 'message', 'requestId')

    code: WireErrorCode
    message: str
    request_id: Optional[str]

    def to_meta(self) -> Dict[str, Any]:
        return {
            'code': self.code,
            'message': self.message,
            'requestId': self.request_id,
        }

    @classmethod
    def from_meta(cls, value: Any, where: str = 'Error') -> Error:
        m = MetaReader(value, where, cls.KEYS)
        return cls(
            m.field('code', read_enum(WIRE_ERROR_CODE_VALUES)),
            m.field('message', read_string),
            m.field('requestId', read_optional(read_string)),
        )


# Message tags. Down: supervisor -> instance. Up: instance -> supervisor.
TAG_LOAD_REQUEST = 0x01
TAG_WARMUP_REQUEST = 0x02
TAG_RUN_BATCH = 0x03
TAG_HEARTBEAT = 0x04
TAG_CLOSE = 0x05
TAG_RUN_SEQUENCE_BATCH = 0x06
TAG_END_SESSIONS = 0x07
TAG_START_STREAM = 0x08
TAG_STREAM_CREDIT = 0x09
TAG_CANCEL_STREAM = 0x0A
TAG_LOAD_RESOURCE = 0x0B
TAG_EVICT_RESOURCE = 0x0C
TAG_HELLO = 0x81
TAG_LOAD_RESULT = 0x82
TAG_WARMUP_RESULT = 0x83
TAG_BATCH_RESULT = 0x84
TAG_HEARTBEAT_ACK = 0x85
TAG_CLOSED = 0x86
TAG_SEQUENCE_RESULT = 0x87
TAG_SESSIONS_ENDED = 0x88
TAG_STREAM_CHUNK = 0x89
TAG_STREAM_END = 0x8A
TAG_RESOURCE_LOADED = 0x8B
TAG_RESOURCE_EVICTED = 0x8C
TAG_ERROR = 0x8F

ControllerMessage = Union[
    LoadRequest,
    WarmupRequest,
    RunBatch,
    Heartbeat,
    Close,
    RunSequenceBatch,
    EndSessions,
    StartStream,
    StreamCredit,
    CancelStream,
    LoadResource,
    EvictResource,
]
HostMessage = Union[
    Hello,
    LoadResult,
    WarmupResult,
    BatchResult,
    HeartbeatAck,
    Closed,
    SequenceResult,
    SessionsEnded,
    StreamChunk,
    StreamEnd,
    ResourceLoaded,
    ResourceEvicted,
    Error,
]
Message = Union[ControllerMessage, HostMessage]

MESSAGE_CLASSES: Dict[int, Type[Any]] = {
    0x01: LoadRequest,
    0x02: WarmupRequest,
    0x03: RunBatch,
    0x04: Heartbeat,
    0x05: Close,
    0x06: RunSequenceBatch,
    0x07: EndSessions,
    0x08: StartStream,
    0x09: StreamCredit,
    0x0A: CancelStream,
    0x0B: LoadResource,
    0x0C: EvictResource,
    0x81: Hello,
    0x82: LoadResult,
    0x83: WarmupResult,
    0x84: BatchResult,
    0x85: HeartbeatAck,
    0x86: Closed,
    0x87: SequenceResult,
    0x88: SessionsEnded,
    0x89: StreamChunk,
    0x8A: StreamEnd,
    0x8B: ResourceLoaded,
    0x8C: ResourceEvicted,
    0x8F: Error,
}
MESSAGE_NAMES: Dict[int, str] = {tag: cls.NAME for tag, cls in MESSAGE_CLASSES.items()}
DIRECTIONS: Dict[int, str] = {tag: cls.DIRECTION for tag, cls in MESSAGE_CLASSES.items()}
BODY_LAYOUTS: Dict[int, str] = {tag: cls.BODY_LAYOUT for tag, cls in MESSAGE_CLASSES.items()}
CONTROLLER_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'down')
HOST_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'up')
KNOWN_TAGS: FrozenSet[int] = CONTROLLER_TAGS | HOST_TAGS
STRUCT_CLASSES: Tuple[Type[Any], ...] = (
    BatchItem,
    SequenceItem,
    WireError,
    Segment,
    Word,
    Transcript,
    ItemResult,
    ResourceInfo,
    SequenceItemResult,
)
