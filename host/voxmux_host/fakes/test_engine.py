"""The ``test`` adapter: a deterministic test double whose behaviour the tests control.

It serves every work kind (``work_kinds = ('batch', 'sequence', 'stream')``) and holds resources.

Load options (all optional; unknown keys fail the load so that typos surface):

| option | type | effect |
| --- | --- | --- |
| ``mode`` | ``'echo'`` or ``'slow'`` | ``slow`` is ``echo`` with ``batchDelayMs`` defaulting to 500 |
| ``batchDelayMs`` | int | sleep this long once per batch |
| ``itemDelayMs`` | int | sleep this long per request |
| ``finishDelayMs`` | int | sleep this long while building a batch's results (on the host's finisher thread) |
| ``stageDelayMs`` | int | sleep this long while staging a batch (on the host's stager thread) |
| ``loadDelayMs`` | int | sleep this long inside ``load`` (to observe the load lock) |
| ``probeDelayMs`` | int | sleep this long inside ``probe`` (to trip the probe timeout) |
| ``crashOnLoad`` | bool | ``os._exit(70)`` inside ``load`` |
| ``failLoad`` | bool | ``load`` raises ``InstanceError('load_failed')`` |
| ``crashAfterBatches`` | int | ``os._exit(70)`` when a batch starts after this many batches ran |
| ``wedgeProbe`` | bool | ``probe`` returns False |
| ``resourceBudgetBytes`` | int | resources held at most (their ``bytes``); past it the least recently used go |
| ``voices`` | list | the catalogue: each a name (an entry of kind ``voice``, ``en-US``, 16 kHz, gender null) or an object, passed on as it is (to test the host's validation) |
| ``voiceBytes`` | int | the bytes of a voice loaded by name from the catalogue (default 1000) |

**batch.** A request's text is ``echo samples=<n> crc=<crc32 of its int16 LE bytes, 8 hex digits>``,
so a result identifies its input exactly. A request prompt may hold a command:

| prompt | effect |
| --- | --- |
| ``voxmux-test:crash`` | ``os._exit(70)`` when the batch reaches that request |
| ``voxmux-test:hang`` | the batch never returns |
| ``voxmux-test:fail`` | that request fails with ``model_failed``; the others succeed |
| ``voxmux-test:bad-audio`` | that request fails with ``invalid_audio`` |
| ``voxmux-test:fail-finish`` | building the batch's results raises: every request of it fails |

The adapter splits each batch: the sleeps, crashes and hangs above happen in ``begin``, on the host's
main thread; the results are built, after ``finishDelayMs``, by the function it returns. It also
stages each batch (``stage``, on the host's stager thread, after ``stageDelayMs``): it copies the
requests' audio, and the echo then reads those copies.

**sequence.** A running sum per session: an item's output is ``{"sum": <the previous sum + the sum of
the item's int16 samples>, "items": <items so far, this one included>}``, and its state is that sum and
count as ``struct.pack('<qq', sum, items)`` (16 bytes). Item options (all optional; others fail the
item with ``unsupported_option``):

| item option | type | effect |
| --- | --- | --- |
| ``itemDelayMs`` | int | sleep this long for the item |
| ``command`` | ``'crash'``, ``'hang'`` or ``'fail'`` | ``os._exit(70)``; never return; the item fails with ``model_failed`` |
| ``padStateBytes`` | int | append this many zero bytes to the item's state (past 1 MiB in all: ``state_too_large``) |

A state that is not at least 16 bytes fails the item with ``invalid_audio``.

**diarization sequence.** An item whose options hold ``chunkOffsetS`` is a diarization chunk, with
the options and output of the diarization contract (docs/adapters.md): ``chunkOffsetS`` (seconds,
required), ``minSpeakers`` and ``maxSpeakers`` (integers from 1), ``speech`` (``[[startS, endS],
...]`` relative to the chunk), besides ``itemDelayMs`` and ``command`` above (without an item
``itemDelayMs``, the load option ``itemDelayMs`` delays each diarization item). The audio is read in
frames of ``DIARIZATION_FRAME_SAMPLES`` (100 ms; the chunk's last frame may be shorter): a frame is
silence when its RMS is under ``DIARIZATION_SILENCE_RMS`` or it lies outside every ``speech`` region
(by its middle), otherwise its loudness level is ``int(rms / DIARIZATION_LEVEL_RMS)``. Each level is a
speaker, numbered in order of first appearance (capped at ``maxSpeakers - 1``). Runs of frames of one
speaker are turns: a turn that reaches the chunk's end is provisional (it may go on in the next
chunk); the others are finalized; with ``is_last`` everything is. The output is ``{"finalized",
"provisional", "speakers"}``; the state is JSON (``levels`` seen, the open turn, the items so far), so
a session resumed on another instance gives the same timeline.

**stream.** ``StartStream.params`` (all optional; others end the stream with ``unsupported_option``):

| param | type | default | effect |
| --- | --- | --- | --- |
| ``chunks`` | int | 1 | how many chunks |
| ``chunkBytes`` | int | 16 | bytes per chunk: chunk ``i`` is the byte ``i % 256``, repeated |
| ``chunkDelayMs`` | int | 0 | wait this long before each chunk; a cancel ends the wait (and the stream) at once |
| ``failAfterChunks`` | int | none | after this many chunks the stream raises (it ends with ``model_failed``) |

Each chunk's ``meta`` is ``{"chunk": i, "resource": <the stream's resource or null>}``; the usage at
the end is ``{"chunks": N}``.

**speech stream.** A stream whose params hold ``sentences`` is speech synthesis, with the params the
gateway sends (docs/adapters.md): ``sentences`` (non-empty list of non-empty strings), ``voice`` (a
non-empty string) and ``speed`` (0.25 to 4); others end the stream with ``unsupported_option``. Each
sentence is a tone, ``(SPEECH_BASE_MS + SPEECH_MS_PER_CHARACTER * characters) / speed`` long, whose
pitch comes from the crc32 of the voice (so voices differ and a voice always sounds the same), as
mono 16-bit PCM at ``speechSampleRateHz`` in chunks of at most ``SPEECH_CHUNK_MS``; meta is
``{"sampleRate": rate, "sentence": index}`` and the usage ``{"characters", "sentences",
"audioSeconds"}``. Load options ``speechSampleRateHz`` (default 22050), ``speechChunkDelayMs``
(a wait before each chunk; a cancel ends it) and ``speechFailAfterChunks`` (the stream raises after
that many chunks) shape it.

**resources.** ``LoadResource.source`` is ``{"bytes": n, "loadDelayMs": d}`` (both optional, 0 by
default; other keys fail the load with ``unsupported_option``); any ``kind``. A resource lives on
the ``device``. Loading a resident one is a hit (``source: 'resident'``, no delay); otherwise it is a
load (``source: 'disk'``, after ``loadDelayMs``), and past ``resourceBudgetBytes`` the least recently
used others are evicted (one larger than the budget alone fails with ``out_of_memory``). A stream
that names a resource uses it (most recently used). ``stats().memory_bytes`` is the bytes of resident
resources; the counts of loads, hits and evictions are in :meth:`TestEngineAdapter.resource_counts`;
its engine counter ``requests`` counts the batch requests run.

**catalogue.** ``catalog()`` returns the ``voices`` option as catalogue entries. A LoadResource with an
empty ``source`` (what the host sends for a stream's resource it never loaded) loads a catalogue voice
by name, ``voiceBytes`` bytes; a name the catalogue lacks fails with ``resource_not_found``.
``resource_counters()`` reports ``misses`` and ``loadsFromDisk`` (each load), ``diskLoadMs`` (their
time), ``hits`` (a LoadResource of a resident resource, or a stream whose resource was already used
since it was loaded: the stream that a load was made for is counted by that load's miss),
``evictions``, ``budgetBytes`` (``resourceBudgetBytes``, 0 when unset) and ``residentBytes``.
"""
from __future__ import annotations

