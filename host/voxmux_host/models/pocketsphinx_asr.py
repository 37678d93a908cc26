"""The ``pocketsphinx`` adapter: CPU speech recognition with Debian's US English model.

Zero-download default ASR: it needs only the Debian packages python3-pocketsphinx and
pocketsphinx-en-us. Its accuracy is far below a neural model's; it exists so that a fresh
machine serves real transcripts offline.

Load options (all optional): ``hmmPath`` (acoustic model directory), ``lmPath`` (language
model), ``dictPath`` (pronunciation dictionary). Defaults are the Debian model's files.
"""
from __future__ import annotations

import os
import zlib
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray

from ..errors import InstanceError
from ..model_api import (
    AdapterStats,
    BatchInput,
    BatchOutput,
    ItemFailure,
    LoadContext,
    LoadInfo,
    Segment,
    SimpleBatchAdapter,
    Transcript,
    WarmupInfo,
    Word,
    seconds,
)

MODEL_DIR = '/usr/share/pocketsphinx/model/en-us'
DEFAULT_HMM_PATH = os.path.join(MODEL_DIR, 'en-us')
DEFAULT_LM_PATH = os.path.join(MODEL_DIR, 'en-us.lm.bin')
DEFAULT_DICT_PATH = os.path.join(MODEL_DIR, 'cmudict-en-us.dict')
SAMPLE_RATE_HZ = 16000
LANGUAGE = 'en'
SEGMENT_PAUSE_S = 0.5  # a pause longer than this between two words starts a new segment

_ALTERNATE_SUFFIX = re.compile(r'\(\d+\)$')  # "read(2)": the second pronunciation of "read"


@dataclass(frozen=True)
class _TimedWord:
    word: str
    start_s: float
    end_s: float


def is_filler(word: str) -> bool:
    """Sentence markers, silence and noise tokens: <s>, </s>, <sil>, [NOISE], [SPEECH], ++BREATH++."""
    return word.startswith('<') or word.startswith('[') or word.startswith('+')


def clean_word(word: str) -> str:
    return _ALTERNATE_SUFFIX.sub('', word)


def to_pcm16(audio: NDArray[np.int16]) -> bytes:
    """The decoder's input: the request's 16-bit PCM, digital silence dithered by one bit with a
    seed taken from the audio itself.

    Without its voice-activity filter the decoder hears words in digital silence (all-zero
    frames); the dither prevents that. Seeding it from the samples makes a transcript depend on
    its input alone, not on which requests the instance decoded before (the decoder's own
    -dither keeps one random stream across utterances).
    """
    pcm = np.ascontiguousarray(audio, dtype='<i2')
    rng = np.random.default_rng(zlib.crc32(pcm.tobytes()))
    # Only exact zeros are dithered: digital silence is what misleads the decoder, and real
    # signal is left as it is. A zero becomes -1, 0 or 1, so the result stays in range.
    silent = pcm == 0
    dithered = pcm.copy()  # the request's audio is a view of the batch body: never written
    dithered[silent] = rng.integers(-1, 2, size=int(silent.sum()), dtype=np.int16)
    return dithered.tobytes()


def split_segments(words: Sequence[_TimedWord], pause_s: float = SEGMENT_PAUSE_S) -> List[Segment]:
    segments: List[Segment] = []
    current: List[_TimedWord] = []
    for word in words:
        if current and word.start_s - current[-1].end_s > pause_s:
            segments.append(_segment(current))
            current = []
        current.append(word)
    if current:
        segments.append(_segment(current))
    return segments


def _segment(words: Sequence[_TimedWord]) -> Segment:
    return Segment(seconds(words[0].start_s), seconds(words[-1].end_s), ' '.join(w.word for w in words), None)


