"""The ``debian-voices`` adapter: speech synthesis (work kind ``stream``) with the CPU voices of Debian 12
main: flite (slt, rms, awb, kal16, kal), Festival (HTS slt, kal and ked diphones) and eSpeak NG (English
accents x variants). The voice ids are in catalogue.py; docs/adapters.md is the reference.

``StartStream.params``: ``sentences`` (the text, already split by the gateway: a non-empty list of
non-empty strings), ``voice`` (a voice id of the catalogue) and ``speed`` (0.25-4.0, default 1). Any
other key, or a value out of range, ends the stream with ``unsupported_option``; so does a voice that
is not in the catalogue or that the ``voices`` option left out. The stream's resource is unused.

Each sentence is synthesized when the previous one has been sent (one longer than ``MAX_PART_CHARS`` in
parts, cut between words), and its audio goes out at once, in chunks of at most one second: mono signed 16-bit little-endian PCM at the voice's native rate, with
meta ``{"sampleRate", "sentence"}`` (the index into ``sentences``). The usage at the end is
``{"characters", "sentences", "audioSeconds"}``. A cancel is checked before every sentence and chunk.
A sentence the engine fails on ends the stream with ``model_failed``; the instance goes on.

Load options (unknown keys fail the load with ``load_failed``): ``voices``, a list of voice ids or id
prefixes to serve (default: all). Every engine with a voice to serve is checked at load: a missing
library, program or voice file fails the load with ``load_failed`` naming it and its Debian package.
"""
from __future__ import annotations

import math
from typing import Any, ClassVar, Dict, Generator, Iterator, List, Sequence, Tuple

from ...errors import InstanceError
from ...model_api import AdapterStats, LoadContext, LoadInfo, StreamPiece, StreamRequest, WarmupInfo, seconds
from .catalogue import ENGINES, Voice, select_voices
from .engine import Audio, Engine
from .espeak import EspeakEngine
from .festival import FestivalEngine
from .flite import FliteEngine

OPTIONS: Tuple[str, ...] = ('voices',)
PARAMS: Tuple[str, ...] = ('sentences', 'voice', 'speed')
MIN_SPEED = 0.25
MAX_SPEED = 4.0
#: The longest chunk: one second of audio keeps a chunk within the stream's credit window and a cancel
#: within one chunk of the audio already sent.
CHUNK_SECONDS = 1.0
#: The longest text one engine call says. The gateway splits text into sentences and long sentences into
#: clauses, but a clause without punctuation can be as long as the input: 4,000 characters took flite
#: 6.7 s in one call (the host's main thread blocked all that time) and Festival's HTS voice more than a
#: minute. 200 characters are 10-15 s of speech and at most a few hundred ms of synthesis.
MAX_PART_CHARS = 200


def text_parts(text: str, max_chars: int = MAX_PART_CHARS) -> List[str]:
    """``text`` in parts of at most ``max_chars``, cut at the last space before the limit (mid-word only
    where a word is longer than the limit); whitespace-only parts are dropped."""
    parts: List[str] = []
    rest = text.strip()
    while len(rest) > max_chars:
        cut = rest.rfind(' ', 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars
        parts.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        parts.append(rest)
    return [part for part in parts if part]


def chunks(audio: Audio, chunk_seconds: float = CHUNK_SECONDS) -> List[bytes]:
    """The audio in pieces of at most ``chunk_seconds``, whole samples each (none for no audio)."""
    step = max(1, int(audio.sample_rate * chunk_seconds)) * 2
    return [audio.pcm[at:at + step] for at in range(0, len(audio.pcm), step)]


def _parse_params(params: Dict[str, Any]) -> Tuple[List[str], str, float]:
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise InstanceError('unsupported_option', f'Expected stream params {", ".join(PARAMS)}: got '
                                                  f'{", ".join(unknown)}')
    sentences = params.get('sentences')
    if (not isinstance(sentences, list) or not sentences
            or not all(isinstance(s, str) and s.strip() for s in sentences)):
        raise InstanceError('unsupported_option', f'Expected param sentences to be a non-empty list of non-empty '
                                                  f'strings: got {sentences!r}')
    voice = params.get('voice')
    if not isinstance(voice, str):
        raise InstanceError('unsupported_option', f'Expected param voice to be a voice id: got {voice!r}')
    speed = params.get('speed', 1.0)
    if (isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed)
            or not MIN_SPEED <= speed <= MAX_SPEED):
        raise InstanceError('unsupported_option', f'Expected param speed to be a number from {MIN_SPEED} to '
                                                  f'{MAX_SPEED}: got {speed!r}')
    return sentences, voice, float(speed)