import json
import os
import struct
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Dict, Generator, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import NDArray

from ..errors import InstanceError
from ..model_api import (
    AdapterStats,
    BatchFinish,
    BatchInput,
    BatchOutput,
    ItemFailure,
    LoadContext,
    LoadInfo,
    ResourceInfo,
    ResourceLoad,
    Segment,
    SequenceInput,
    SequenceOutput,
    SimpleSequenceAdapter,
    StagedBatch,
    StreamPiece,
    StreamRequest,
    Transcript,
    WarmupInfo,
    Word,
    seconds,
)

SAMPLE_RATE_HZ = 16000
CRASH_EXIT_CODE = 70
SLOW_BATCH_DELAY_MS = 500

PROMPT_CRASH = 'voxmux-test:crash'
PROMPT_HANG = 'voxmux-test:hang'
PROMPT_FAIL = 'voxmux-test:fail'
PROMPT_BAD_AUDIO = 'voxmux-test:bad-audio'
PROMPT_FAIL_FINISH = 'voxmux-test:fail-finish'

#: A sequence session's state: the running sum and the item count.
SEQUENCE_STATE = struct.Struct('<qq')

_INT_OPTIONS = ('batchDelayMs', 'itemDelayMs', 'finishDelayMs', 'stageDelayMs', 'loadDelayMs', 'probeDelayMs',
                'crashAfterBatches', 'resourceBudgetBytes', 'voiceBytes', 'speechSampleRateHz', 'speechChunkDelayMs',
                'speechFailAfterChunks')
