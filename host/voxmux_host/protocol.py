"""The instance wire format of docs/protocol.md (version 3): frames, the meta reader and the message codec.

A frame is a 24-byte little-endian header, ``metaLength`` bytes of compact UTF-8 JSON meta and
``bodyLength`` bytes of binary body. This module has three layers:

- ``Frame`` with ``encode_frame``, ``decode_header``, ``decode_frame`` and ``read_frame``: the
  header checks and the JSON meta, independent of the message kind;
- ``Record`` (the base of the generated classes of ``messages.py``: ``to_meta``/``from_meta``),
  ``MetaReader`` and the ``read_*`` parsers that read each field strictly;
- ``to_frame``/``from_frame`` (and the shortcuts ``encode_message`` and ``decode_message``): a
  message of ``messages.py`` to and from a frame, with its body checked against its layout and the
  rules of ``check_message``; ``split_sequence_body``, ``split_states`` and ``join_states`` for
  the bodies of sequence batches.

The message classes themselves are generated from ``src/protocol/message-table.ts`` into
``messages.py``, which imports this module; this module imports ``messages`` inside functions
only, so either may be imported first.

Every malformed input raises ``ProtocolError``, whose wire code is ``bad_frame``. The module
uses the standard library only, so small fixture processes can import it cheaply.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, fields, is_dataclass
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Literal, NamedTuple, Optional, Protocol,
                    Sequence, Tuple, Type, TypeVar, Union, cast, get_args, get_origin, get_type_hints)

from .errors import InstanceError

if TYPE_CHECKING:
    from .messages import Message, RunBatch, RunSequenceBatch, SequenceResult

MAGIC = 0x584D5856  # the bytes 'V X M X' when written little-endian
PROTOCOL_VERSION = 7
HEADER_BYTES = 24
MAX_META_BYTES = 1 << 20
MAX_BODY_BYTES = 1 << 30
MAX_U32 = 0xFFFFFFFF

_HEADER = struct.Struct('<IHHIIII')

#: A session's state travels with items and results: at most 1 MiB (MAX_STATE_BYTES in work.ts).
MAX_STATE_BYTES = 1 << 20

#: RunBatch audio: 16 kHz mono 16-bit PCM, int16 little-endian; float value = int16 / 32768.
BYTES_PER_SAMPLE = 2


#: A message body: the bytes after the meta.
Body = Union[bytes, bytearray]


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
    body: Body = b''


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
    from .messages import KNOWN_TAGS

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
    from .messages import KNOWN_TAGS

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
# Meta reader: what the generated from_meta() methods use

T = TypeVar('T')
#: Reads one value found at ``where`` (for messages: 'RunBatch.requests[0].samples').
Parser = Callable[[Any, str], T]


def _shown(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return shown if len(shown) <= 64 else shown[:64] + '...'


def _fail(where: str, expected: str, value: Any) -> ProtocolError:
    return ProtocolError(f'Expected {where} to be {expected}: got {_shown(value)}')


class MetaReader:
    """Reads the fields of one JSON object strictly: it must hold exactly ``keys``, each read with a parser."""

    def __init__(self, value: Any, where: str, keys: Tuple[str, ...]) -> None:
        if not isinstance(value, dict):
            raise _fail(where, 'an object', value)
        for key in keys:
            if key not in value:
                raise ProtocolError(f'Expected {where}.{key}: it is missing')
        extra = [key for key in value if key not in keys]
        if extra:
            raise ProtocolError(f'Expected no other fields in {where}: got {", ".join(extra)}')
        self._value: Dict[str, Any] = value
        self._where = where

    def field(self, key: str, parser: Callable[[Any, str], T]) -> T:
        return parser(self._value[key], f'{self._where}.{key}')


#: A record's wire keys, in wire order, each with the parser of its value.
Fields = Tuple[Tuple[str, Callable[[Any, str], Any]], ...]
R = TypeVar('R', bound='Record')


class Wire(NamedTuple):
    """A message's place in the table: its tag, name, direction ('down' or 'up') and body layout."""

    tag: int
    name: str
    direction: str
    body_layout: str