class PocketsphinxAdapter(SimpleBatchAdapter):
    """A batch adapter: one request after another, on the host's main thread."""

    work_kinds: ClassVar[Tuple[str, ...]] = ('batch',)

    def __init__(self) -> None:
        self._decoder: Any = None
        self._frame_s = 0.01
        self._batches_run = 0

    def load(self, ctx: LoadContext) -> LoadInfo:
        paths = _parse_options(ctx.options)
        try:
            from pocketsphinx.pocketsphinx import Decoder
        except ImportError as err:
            raise InstanceError('load_failed', f'Cannot import pocketsphinx: {err}') from err
        config = Decoder.default_config()
        config.set_string('-hmm', paths['hmmPath'])
        config.set_string('-lm', paths['lmPath'])
        config.set_string('-dict', paths['dictPath'])
        config.set_string('-logfn', os.devnull)
        # Keep silent frames in the decoder's frame count; otherwise word times drift after pauses.
        config.set_boolean('-remove_silence', False)
        # Dither is added per request in to_pcm16, seeded by the audio, so results repeat.
        config.set_boolean('-dither', False)
        try:
            self._decoder = Decoder(config)
        except RuntimeError as err:
            raise InstanceError('load_failed', f'pocketsphinx could not load its model: {err}') from err
        frames_per_s = config.get_int('-frate') or 100
        self._frame_s = 1.0 / frames_per_s
        return LoadInfo(device='cpu', parameters=0, memory_bytes=0)

    def warmup(self) -> WarmupInfo:
        # One short decode touches the model's pages, so the first request does not pay for it.
        self._decode(np.zeros(SAMPLE_RATE_HZ // 10, dtype=np.int16))
        return WarmupInfo(graphs_captured=0)

    def run(self, inputs: Sequence[BatchInput]) -> List[BatchOutput]:
        results = [self._run_one(request) for request in inputs]
        self._batches_run += 1
        return results

    def _run_one(self, request: BatchInput) -> BatchOutput:
        if request.language is not None and request.language != LANGUAGE:
            return ItemFailure('unsupported_option', f"Expected language '{LANGUAGE}' or none: got '{request.language}'")
        if request.audio.ndim != 1 or request.audio.dtype != np.int16:
            return ItemFailure('invalid_audio', f'Expected mono 16-bit PCM (a 1-D int16 array): got {request.audio.dtype} '
                                                f'of shape {request.audio.shape}')
        words = self._decode(request.audio) if request.audio.size else []
        return Transcript(
            text=' '.join(w.word for w in words),
            language=LANGUAGE,
            duration_s=seconds(request.audio.shape[0] / SAMPLE_RATE_HZ),
            segments=tuple(split_segments(words)),
            words=tuple(Word(w.word, seconds(w.start_s), seconds(w.end_s)) for w in words)
            if request.word_timestamps else None,
        )

    def _decode(self, audio: NDArray[np.int16]) -> List[_TimedWord]:
        if self._decoder is None:
            raise InstanceError('model_failed', 'Expected a loaded model: got none')
        decoder = self._decoder
        # A new stream per request: within a stream the decoder carries its noise-level and
        # cepstral-mean estimates from one utterance to the next, so the same audio would
        # transcribe differently depending on the requests decoded before it.
        decoder.start_stream()
        decoder.start_utt()
        decoder.process_raw(to_pcm16(audio), False, True)
        decoder.end_utt()
        if decoder.hyp() is None:
            return []
        words: List[_TimedWord] = []
        for seg in decoder.seg():
            if is_filler(seg.word):
                continue
            # Frame indices are inclusive: a word on frames 16..26 ends where frame 27 starts.
            words.append(_TimedWord(clean_word(seg.word), seg.start_frame * self._frame_s,
                                    (seg.end_frame + 1) * self._frame_s))
        return words

    def stats(self) -> AdapterStats:
        return AdapterStats(memory_bytes=0, eager_batches=self._batches_run, graph_replays=0)

    def probe(self) -> bool:
        return True  # a CPU decoder has no device that can wedge

    def close(self) -> None:
        self._decoder = None


def _parse_options(options: Dict[str, Any]) -> Dict[str, str]:
    expected: Tuple[Tuple[str, str, bool], ...] = (
        ('hmmPath', DEFAULT_HMM_PATH, True),
        ('lmPath', DEFAULT_LM_PATH, False),
        ('dictPath', DEFAULT_DICT_PATH, False),
    )
    unknown = [key for key in options if key not in {name for name, _, _ in expected}]
    if unknown:
        raise InstanceError('load_failed',
                            f'Expected options of the pocketsphinx adapter (hmmPath, lmPath, dictPath): got {unknown}')
    paths: Dict[str, str] = {}
    for name, default, is_dir in expected:
        value: Optional[Any] = options.get(name, default)
        if not isinstance(value, str):
            raise InstanceError('load_failed', f'Expected option {name} to be a path string: got {value!r}')
        exists = os.path.isdir(value) if is_dir else os.path.isfile(value)
        if not exists:
            kind = 'directory' if is_dir else 'file'
            raise InstanceError('load_failed', f'Expected option {name} to name an existing {kind}: got {value!r}')
        paths[name] = value
    return paths
