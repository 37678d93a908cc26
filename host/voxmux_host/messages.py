# Generated from src/protocol/message-table.ts by `npm run docs`: do not edit.
"""The messages of the instance protocol, version 7 (docs/protocol.md).

One frozen dataclass per named struct and per message, fields in wire order with snake_case names;
``FIELDS`` pairs each wire key with its parser, and a message's ``WIRE`` gives its tag, name,
direction and body layout. ``to_meta()`` and ``from_meta()`` come from ``protocol.Record``. A message
whose body layout is not 'none' also holds ``body``. Frames, body checks and the shortcuts
``encode_message``/``decode_message`` are in ``protocol.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, FrozenSet, Literal, Optional, Tuple, Type, Union

from .protocol import (
    Body,
    Fields,
    Record,
    Wire,
    read_array,
    read_boolean,
    read_enum,
    read_integer,
    read_json_object,
    read_number,
    read_optional,
    read_string,
)


BatchItemTask = Literal['transcribe', 'translate']
BATCH_ITEM_TASK_VALUES: Tuple[BatchItemTask, ...] = ('transcribe', 'translate')

SequenceItemStateIn = Literal['new', 'resident', 'attached']
SEQUENCE_ITEM_STATE_IN_VALUES: Tuple[SequenceItemStateIn, ...] = ('new', 'resident', 'attached')

BootStageStage = Literal[
    'import',
    'device_init',
    'weight_read',
    'model_build',
    'device_upload',
    'compile',
    'warmup',
    'graph_capture',
]
BOOT_STAGE_STAGE_VALUES: Tuple[BootStageStage, ...] = (
    'import',
    'device_init',
    'weight_read',
    'model_build',
    'device_upload',
    'compile',
    'warmup',
    'graph_capture',
)

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
class BatchItem(Record):
    """Struct BatchItem (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('requestId', read_string),
        ('samples', read_integer),
        ('language', read_optional(read_string)),
        ('prompt', read_optional(read_string)),
        ('wordTimestamps', read_boolean),
        ('task', read_enum(BATCH_ITEM_TASK_VALUES)),
        ('temperature', read_number),
        ('piece', read_boolean),
    )

    request_id: str
    samples: int
    language: Optional[str]
    prompt: Optional[str]
    word_timestamps: bool
    task: BatchItemTask
    temperature: float
    piece: bool


@dataclass(frozen=True)
class SequenceItem(Record):
    """Struct SequenceItem (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('requestId', read_string),
        ('sessionId', read_string),
        ('seq', read_integer),
        ('samples', read_integer),
        ('stateIn', read_enum(SEQUENCE_ITEM_STATE_IN_VALUES)),
        ('stateBytes', read_integer),
        ('isLast', read_boolean),
        ('options', read_json_object),
    )

    request_id: str
    session_id: str
    seq: int
    samples: int
    state_in: SequenceItemStateIn
    state_bytes: int
    is_last: bool
    options: Dict[str, Any]


@dataclass(frozen=True)
class CatalogEntry(Record):
    """Struct CatalogEntry (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('name', read_string),
        ('kind', read_string),
        ('language', read_string),
        ('sampleRate', read_integer),
        ('gender', read_optional(read_string)),
        ('description', read_string),
    )

    name: str
    kind: str
    language: str
    sample_rate: int
    gender: Optional[str]
    description: str