class Record:
    """The base of the generated structs and messages (frozen dataclasses): their JSON meta both ways.

    A subclass lists its wire keys in ``FIELDS`` in the order of its dataclass fields; a message's
    dataclass ends with ``body`` when its layout is not 'none'.
    """

    WIRE: ClassVar[Optional[Wire]] = None
    FIELDS: ClassVar[Fields] = ()

    def to_meta(self) -> Dict[str, Any]:
        """The meta as JSON: camelCase keys in wire order, nested records and tuples written out."""
        return {key: _to_json(getattr(self, attr)) for key, attr in _keys_and_attributes(type(self))}

    @classmethod
    def from_meta(cls: Type[R], value: Any, where: str = '', body: Optional[Body] = None) -> R:
        """Reads the meta strictly (every field present, of its type, no other field); ``body`` for a
        message whose layout is not 'none'. Raises ``ProtocolError``."""
        reader = MetaReader(value, where or cls.__name__, tuple(key for key, _ in cls.FIELDS))
        values = [reader.field(key, parser) for key, parser in cls.FIELDS]
        if body is not None:
            values.append(body)
        return cls(*values)


#: Per record class, its wire keys with their dataclass attributes (results go out on every batch: the
#: pairs are worked out once per class, not on every call).
_KEYS_AND_ATTRIBUTES: Dict[type, Tuple[Tuple[str, str], ...]] = {}


def _keys_and_attributes(cls: type) -> Tuple[Tuple[str, str], ...]:
    pairs = _KEYS_AND_ATTRIBUTES.get(cls)
    if pairs is None:
        keys = [key for key, _ in cast(Any, cls).FIELDS]
        pairs = _KEYS_AND_ATTRIBUTES[cls] = tuple(zip(keys, (f.name for f in fields(cls))))
    return pairs


def _to_json(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_meta()
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    return value


def read_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, 'a string', value)
    return value