DEFAULT_VOICE_BYTES = 1000
_SPEECH_PARAMS = ('sentences', 'voice', 'speed')
SPEECH_BASE_MS = 200
SPEECH_MS_PER_CHARACTER = 60
SPEECH_CHUNK_MS = 200
SPEECH_DEFAULT_RATE_HZ = 22050
_BOOL_OPTIONS = ('crashOnLoad', 'failLoad', 'wedgeProbe')
_SEQUENCE_COMMANDS = ('crash', 'hang', 'fail')
_STREAM_PARAMS = ('chunks', 'chunkBytes', 'chunkDelayMs', 'failAfterChunks')
_DIARIZATION_OPTIONS = ('chunkOffsetS', 'minSpeakers', 'maxSpeakers', 'speech', 'itemDelayMs', 'command')
DIARIZATION_FRAME_SAMPLES = 1600
DIARIZATION_SILENCE_RMS = 500.0
DIARIZATION_LEVEL_RMS = 2500.0


def echo_text(audio: NDArray[np.int16]) -> str:
    """``echo samples=<n> crc=<crc32 of the int16 LE bytes>``: the bytes as they crossed the wire."""
    data = np.ascontiguousarray(audio, dtype='<i2').tobytes()
    return f'echo samples={audio.shape[0]} crc={zlib.crc32(data):08x}'


def chunk_data(index: int, chunk_bytes: int) -> bytes:
    """The bytes of a test stream's chunk ``index``."""
    return bytes((index % 256,)) * chunk_bytes


class _StagedAudio:
    """Copies of a batch's audio, made on the stager thread."""

    def __init__(self, audio: List[NDArray[np.int16]]) -> None:
        self.audio = audio
        self.released = False

    def release(self) -> None:
        self.released = True


@dataclass
class ResourceCounts:
    loads: int = 0
    hits: int = 0
    evictions: int = 0
    load_ms: float = 0.0


@dataclass
class _Resource:
    kind: str
    bytes: int
    #: Loaded and not yet used by a stream: the stream it was loaded for is not a hit.
    is_fresh: bool = True


def catalog_entry(voice: str) -> Dict[str, Any]:
    """The test engine's catalogue entry for a voice given by name."""
    return {'name': voice, 'kind': 'voice', 'language': 'en-US', 'sampleRate': SAMPLE_RATE_HZ, 'gender': None,
            'description': f'Test voice {voice}'}


@dataclass
class TestEngineStats(AdapterStats):
    ENGINE_COUNTERS: ClassVar[Tuple[str, ...]] = ("requests",)

    #: Batch requests run (each item of each batch, failed ones included).
    requests: int = 0