@dataclass(frozen=True)
class BootStage(Record):
    """Struct BootStage (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('stage', read_enum(BOOT_STAGE_STAGE_VALUES)),
        ('ms', read_number),
        ('bytes', read_integer),
    )

    stage: BootStageStage
    ms: float
    bytes: int


@dataclass(frozen=True)
class WireError(Record):
    """Struct WireError (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (('code', read_enum(WIRE_ERROR_CODE_VALUES)), ('message', read_string))

    code: WireErrorCode
    message: str


@dataclass(frozen=True)
class SegmentDecoding(Record):
    """Struct SegmentDecoding (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('seek', read_integer),
        ('tokens', read_array(read_integer)),
        ('temperature', read_number),
        ('avgLogprob', read_number),
        ('compressionRatio', read_number),
        ('noSpeechProb', read_number),
    )

    seek: int
    tokens: Tuple[int, ...]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float


@dataclass(frozen=True)
class Segment(Record):
    """Struct Segment (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('start', read_number),
        ('end', read_number),
        ('text', read_string),
        ('decoding', read_optional(SegmentDecoding.from_meta)),
    )

    start: float
    end: float
    text: str
    decoding: Optional[SegmentDecoding]


@dataclass(frozen=True)
class Word(Record):
    """Struct Word (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (('word', read_string), ('start', read_number), ('end', read_number))

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript(Record):
    """Struct Transcript (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('text', read_string),
        ('language', read_string),
        ('durationS', read_number),
        ('segments', read_optional(read_array(Segment.from_meta))),
        ('words', read_optional(read_array(Word.from_meta))),
    )

    text: str
    language: str
    duration_s: float
    segments: Optional[Tuple[Segment, ...]]
    words: Optional[Tuple[Word, ...]]


@dataclass(frozen=True)
class ItemResult(Record):
    """Struct ItemResult (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('requestId', read_string),
        ('error', read_optional(WireError.from_meta)),
        ('transcript', read_optional(Transcript.from_meta)),
    )

    request_id: str
    error: Optional[WireError]
    transcript: Optional[Transcript]


@dataclass(frozen=True)
class ResourceInfo(Record):
    """Struct ResourceInfo (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('name', read_string),
        ('kind', read_string),
        ('residency', read_enum(RESOURCE_INFO_RESIDENCY_VALUES)),
        ('bytes', read_integer),
    )

    name: str
    kind: str
    residency: ResourceInfoResidency
    bytes: int


@dataclass(frozen=True)
class ResourceCounters(Record):
    """Struct ResourceCounters (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('hits', read_integer),
        ('misses', read_integer),
        ('loadsFromDisk', read_integer),
        ('loadsFromHost', read_integer),
        ('evictions', read_integer),
        ('diskLoadMs', read_number),
        ('hostLoadMs', read_number),
        ('budgetBytes', read_integer),
        ('residentBytes', read_integer),
    )

    hits: int
    misses: int
    loads_from_disk: int
    loads_from_host: int
    evictions: int
    disk_load_ms: float
    host_load_ms: float
    budget_bytes: int
    resident_bytes: int


@dataclass(frozen=True)
class EngineCounter(Record):
    """Struct EngineCounter (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (('name', read_string), ('value', read_number))

    name: str
    value: float


@dataclass(frozen=True)
class SequenceItemResult(Record):
    """Struct SequenceItemResult (docs/protocol.md)."""

    FIELDS: ClassVar[Fields] = (
        ('requestId', read_string),
        ('sessionId', read_string),
        ('seq', read_integer),
        ('error', read_optional(WireError.from_meta)),
        ('output', read_optional(read_json_object)),
        ('stateBytes', read_integer),
    )

    request_id: str
    session_id: str
    seq: int
    error: Optional[WireError]
    output: Optional[Dict[str, Any]]
    state_bytes: int


@dataclass(frozen=True)
class LoadRequest(Record):
    """LoadRequest (tag 0x01, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x01, 'LoadRequest', 'down', 'none')
    FIELDS: ClassVar[Fields] = (
        ('instanceId', read_string),
        ('model', read_string),
        ('adapter', read_string),
        ('options', read_json_object),
        ('loadLockPath', read_optional(read_string)),
    )

    instance_id: str
    model: str
    adapter: str
    options: Dict[str, Any]
    load_lock_path: Optional[str]


@dataclass(frozen=True)
class WarmupRequest(Record):
    """WarmupRequest (tag 0x02, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x02, 'WarmupRequest', 'down', 'none')
    FIELDS: ClassVar[Fields] = ()


@dataclass(frozen=True)
class RunBatch(Record):
    """RunBatch (tag 0x03, down, body pcm16)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x03, 'RunBatch', 'down', 'pcm16')
    FIELDS: ClassVar[Fields] = (('batchId', read_string), ('requests', read_array(BatchItem.from_meta)))

    batch_id: str
    requests: Tuple[BatchItem, ...]
    body: Body


@dataclass(frozen=True)
class Heartbeat(Record):
    """Heartbeat (tag 0x04, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x04, 'Heartbeat', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('seq', read_integer),)

    seq: int


@dataclass(frozen=True)
class Close(Record):
    """Close (tag 0x05, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x05, 'Close', 'down', 'none')
    FIELDS: ClassVar[Fields] = ()


@dataclass(frozen=True)
class RunSequenceBatch(Record):
    """RunSequenceBatch (tag 0x06, down, body sequence)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x06, 'RunSequenceBatch', 'down', 'sequence')
    FIELDS: ClassVar[Fields] = (('batchId', read_string), ('items', read_array(SequenceItem.from_meta)))

    batch_id: str
    items: Tuple[SequenceItem, ...]
    body: Body


@dataclass(frozen=True)
class EndSessions(Record):
    """EndSessions (tag 0x07, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x07, 'EndSessions', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('sessionIds', read_array(read_string)),)

    session_ids: Tuple[str, ...]


@dataclass(frozen=True)
class StartStream(Record):
    """StartStream (tag 0x08, down, body bytes)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x08, 'StartStream', 'down', 'bytes')
    FIELDS: ClassVar[Fields] = (
        ('streamId', read_string),
        ('requestId', read_string),
        ('resource', read_optional(read_string)),
        ('params', read_json_object),
        ('creditChunks', read_integer),
    )

    stream_id: str
    request_id: str
    resource: Optional[str]
    params: Dict[str, Any]
    credit_chunks: int
    body: Body