def read_integer(value: Any, where: str) -> int:
    """A non-negative integer (every integer on the wire is a count, a size, a duration or an id)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(where, 'a non-negative integer', value)
    return value


def read_number(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _fail(where, 'a number', value)
    return value


def read_boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, 'a boolean', value)
    return value


def read_json_object(value: Any, where: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, 'an object', value)
    return value


def read_enum(values: Tuple[str, ...]) -> Callable[[Any, str], Any]:
    """A parser for one of ``values`` (typed Any so that it fits the field's Literal type)."""

    def read(value: Any, where: str) -> Any:
        if not isinstance(value, str) or value not in values:
            raise _fail(where, 'one of ' + ', '.join(values), value)
        return value

    return read


def read_optional(parser: Callable[[Any, str], T]) -> Callable[[Any, str], Optional[T]]:
    def read(value: Any, where: str) -> Optional[T]:
        return None if value is None else parser(value, where)

    return read


def read_array(parser: Callable[[Any, str], T]) -> Callable[[Any, str], Tuple[T, ...]]:
    def read(value: Any, where: str) -> Tuple[T, ...]:
        if not isinstance(value, list):
            raise _fail(where, 'an array', value)
        return tuple(parser(item, f'{where}[{i}]') for i, item in enumerate(value))

    return read


# ---------------------------------------------------------------------------------------------
# Messages: bodies and rules beyond the field types


def expected_body_length(message: Message) -> Optional[int]:
    """The body length a message's meta calls for (docs/protocol.md, Body layouts); None for 'bytes'."""
    from .messages import RunBatch, RunSequenceBatch, SequenceResult

    if isinstance(message, RunBatch):
        return sum(BYTES_PER_SAMPLE * item.samples for item in message.requests)
    if isinstance(message, RunSequenceBatch):
        return sum(BYTES_PER_SAMPLE * item.samples + item.state_bytes for item in message.items)
    if isinstance(message, SequenceResult):
        return sum(result.state_bytes for result in message.results)
    return None if wire_of(message).body_layout == 'bytes' else 0


def check_message(message: Message) -> None:
    """Checks a message's body length against its layout and the rules a field type cannot express
    (the same as ``MESSAGE_RULES`` in src/protocol/codec.ts); raises ``ProtocolError``."""
    name = wire_of(message).name
    body = getattr(message, 'body', b'')
    expected = expected_body_length(message)
    if expected is not None and len(body) != expected:
        raise ProtocolError(f'Expected a {name} body of {expected} bytes (layout {wire_of(message).body_layout}): '
                            f'got {len(body)}')
    broken = _broken_rule(message)
    if broken is not None:
        raise ProtocolError(f'Expected a well-formed {name}: {broken}')


def wire_of(message: Union[Message, Type[Any]]) -> Wire:
    """A message's (or message class's) tag, name, direction and body layout."""
    wire = message.WIRE
    if wire is None:
        raise ProtocolError(f'Expected a message: got {message!r}')
    return cast(Wire, wire)


def _broken_rule(message: Message) -> Optional[str]:
    from .messages import BatchResult, RunBatch, RunSequenceBatch, SequenceResult, StreamEnd

    if isinstance(message, RunBatch):
        if not message.requests:
            return 'requests is empty'
        return _duplicate([item.request_id for item in message.requests], 'requestId')
    if isinstance(message, RunSequenceBatch):
        if not message.items:
            return 'items is empty'
        for i, item in enumerate(message.items):
            if item.state_bytes > MAX_STATE_BYTES:
                return f'items[{i}].stateBytes {item.state_bytes} is over {MAX_STATE_BYTES}'
            if item.state_in != 'attached' and item.state_bytes != 0:
                return f'items[{i}].stateBytes is {item.state_bytes} with stateIn {item.state_in}'
        return _duplicate([item.session_id for item in message.items], 'sessionId')
    if isinstance(message, BatchResult):
        for i, batch_result in enumerate(message.results):
            if (batch_result.error is None) == (batch_result.transcript is None):
                return f'results[{i}] needs exactly one of error and transcript'
    if isinstance(message, SequenceResult):
        for i, result in enumerate(message.results):
            if (result.error is None) == (result.output is None):
                return f'results[{i}] needs exactly one of error and output'
            if result.state_bytes > MAX_STATE_BYTES:
                return f'results[{i}].stateBytes {result.state_bytes} is over {MAX_STATE_BYTES}'
            if result.error is not None and result.state_bytes != 0:
                return f'results[{i}] has an error and {result.state_bytes} state bytes'
    if isinstance(message, StreamEnd) and (message.usage is None) == (message.error is None):
        return 'needs exactly one of usage and error'
    return None


def _duplicate(values: List[str], what: str) -> Optional[str]:
    seen = set()
    for value in values:
        if value in seen:
            return f"{what} '{value}' appears twice"
        seen.add(value)
    return None


def to_frame(message: Message, correlation_id: int = 0) -> Frame:
    check_message(message)
    body: Body = getattr(message, 'body', b'')
    return Frame(wire_of(message).tag, correlation_id, message.to_meta(), body)


def from_frame(frame: Frame) -> Message:
    from .messages import MESSAGE_CLASSES

    cls = MESSAGE_CLASSES.get(frame.type)
    if cls is None:
        raise ProtocolError(f'Expected a known message type: got 0x{frame.type:02X}')
    wire = wire_of(cls)
    if wire.body_layout == 'none':
        if len(frame.body) != 0:
            raise ProtocolError(f'Expected no body in {wire.name}: got {len(frame.body)} bytes')
        message: Message = cls.from_meta(frame.meta)
    else:
        message = cls.from_meta(frame.meta, body=frame.body)
    check_message(message)
    return message


def encode_message(message: Message, correlation_id: int = 0) -> bytes:
    return encode_frame(to_frame(message, correlation_id))


def decode_message(data: Union[bytes, bytearray, memoryview]) -> Tuple[Message, int]:
    """Decode one whole frame into its message and correlation id."""
    frame = decode_frame(data)
    return from_frame(frame), frame.correlation_id


# ---------------------------------------------------------------------------------------------
# Bodies of batches and sequence batches


class SequenceItemBody(NamedTuple):
    """One item's part of a RunSequenceBatch body."""

    audio: memoryview  # int16 samples (format 'h'), a view of the body: writable when the body is a bytearray
    state: bytes  # the attached state; empty unless the item's state_in is 'attached'


def _int16_view(body: Body, start: int, end: int) -> memoryview:
    # NOTE: 'h' is native byte order; the wire is little-endian, as every host this runs on.
    return memoryview(body)[start:end].cast('h')


def split_pcm16_body(message: RunBatch) -> List[memoryview]:
    """Each request's int16 samples of a RunBatch, as views of its body, in request order."""
    views: List[memoryview] = []
    offset = 0
    for item in message.requests:
        views.append(_int16_view(message.body, offset, offset + BYTES_PER_SAMPLE * item.samples))
        offset += BYTES_PER_SAMPLE * item.samples
    return views


def split_sequence_body(message: RunSequenceBatch) -> List[SequenceItemBody]:
    """Each item's audio (a view) and attached state (a copy) of a RunSequenceBatch, in item order."""
    parts: List[SequenceItemBody] = []
    offset = 0
    for item in message.items:
        audio_end = offset + BYTES_PER_SAMPLE * item.samples
        state_end = audio_end + item.state_bytes
        parts.append(SequenceItemBody(_int16_view(message.body, offset, audio_end),
                                      bytes(message.body[audio_end:state_end])))
        offset = state_end
    return parts


def join_states(states: Sequence[Union[bytes, bytearray, memoryview]]) -> bytes:
    """The body of a SequenceResult: its results' states, in order (each result's ``state_bytes`` is
    ``len`` of its state; a failed item's state is empty)."""
    return b''.join(bytes(state) for state in states)


def split_states(message: SequenceResult) -> List[bytes]:
    """Each result's state of a SequenceResult, in result order."""
    states: List[bytes] = []
    offset = 0
    for result in message.results:
        states.append(bytes(message.body[offset:offset + result.state_bytes]))
        offset += result.state_bytes
    return states


# ---------------------------------------------------------------------------------------------
# The Python side's own description of the message table


def camel_case(name: str) -> str:
    """A Python field name as the wire names it: ``avg_logprob`` -> ``avgLogprob``."""
    head, *rest = name.split('_')
    return head + ''.join(part[:1].upper() + part[1:] for part in rest)


def describe_messages() -> Dict[str, Any]:
    """The messages as this side declares them, from the dataclasses' fields and type annotations:
    ``{"messages": [{name, tag, direction, body, meta: [[field, type], ...]}], "structs": {...}}`` in
    the vocabulary of scripts/gen-protocol.ts (describeTable). A conformance test compares the two."""
    from .messages import MESSAGE_CLASSES

    structs: Dict[str, List[List[str]]] = {}

    def describe(tp: Any) -> str:
        origin, args = get_origin(tp), get_args(tp)
        simple = {str: 'string', int: 'integer', float: 'number', bool: 'boolean'}
        if tp in simple:
            return simple[tp]
        if origin is dict:
            return 'JsonObject'
        if origin is Literal:
            return '|'.join(f"'{value}'" for value in args)
        if origin is tuple:
            inner = describe(args[0])
            return f'({inner})[]' if '|' in inner else f'{inner}[]'
        if origin is Union:
            others = [arg for arg in args if arg is not type(None)]
            if len(others) == 1 and len(args) == 2:
                return f'{describe(others[0])}|null'
        if isinstance(tp, type) and is_dataclass(tp):
            if tp.__name__ not in structs:
                structs[tp.__name__] = []
                structs[tp.__name__] = fields_of(tp)
            return tp.__name__
        raise TypeError(f'No wire type for {tp!r}')

    def fields_of(cls: Any) -> List[List[str]]:
        hints = get_type_hints(cls)
        return [[camel_case(f.name), describe(hints[f.name])] for f in fields(cls) if f.name != 'body']

    messages = [{
        'name': wire_of(cls).name,
        'tag': tag,
        'direction': wire_of(cls).direction,
        'body': wire_of(cls).body_layout,
        'meta': fields_of(cls),
    } for tag, cls in sorted(MESSAGE_CLASSES.items())]
    return {'messages': messages, 'structs': structs}