class DebianVoicesAdapter:
    work_kinds: ClassVar[Tuple[str, ...]] = ('stream',)

    def __init__(self) -> None:
        self._voices: Dict[str, Voice] = {}
        self._engines: Dict[str, Engine] = {}

    # -- common ----------------------------------------------------------------------------------

    def load(self, ctx: LoadContext) -> LoadInfo:
        unknown = sorted(set(ctx.options) - set(OPTIONS))
        if unknown:
            raise InstanceError('load_failed', f'Expected options of the debian-voices adapter ({", ".join(OPTIONS)}): '
                                               f'got {", ".join(unknown)}')
        voices = select_voices(ctx.options.get('voices'))
        engines: Dict[str, Engine] = {}
        try:
            for name in ENGINES:
                served = [voice for voice in voices if voice.engine == name]
                if served:
                    engine = _create_engine(name)
                    engines[name] = engine  # closed below if a later engine fails
                    engine.load(served)
        except BaseException:
            for engine in engines.values():
                engine.close()
            raise
        self._engines = engines
        self._voices = {voice.name: voice for voice in voices}
        return LoadInfo(device='cpu', parameters=0, memory_bytes=0)

    def warmup(self) -> WarmupInfo:
        for engine in self._engines.values():
            engine.warmup()
        return WarmupInfo(graphs_captured=0)

    def catalog(self) -> List[Dict[str, Any]]:
        """Every voice this instance serves (after the ``voices`` option), in catalogue order."""
        return [voice.entry() for voice in self._voices.values()]

    def stats(self) -> AdapterStats:
        return AdapterStats(memory_bytes=0, eager_batches=0, graph_replays=0)

    def probe(self) -> bool:
        return True  # CPU engines: nothing can wedge a device; a dead festival restarts at its next sentence

    def close(self) -> None:
        engines, self._engines = self._engines, {}
        for engine in engines.values():
            engine.close()

    # -- stream ----------------------------------------------------------------------------------

    def open_stream(self, request: StreamRequest) -> Iterator[StreamPiece]:
        sentences, voice_name, speed = _parse_params(request.params)
        voice = self._voices.get(voice_name)
        if voice is None:
            raise InstanceError('unsupported_option', f'Expected param voice to be a voice of this model (see its '
                                                      f'catalogue, {len(self._voices)} voices): got {voice_name!r}')
        return self._stream(request, self._engines[voice.engine], voice, sentences, speed)

    def _stream(self, request: StreamRequest, engine: Engine, voice: Voice, sentences: Sequence[str],
                speed: float) -> Generator[StreamPiece, None, Dict[str, Any]]:
        characters, done, audio_seconds = 0, 0, 0.0

        def usage() -> Dict[str, Any]:
            return {'characters': characters, 'sentences': done, 'audioSeconds': seconds(audio_seconds)}

        for index, sentence in enumerate(sentences):
            parts = text_parts(sentence)
            for part_index, part in enumerate(parts):
                if request.cancelled.is_set():
                    return usage()
                audio = engine.synthesize(voice, part, speed, request.cancelled)
                if audio is None:  # cancelled while it ran
                    return usage()
                audio_seconds += audio.seconds
                if part_index == len(parts) - 1:  # the usage counts a sentence once it is synthesized
                    characters += len(sentence)
                    done += 1
                for piece in chunks(audio):
                    if request.cancelled.is_set():
                        return usage()
                    yield StreamPiece({'sampleRate': audio.sample_rate, 'sentence': index}, piece)
        return usage()


def _create_engine(name: str) -> Engine:
    if name == 'flite':
        return FliteEngine()
    if name == 'festival':
        return FestivalEngine()
    if name == 'espeak':
        return EspeakEngine()
    raise ValueError(f'Expected an engine of {ENGINES}: got {name!r}')