@dataclass(frozen=True)
class StreamCredit(Record):
    """StreamCredit (tag 0x09, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x09, 'StreamCredit', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('streamId', read_string), ('chunks', read_integer))

    stream_id: str
    chunks: int


@dataclass(frozen=True)
class CancelStream(Record):
    """CancelStream (tag 0x0A, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x0A, 'CancelStream', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('streamId', read_string),)

    stream_id: str


@dataclass(frozen=True)
class LoadResource(Record):
    """LoadResource (tag 0x0B, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x0B, 'LoadResource', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('name', read_string), ('kind', read_string), ('source', read_json_object))

    name: str
    kind: str
    source: Dict[str, Any]


@dataclass(frozen=True)
class EvictResource(Record):
    """EvictResource (tag 0x0C, down, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x0C, 'EvictResource', 'down', 'none')
    FIELDS: ClassVar[Fields] = (('name', read_string),)

    name: str


@dataclass(frozen=True)
class Hello(Record):
    """Hello (tag 0x81, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x81, 'Hello', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('protocolVersion', read_integer),
        ('hostVersion', read_string),
        ('pid', read_integer),
        ('adapters', read_array(read_string)),
    )

    protocol_version: int
    host_version: str
    pid: int
    adapters: Tuple[str, ...]


@dataclass(frozen=True)
class LoadResult(Record):
    """LoadResult (tag 0x82, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x82, 'LoadResult', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('model', read_string),
        ('device', read_string),
        ('parameters', read_integer),
        ('memoryBytes', read_integer),
        ('loadMs', read_integer),
        ('workKinds', read_array(read_enum(LOAD_RESULT_WORK_KIND_VALUES))),
        ('catalog', read_array(CatalogEntry.from_meta)),
        ('stages', read_array(BootStage.from_meta)),
    )

    model: str
    device: str
    parameters: int
    memory_bytes: int
    load_ms: int
    work_kinds: Tuple[LoadResultWorkKind, ...]
    catalog: Tuple[CatalogEntry, ...]
    stages: Tuple[BootStage, ...]


@dataclass(frozen=True)
class WarmupResult(Record):
    """WarmupResult (tag 0x83, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x83, 'WarmupResult', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('warmupMs', read_integer),
        ('graphsCaptured', read_integer),
        ('stages', read_array(BootStage.from_meta)),
    )

    warmup_ms: int
    graphs_captured: int
    stages: Tuple[BootStage, ...]


@dataclass(frozen=True)
class BatchResult(Record):
    """BatchResult (tag 0x84, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x84, 'BatchResult', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('batchId', read_string),
        ('results', read_array(ItemResult.from_meta)),
        ('computeMs', read_number),
    )

    batch_id: str
    results: Tuple[ItemResult, ...]
    compute_ms: float


@dataclass(frozen=True)
class HeartbeatAck(Record):
    """HeartbeatAck (tag 0x85, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x85, 'HeartbeatAck', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('seq', read_integer),
        ('state', read_enum(HEARTBEAT_ACK_STATE_VALUES)),
        ('busyMs', read_integer),
        ('queuedBatches', read_integer),
        ('memoryBytes', read_integer),
        ('eagerBatches', read_integer),
        ('graphReplays', read_integer),
        ('sessions', read_integer),
        ('streams', read_integer),
        ('resources', read_array(ResourceInfo.from_meta)),
        ('resourceCounters', read_optional(ResourceCounters.from_meta)),
        ('engineCounters', read_array(EngineCounter.from_meta)),
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
    resource_counters: Optional[ResourceCounters]
    engine_counters: Tuple[EngineCounter, ...]


@dataclass(frozen=True)
class Closed(Record):
    """Closed (tag 0x86, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x86, 'Closed', 'up', 'none')
    FIELDS: ClassVar[Fields] = ()