class TestEngineAdapter(SimpleSequenceAdapter):
    __test__ = False  # not a pytest test class

    work_kinds: ClassVar[Tuple[str, ...]] = ('batch', 'sequence', 'stream')

    def __init__(self) -> None:
        self._options: Dict[str, Any] = {}
        self._batches_run = 0
        self._requests_run = 0
        self._is_loaded = False
        self._resources_lock = threading.Lock()
        self._resources: 'OrderedDict[str, _Resource]' = OrderedDict()  # least recently used first
        self._counts = ResourceCounts()

    # -- common ----------------------------------------------------------------------------

    def load(self, ctx: LoadContext) -> LoadInfo:
        self._options = _parse_options(ctx.options)
        if self._options['loadDelayMs'] > 0:
            time.sleep(self._options['loadDelayMs'] / 1000)
        if self._options['crashOnLoad']:
            os._exit(CRASH_EXIT_CODE)
        if self._options['failLoad']:
            raise InstanceError('load_failed', 'The test adapter was asked to fail its load (failLoad)')
        self._is_loaded = True
        return LoadInfo(device='cpu', parameters=0, memory_bytes=0)

    def warmup(self) -> WarmupInfo:
        return WarmupInfo(graphs_captured=0)

    def stats(self) -> AdapterStats:
        with self._resources_lock:
            resident = sum(resource.bytes for resource in self._resources.values())
        return TestEngineStats(memory_bytes=resident, eager_batches=self._batches_run, graph_replays=0,
                               requests=self._requests_run)

    def catalog(self) -> List[Any]:
        return [catalog_entry(voice) if isinstance(voice, str) else voice for voice in self._options['voices']]

    def probe(self) -> bool:
        if self._options.get('probeDelayMs', 0) > 0:
            time.sleep(self._options['probeDelayMs'] / 1000)
        return not self._options.get('wedgeProbe', False)

    def close(self) -> None:
        self._is_loaded = False

    # -- batch -----------------------------------------------------------------------------

    def run_batch(self, inputs: Sequence[BatchInput]) -> List[BatchOutput]:
        """The whole batch in one call (tests)."""
        return self.begin(inputs, None)()

    def stage(self, inputs: Sequence[BatchInput]) -> _StagedAudio:
        if self._options['stageDelayMs'] > 0:
            time.sleep(self._options['stageDelayMs'] / 1000)
        return _StagedAudio([request.audio.copy() for request in inputs])

    def begin(self, inputs: Sequence[BatchInput], staged: Optional[StagedBatch]) -> BatchFinish:
        if staged is not None:
            if not isinstance(staged, _StagedAudio) or staged.released or len(staged.audio) != len(inputs):
                raise RuntimeError('The test adapter got staged audio that is released or of another batch')
            inputs = [replace(request, audio=audio) for request, audio in zip(inputs, staged.audio)]
            staged.release()
        crash_after = self._options['crashAfterBatches']
        if crash_after is not None and self._batches_run >= crash_after:
            os._exit(CRASH_EXIT_CODE)
        if self._options['batchDelayMs'] > 0:
            time.sleep(self._options['batchDelayMs'] / 1000)
        results: List[BatchOutput] = []
        for request in inputs:
            if self._options['itemDelayMs'] > 0:
                time.sleep(self._options['itemDelayMs'] / 1000)
            results.append(self._run_one(request))
        self._batches_run += 1
        self._requests_run += len(inputs)
        finish_delay_s = self._options['finishDelayMs'] / 1000
        must_fail = any(request.prompt == PROMPT_FAIL_FINISH for request in inputs)

        def finish() -> List[BatchOutput]:
            if finish_delay_s > 0:
                time.sleep(finish_delay_s)
            if must_fail:
                raise RuntimeError('The test adapter was asked to fail building this batch (fail-finish)')
            return results

        return finish

    def _run_one(self, request: BatchInput) -> BatchOutput:
        if request.prompt == PROMPT_CRASH:
            os._exit(CRASH_EXIT_CODE)
        if request.prompt == PROMPT_HANG:
            threading.Event().wait()  # never set: the batch never returns
        if request.prompt == PROMPT_FAIL:
            return ItemFailure('model_failed', 'The test adapter was asked to fail this request')
        if request.prompt == PROMPT_BAD_AUDIO:
            return ItemFailure('invalid_audio', 'The test adapter was asked to reject this audio')
        text = echo_text(request.audio)
        duration_s = request.audio.shape[0] / SAMPLE_RATE_HZ
        tokens = text.split(' ')
        step = duration_s / len(tokens)
        words = tuple(Word(token, seconds(i * step), seconds((i + 1) * step)) for i, token in enumerate(tokens))
        return Transcript(text, request.language or 'en', seconds(duration_s), (Segment(0.0, seconds(duration_s), text, None),),
                          words if request.word_timestamps else None)

    # -- sequence --------------------------------------------------------------------------

    def run_sequence(self, items: Sequence[SequenceInput]) -> List[Union[SequenceOutput, ItemFailure]]:
        return [self._sequence_item(item) for item in items]

    def _sequence_item(self, item: SequenceInput) -> Union[SequenceOutput, ItemFailure]:
        if 'chunkOffsetS' in item.options:
            return self._diarization_item(item)
        unknown = sorted(set(item.options) - {'itemDelayMs', 'command', 'padStateBytes'})
        if unknown:
            return ItemFailure('unsupported_option', f'Expected item options itemDelayMs, command or padStateBytes: '
                                                     f'got {", ".join(unknown)}')
        delay_ms = item.options.get('itemDelayMs', 0)
        pad = item.options.get('padStateBytes', 0)
        command = item.options.get('command')
        if not _is_count(delay_ms) or not _is_count(pad) or (command is not None and command not in _SEQUENCE_COMMANDS):
            return ItemFailure('unsupported_option', f'Expected itemDelayMs and padStateBytes to be non-negative '
                                                     f'integers and command one of {", ".join(_SEQUENCE_COMMANDS)}: '
                                                     f'got {item.options!r}')
        if delay_ms > 0:
            time.sleep(delay_ms / 1000)
        if command == 'crash':
            os._exit(CRASH_EXIT_CODE)
        if command == 'hang':
            threading.Event().wait()
        if command == 'fail':
            return ItemFailure('model_failed', 'The test adapter was asked to fail this item')
        total, count = 0, 0
        if item.state is not None:
            if len(item.state) < SEQUENCE_STATE.size:
                return ItemFailure('invalid_audio', f'Expected a state of at least {SEQUENCE_STATE.size} bytes: '
                                                    f'got {len(item.state)}')
            total, count = SEQUENCE_STATE.unpack_from(item.state)
        total += int(np.asarray(item.audio, dtype=np.int64).sum())
        count += 1
        return SequenceOutput({'sum': total, 'items': count}, SEQUENCE_STATE.pack(total, count) + bytes(pad))

    def _diarization_item(self, item: SequenceInput) -> Union[SequenceOutput, ItemFailure]:
        options = item.options
        unknown = sorted(set(options) - set(_DIARIZATION_OPTIONS))
        offset_s, speech = options.get('chunkOffsetS'), options.get('speech')
        max_speakers = options.get('maxSpeakers')
        is_bad = (unknown or isinstance(offset_s, bool) or not isinstance(offset_s, (int, float)) or offset_s < 0
                  or any(key in options and (not _is_count(options[key]) or options[key] < 1)
                         for key in ('minSpeakers', 'maxSpeakers'))
                  or (speech is not None and not _is_regions(speech))
                  or not _is_count(options.get('itemDelayMs', 0))
                  or options.get('command') not in (None, *_SEQUENCE_COMMANDS))
        if is_bad:
            return ItemFailure('unsupported_option', f'Expected diarization options chunkOffsetS (seconds), '
                                                     f'minSpeakers, maxSpeakers (from 1), speech ([[startS, endS]...]), '
                                                     f'itemDelayMs and command: got {options!r}')
        delay_ms = options.get('itemDelayMs', 0) or self._options.get('itemDelayMs', 0)
        if delay_ms > 0:
            time.sleep(delay_ms / 1000)
        command = options.get('command')
        if command == 'crash':
            os._exit(CRASH_EXIT_CODE)
        if command == 'hang':
            threading.Event().wait()
        if command == 'fail':
            return ItemFailure('model_failed', 'The test adapter was asked to fail this item')
        levels: List[int] = []
        open_turn: Optional[List[float]] = None  # [startS, endS, speaker]
        items = 0
        if item.state is not None:
            try:
                saved = json.loads(item.state.decode('utf-8'))
                levels, open_turn, items = list(saved['levels']), saved['open'], int(saved['items'])
            except (ValueError, KeyError, TypeError):
                return ItemFailure('invalid_audio', 'Expected a diarization state of the test adapter')
        audio = np.asarray(item.audio, dtype=np.float64)
        base_s = float(offset_s or 0)
        finalized: List[Dict[str, Any]] = []
        cap = max_speakers if isinstance(max_speakers, int) else None

        def close_open() -> None:
            nonlocal open_turn
            if open_turn is not None:
                finalized.append(_turn(open_turn))
                open_turn = None

        for first in range(0, audio.shape[0], DIARIZATION_FRAME_SAMPLES):
            frame = audio[first:first + DIARIZATION_FRAME_SAMPLES]
            start_s = base_s + first / SAMPLE_RATE_HZ
            end_s = base_s + (first + frame.shape[0]) / SAMPLE_RATE_HZ
            middle_s = (first + frame.shape[0] / 2) / SAMPLE_RATE_HZ
            rms = float(np.sqrt(np.mean(frame * frame)))
            is_speech = rms >= DIARIZATION_SILENCE_RMS and (
                speech is None or any(lo <= middle_s < hi for lo, hi in speech))
            if not is_speech:
                close_open()
                continue
            level = int(rms / DIARIZATION_LEVEL_RMS)
            if level not in levels:
                levels.append(level)
            speaker = levels.index(level)
            if cap is not None:
                speaker = min(speaker, cap - 1)
            if open_turn is not None and int(open_turn[2]) == speaker and abs(open_turn[1] - start_s) < 1e-6:
                open_turn[1] = end_s
            else:
                close_open()
                open_turn = [start_s, end_s, float(speaker)]
        if item.is_last:
            close_open()
        provisional = [] if open_turn is None else [_turn(open_turn)]
        speakers = len({int(level) for level in levels}) if cap is None else min(cap, len(levels))
        state = json.dumps({'levels': levels, 'open': open_turn, 'items': items + 1}).encode('utf-8')
        return SequenceOutput({'finalized': finalized, 'provisional': provisional, 'speakers': speakers}, state)

    # -- stream ----------------------------------------------------------------------------

    def open_stream(self, request: StreamRequest) -> Iterator[StreamPiece]:
        params = request.params
        if 'sentences' in params:
            return self._speech(request)
        unknown = sorted(set(params) - set(_STREAM_PARAMS))
        bad = [key for key in _STREAM_PARAMS if key in params and not _is_count(params[key])]
        if unknown or bad:
            raise InstanceError('unsupported_option', f'Expected stream params {", ".join(_STREAM_PARAMS)} as '
                                                      f'non-negative integers: got {params!r}')
        if request.resource is not None:
            self._use_resource(request.resource)
        return self._stream(request, int(params.get('chunks', 1)), int(params.get('chunkBytes', 16)),
                            int(params.get('chunkDelayMs', 0)), params.get('failAfterChunks'))

    def _stream(self, request: StreamRequest, chunks: int, chunk_bytes: int, delay_ms: int,
                fail_after: Optional[int]) -> Generator[StreamPiece, None, Dict[str, Any]]:
        resource = request.resource
        for index in range(chunks):
            if fail_after is not None and index >= fail_after:
                raise RuntimeError('The test adapter was asked to fail this stream (failAfterChunks)')
            if request.cancelled.wait(delay_ms / 1000):  # a cancel ends the wait, and the stream, at once
                return {'chunks': index}
            yield StreamPiece({'chunk': index, 'resource': resource}, chunk_data(index, chunk_bytes))
        return {'chunks': chunks}

    def _speech(self, request: StreamRequest) -> Generator[StreamPiece, None, Dict[str, Any]]:
        params = request.params
        sentences, voice, speed = params.get('sentences'), params.get('voice'), params.get('speed', 1)
        unknown = sorted(set(params) - set(_SPEECH_PARAMS))
        if (unknown or not isinstance(sentences, list) or not sentences
                or not all(isinstance(text, str) and text for text in sentences)
                or not isinstance(voice, str) or not voice
                or isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4):
            raise InstanceError('unsupported_option', f'Expected speech params sentences (non-empty strings), voice '
                                                      f'and speed (0.25 to 4): got {params!r}')
        if request.resource is not None:
            self._use_resource(request.resource)
        return self._synthesize(request, sentences, voice, float(speed))

    def _synthesize(self, request: StreamRequest, sentences: List[str], voice: str,
                    speed: float) -> Generator[StreamPiece, None, Dict[str, Any]]:
        rate = self._options['speechSampleRateHz'] or SPEECH_DEFAULT_RATE_HZ
        delay_s = self._options['speechChunkDelayMs'] / 1000
        fail_after = self._options['speechFailAfterChunks']
        frequency_hz = 120 + zlib.crc32(voice.encode('utf-8')) % 240
        chunk_frames = rate * SPEECH_CHUNK_MS // 1000
        chunks, frames_sent = 0, 0
        for index, text in enumerate(sentences):
            frames = int(rate * (SPEECH_BASE_MS + SPEECH_MS_PER_CHARACTER * len(text)) / 1000 / speed)
            tone = speech_tone(frames, rate, frequency_hz)
            for start in range(0, frames, chunk_frames):
                if fail_after is not None and chunks >= fail_after:
                    raise RuntimeError('The test adapter was asked to fail this stream (speechFailAfterChunks)')
                if request.cancelled.wait(delay_s) if delay_s > 0 else request.cancelled.is_set():
                    return {'characters': sum(len(t) for t in sentences), 'sentences': index,
                            'audioSeconds': frames_sent / rate}
                piece = tone[start:start + chunk_frames]
                frames_sent += piece.shape[0]
                chunks += 1
                yield StreamPiece({'sampleRate': rate, 'sentence': index}, piece.astype('<i2').tobytes())
        return {'characters': sum(len(t) for t in sentences), 'sentences': len(sentences),
                'audioSeconds': frames_sent / rate}

    # -- resources -------------------------------------------------------------------------

    def load_resource(self, name: str, kind: str, source: Dict[str, Any]) -> ResourceLoad:
        unknown = sorted(set(source) - {'bytes', 'loadDelayMs'})
        size, delay_ms = source.get('bytes', 0), source.get('loadDelayMs', 0)
        if unknown or not _is_count(size) or not _is_count(delay_ms):
            raise InstanceError('unsupported_option', f'Expected a resource source {{bytes, loadDelayMs}} of '
                                                      f'non-negative integers: got {source!r}')
        with self._resources_lock:
            held = self._resources.get(name)
            if held is not None:
                self._resources.move_to_end(name)
                self._counts.hits += 1
                return ResourceLoad('device', held.bytes, 'resident', 0)
        if not source:
            size = self._voice_bytes(name)
        budget = self._options.get('resourceBudgetBytes')
        if budget is not None and size > budget:
            raise InstanceError('out_of_memory', f'Expected a resource of at most resourceBudgetBytes ({budget}): '
                                                 f"'{name}' has {size} bytes")
        started = time.monotonic()
        if delay_ms > 0:
            time.sleep(delay_ms / 1000)
        load_ms = (time.monotonic() - started) * 1000
        with self._resources_lock:
            self._resources[name] = _Resource(kind, size)
            self._counts.loads += 1
            self._counts.load_ms += load_ms
            if budget is not None:
                while sum(r.bytes for r in self._resources.values()) > budget:
                    oldest = next(iter(self._resources))
                    del self._resources[oldest]
                    self._counts.evictions += 1
        return ResourceLoad('device', size, 'disk', int(load_ms))

    def _voice_bytes(self, name: str) -> int:
        """The size of a catalogue voice asked for by name; resource_not_found for any other name."""
        names = [voice if isinstance(voice, str) else voice.get('name') for voice in self._options['voices']]
        if name not in names:
            raise InstanceError('resource_not_found', f"Expected a voice of the catalogue "
                                                      f"({', '.join(map(str, names)) or 'empty'}): got '{name}'")
        return int(self._options['voiceBytes'])

    def evict_resource(self, name: str) -> int:
        with self._resources_lock:
            held = self._resources.pop(name, None)
            if held is None:
                return 0
            self._counts.evictions += 1
            return held.bytes

    def resources(self) -> List[ResourceInfo]:
        with self._resources_lock:
            return [ResourceInfo(name, held.kind, 'device', held.bytes) for name, held in self._resources.items()]

    def resource_counts(self) -> ResourceCounts:
        with self._resources_lock:
            return replace(self._counts)

    def resource_counters(self) -> Dict[str, float]:
        with self._resources_lock:
            counts = self._counts
            resident = sum(resource.bytes for resource in self._resources.values())
            return {'hits': counts.hits, 'misses': counts.loads, 'loadsFromDisk': counts.loads, 'loadsFromHost': 0,
                    'evictions': counts.evictions, 'diskLoadMs': round(counts.load_ms, 3), 'hostLoadMs': 0,
                    'budgetBytes': self._options.get('resourceBudgetBytes') or 0, 'residentBytes': resident}

    def _use_resource(self, name: str) -> None:
        with self._resources_lock:
            held = self._resources.get(name)
            if held is None:
                raise InstanceError('resource_not_found', f"Expected resource '{name}' to be resident: it is not")
            if held.is_fresh:
                held.is_fresh = False
            else:
                self._counts.hits += 1
            self._resources.move_to_end(name)


