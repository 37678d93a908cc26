"""eSpeak NG voices through the ``espeak-ng`` program, one process per sentence.

Why the program and not libespeak-ng in process (which would save the ~25 ms of starting it): the
library keeps its synthesizer's state from one call to the next (flutter and noise phases, the echo
buffer), so in one process the same sentence came out different each time it was said, and each
stream's audio would depend on what other streams said before it. A fresh process says a sentence
the same way every time, and the same as the program does on the command line. Reseeding libc's
rand() (as flite.py does) and re-initializing the library did not help: the state is in the
library's statics, and ``espeak_Terminate`` followed by ``espeak_Initialize`` hung.

Speeds below espeak-ng's slowest rate (80 words per minute, speed 0.46) are said at that rate and
stretched the rest of the way by ffmpeg's ``atempo`` filter, which keeps the pitch: ``rate_and_tempo``
splits a speed between the two. espeak-ng has no slower rate of its own: ``-s`` and SSML
``<prosody rate>`` both stop at 80 words per minute, and a word gap (``-g``) lengthens only the pauses
between words.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from typing import List, Optional, Sequence, Tuple

from ...errors import InstanceError
from ..speech_text import without_control_characters
from .catalogue import ESPEAK_SAMPLE_RATE_HZ, Voice
from .engine import Audio

PROGRAM = 'espeak-ng'
PACKAGE = 'espeak-ng'
DATA_DIR = '/usr/lib/x86_64-linux-gnu/espeak-ng-data'
SENTENCE_TIMEOUT_S = 30.0
STDERR_TAIL_CHARS = 300
#: The time stretch for speeds below MIN_WPM, and how often a stretch checks for a cancel.
STRETCHER = 'ffmpeg'
STRETCHER_PACKAGE = 'ffmpeg'
CANCEL_POLL_S = 0.02
#: The smallest factor one ffmpeg ``atempo`` filter takes (0.5-100); smaller factors chain filters.
MIN_ATEMPO = 0.5

#: Words per minute at speed 1 (espeak-ng's default) and the range it accepts: slower than 80 is spoken at
#: 80; up to 1,000 it speeds up (past 450 with its sonic speed-up).
DEFAULT_WPM = 175
MIN_WPM = 80
MAX_WPM = 1000


def rate_and_tempo(speed: float) -> Tuple[int, float]:
    """(words per minute for espeak-ng's ``-s``, tempo factor of the time stretch after it) for ``speed``.
    espeak-ng says every speed it can (80-1,000 words per minute) itself, with tempo 1 (no stretch); a speed
    below 80 words per minute (0.46) is said at 80 and stretched by tempo = 175 x speed / 80 (0.55 at 0.25)."""
    wanted = DEFAULT_WPM * speed
    if wanted < MIN_WPM:
        return MIN_WPM, wanted / MIN_WPM
    return min(MAX_WPM, round(wanted)), 1.0


def atempo_filter(tempo: float) -> str:
    """ffmpeg's audio filter for ``tempo`` (0 < tempo <= 1): one ``atempo``, or a chain of them where one
    filter cannot go that low (each takes 0.5 at least)."""
    factors: List[float] = []
    rest = tempo
    while rest < MIN_ATEMPO:
        factors.append(MIN_ATEMPO)
        rest /= MIN_ATEMPO
    factors.append(rest)
    return ','.join(f'atempo={factor:.6g}' for factor in factors)


def data_dir() -> str:
    """espeak-ng's data directory: the multiarch path of Debian's espeak-ng-data, else the first one found."""
    for candidate in (DATA_DIR, '/usr/lib/espeak-ng-data', '/usr/share/espeak-ng-data'):
        if os.path.isdir(candidate):
            return candidate
    return DATA_DIR


def wav_pcm(data: bytes) -> Tuple[int, bytes]:
    """(sample rate, PCM) of a RIFF/WAVE stream of mono 16-bit PCM. espeak-ng writes its header before it knows
    the length (sizes 0x7ffff0xx): the data chunk is taken as everything after its header."""
    if len(data) < 12 or data[:4] != b'RIFF' or data[8:12] != b'WAVE':
        raise InstanceError('model_failed', f'Expected a WAV stream from espeak-ng: got {len(data)} bytes')
    at, rate = 12, 0
    while at + 8 <= len(data):
        chunk, size = data[at:at + 4], struct.unpack_from('<I', data, at + 4)[0]
        if chunk == b'fmt ':
            audio_format, channels, rate = struct.unpack_from('<HHI', data, at + 8)
            bits = struct.unpack_from('<H', data, at + 22)[0]
            if (audio_format, channels, bits) != (1, 1, 16):
                raise InstanceError('model_failed', f'Expected mono 16-bit PCM from espeak-ng: got format '
                                                    f'{audio_format}, {channels} channels, {bits} bits')
        elif chunk == b'data':
            if rate == 0:
                break
            pcm = data[at + 8:]
            return rate, pcm[:len(pcm) - len(pcm) % 2]
        at += 8 + size + size % 2
    raise InstanceError('model_failed', 'Expected fmt and data chunks in the WAV stream of espeak-ng')


class EspeakEngine:
    def __init__(self, program: str = PROGRAM, stretcher: str = STRETCHER,
                 sentence_timeout_s: float = SENTENCE_TIMEOUT_S) -> None:
        self._program = program
        self._stretcher = stretcher
        self._sentence_timeout_s = sentence_timeout_s
        self._path: Optional[str] = None

    def load(self, voices: Sequence[Voice]) -> None:
        missing: List[str] = []
        path = shutil.which(self._program)
        if path is None:
            missing.append(f'the program {self._program!r} (Debian package {PACKAGE})')
        data = data_dir()
        for voice in voices:
            voice_file, _, variant = voice.engine_voice.partition('+')
            files = [os.path.join(data, 'lang', voice_file)]
            if variant:
                files.append(os.path.join(data, 'voices', '!v', variant))
            missing += [f'{file} for {voice.name} (Debian package espeak-ng-data)'
                        for file in files if not os.path.isfile(file)]
        if missing:
            raise InstanceError('load_failed', f'The espeak voices need {"; ".join(missing)}: not found')
        self._path = path

    def warmup(self) -> None:
        pass  # each sentence is a fresh process: nothing stays warm

    def synthesize(self, voice: Voice, text: str, speed: float, cancelled: threading.Event) -> Optional[Audio]:
        # A sentence takes 20-40 ms, start-up included: it runs to the end, and the caller checks the cancel.
        # The stretch of a speed below 0.46 (150-250 ms more, ffmpeg's start included) stops at a cancel.
        if self._path is None:
            raise InstanceError('model_failed', 'Expected the espeak engine to be loaded: it is not')
        wpm, tempo = rate_and_tempo(speed)
        stretcher: Optional[str] = None
        if tempo < 1:  # checked before espeak-ng runs: without ffmpeg, the sentence fails at once
            stretcher = shutil.which(self._stretcher)
            if stretcher is None:
                raise InstanceError('model_failed', f'Speeds below {MIN_WPM / DEFAULT_WPM:.2f} with the espeak voices '
                                                    f'need the program {self._stretcher!r} (Debian package '
                                                    f'{STRETCHER_PACKAGE}): not found')
        # The text goes on stdin (-b 1: UTF-8), so that a sentence starting with '-' is not read as an option.
        argv = [self._path, '--stdout', '-b', '1', '-v', voice.engine_voice, '-s', str(wpm)]
        try:
            done = subprocess.run(argv, input=without_control_characters(text).encode('utf-8'), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  timeout=self._sentence_timeout_s, check=False)
        except subprocess.TimeoutExpired as err:
            raise InstanceError('model_failed', f'espeak-ng did not finish a sentence within '
                                                f'{self._sentence_timeout_s:g} s') from err
        except OSError as err:
            raise InstanceError('model_failed', f'espeak-ng could not be started: {err}') from err
        if done.returncode != 0 or not done.stdout:
            stderr = done.stderr.decode('utf-8', 'replace').strip()[-STDERR_TAIL_CHARS:]
            raise InstanceError('model_failed', f'espeak-ng failed with {voice.name} (exit {done.returncode}): '
                                                f'{stderr or "no audio"}')
        rate, pcm = wav_pcm(done.stdout)
        if rate != ESPEAK_SAMPLE_RATE_HZ:
            raise InstanceError('model_failed', f'Expected espeak-ng audio at {ESPEAK_SAMPLE_RATE_HZ} Hz: got {rate}')
        if stretcher is None or not pcm:
            return Audio(rate, pcm)
        stretched = self._stretch(stretcher, rate, pcm, tempo, cancelled)
        return None if stretched is None else Audio(rate, stretched)

    def _stretch(self, stretcher: str, rate: int, pcm: bytes, tempo: float,
                 cancelled: threading.Event) -> Optional[bytes]:
        """``pcm`` played at ``tempo`` with its pitch kept (ffmpeg's ``atempo``, raw 16-bit PCM in and out);
        None once ``cancelled`` is set, the ffmpeg process killed."""
        raw = ['-f', 's16le', '-ar', str(rate), '-ac', '1']
        argv = [stretcher, '-hide_banner', '-loglevel', 'error', *raw, '-i', 'pipe:0',
                '-filter:a', atempo_filter(tempo), *raw, '-c:a', 'pcm_s16le', 'pipe:1']
        # The input comes from a file, not a pipe: communicate() is retried to check for the cancel, and a
        # retried communicate() does not go on writing its input.
        with tempfile.TemporaryFile() as source:
            source.write(pcm)
            source.seek(0)
            try:
                process = subprocess.Popen(argv, stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as err:
                raise InstanceError('model_failed', f'{self._stretcher} could not be started: {err}') from err
        deadline = time.monotonic() + self._sentence_timeout_s
        try:
            while True:
                try:
                    stdout, stderr = process.communicate(timeout=CANCEL_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancelled.is_set():
                        return None
                    if time.monotonic() >= deadline:
                        raise InstanceError('model_failed', f'{self._stretcher} did not stretch a sentence within '
                                                            f'{self._sentence_timeout_s:g} s') from None
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        if process.returncode != 0 or not stdout:
            tail = stderr.decode('utf-8', 'replace').strip()[-STDERR_TAIL_CHARS:]
            raise InstanceError('model_failed', f'{self._stretcher} failed to stretch a sentence (exit '
                                                f'{process.returncode}): {tail or "no audio"}')
        return stdout[:len(stdout) - len(stdout) % 2]

    def close(self) -> None:
        self._path = None