@dataclass(frozen=True)
class SequenceResult(Record):
    """SequenceResult (tag 0x87, up, body states)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x87, 'SequenceResult', 'up', 'states')
    FIELDS: ClassVar[Fields] = (
        ('batchId', read_string),
        ('results', read_array(SequenceItemResult.from_meta)),
        ('computeMs', read_number),
    )

    batch_id: str
    results: Tuple[SequenceItemResult, ...]
    compute_ms: float
    body: Body


@dataclass(frozen=True)
class SessionsEnded(Record):
    """SessionsEnded (tag 0x88, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x88, 'SessionsEnded', 'up', 'none')
    FIELDS: ClassVar[Fields] = (('sessionIds', read_array(read_string)),)

    session_ids: Tuple[str, ...]


@dataclass(frozen=True)
class StreamChunk(Record):
    """StreamChunk (tag 0x89, up, body bytes)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x89, 'StreamChunk', 'up', 'bytes')
    FIELDS: ClassVar[Fields] = (
        ('streamId', read_string),
        ('index', read_integer),
        ('meta', read_json_object),
    )

    stream_id: str
    index: int
    meta: Dict[str, Any]
    body: Body


@dataclass(frozen=True)
class StreamEnd(Record):
    """StreamEnd (tag 0x8A, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x8A, 'StreamEnd', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('streamId', read_string),
        ('chunks', read_integer),
        ('usage', read_optional(read_json_object)),
        ('error', read_optional(WireError.from_meta)),
    )

    stream_id: str
    chunks: int
    usage: Optional[Dict[str, Any]]
    error: Optional[WireError]


@dataclass(frozen=True)
class ResourceLoaded(Record):
    """ResourceLoaded (tag 0x8B, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x8B, 'ResourceLoaded', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('name', read_string),
        ('kind', read_string),
        ('residency', read_enum(RESOURCE_INFO_RESIDENCY_VALUES)),
        ('bytes', read_integer),
        ('loadMs', read_integer),
        ('source', read_enum(RESOURCE_LOADED_SOURCE_VALUES)),
    )

    name: str
    kind: str
    residency: ResourceInfoResidency
    bytes: int
    load_ms: int
    source: ResourceLoadedSource


@dataclass(frozen=True)
class ResourceEvicted(Record):
    """ResourceEvicted (tag 0x8C, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x8C, 'ResourceEvicted', 'up', 'none')
    FIELDS: ClassVar[Fields] = (('name', read_string), ('bytes', read_integer))

    name: str
    bytes: int


@dataclass(frozen=True)
class Error(Record):
    """Error (tag 0x8F, up, body none)."""

    WIRE: ClassVar[Optional[Wire]] = Wire(0x8F, 'Error', 'up', 'none')
    FIELDS: ClassVar[Fields] = (
        ('code', read_enum(WIRE_ERROR_CODE_VALUES)),
        ('message', read_string),
        ('requestId', read_optional(read_string)),
    )

    code: WireErrorCode
    message: str
    request_id: Optional[str]


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
MESSAGE_NAMES: Dict[int, str] = {tag: cls.WIRE.name for tag, cls in MESSAGE_CLASSES.items()}
DIRECTIONS: Dict[int, str] = {tag: cls.WIRE.direction for tag, cls in MESSAGE_CLASSES.items()}
BODY_LAYOUTS: Dict[int, str] = {tag: cls.WIRE.body_layout for tag, cls in MESSAGE_CLASSES.items()}
CONTROLLER_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'down')
HOST_TAGS: FrozenSet[int] = frozenset(tag for tag, d in DIRECTIONS.items() if d == 'up')
KNOWN_TAGS: FrozenSet[int] = CONTROLLER_TAGS | HOST_TAGS
STRUCT_CLASSES: Tuple[Type[Any], ...] = (
    BatchItem,
    SequenceItem,
    CatalogEntry,
    BootStage,
    WireError,
    SegmentDecoding,
    Segment,
    Word,
    Transcript,
    ItemResult,
    ResourceInfo,
    ResourceCounters,
    EngineCounter,
    SequenceItemResult,
)