def speech_tone(frames: int, rate: int, frequency_hz: float) -> NDArray[np.int16]:
    """A tone of ``frames`` samples with 10 ms fades at both ends (a test voice's sentence)."""
    t = np.arange(frames, dtype=np.float64) / rate
    wave = 0.3 * np.sin(2 * np.pi * frequency_hz * t) + 0.1 * np.sin(2 * np.pi * 2.5 * frequency_hz * t)
    fade = min(frames // 2, rate // 100)
    if fade > 0:
        ramp = np.linspace(0.0, 1.0, fade)
        wave[:fade] *= ramp
        wave[frames - fade:] *= ramp[::-1]
    out: NDArray[np.int16] = np.round(wave * 32767).astype(np.int16)
    return out


def _turn(turn: List[float]) -> Dict[str, Any]:
    return {'start': round(turn[0], 3), 'end': round(turn[1], 3), 'speaker': int(turn[2])}


def _is_regions(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(region, list) and len(region) == 2
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in region) and region[0] <= region[1]
        for region in value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_options(options: Dict[str, Any]) -> Dict[str, Any]:
    parsed: Dict[str, Any] = {
        'mode': 'echo', 'batchDelayMs': None, 'itemDelayMs': 0, 'finishDelayMs': 0, 'stageDelayMs': 0, 'loadDelayMs': 0,
        'probeDelayMs': 0, 'resourceBudgetBytes': None, 'voiceBytes': DEFAULT_VOICE_BYTES, 'voices': [],
        'speechSampleRateHz': 0, 'speechChunkDelayMs': 0, 'speechFailAfterChunks': None,
        'crashAfterBatches': None, 'crashOnLoad': False, 'failLoad': False, 'wedgeProbe': False,
    }
    for key, value in options.items():
        if key == 'voices':
            if not isinstance(value, list) or not all(isinstance(voice, (str, dict)) for voice in value):
                raise InstanceError('load_failed', f'Expected option voices to be a list of names or catalogue '
                                                   f'entries: got {value!r}')
        elif key == 'mode':
            if value not in ('echo', 'slow'):
                raise InstanceError('load_failed', f"Expected option mode to be 'echo' or 'slow': got {value!r}")
        elif key in _INT_OPTIONS:
            if not _is_count(value):
                raise InstanceError('load_failed', f'Expected option {key} to be a non-negative integer: got {value!r}')
        elif key in _BOOL_OPTIONS:
            if not isinstance(value, bool):
                raise InstanceError('load_failed', f'Expected option {key} to be a boolean: got {value!r}')
        else:
            known = ', '.join(['mode', 'voices', *_INT_OPTIONS, *_BOOL_OPTIONS])
            raise InstanceError('load_failed', f'Expected an option of the test adapter ({known}): got {key!r}')
        parsed[key] = value
    if parsed['batchDelayMs'] is None:
        parsed['batchDelayMs'] = SLOW_BATCH_DELAY_MS if parsed['mode'] == 'slow' else 0
    return parsed
