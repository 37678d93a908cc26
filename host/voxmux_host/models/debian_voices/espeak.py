"""eSpeak NG voices in process, through ctypes on Debian's libespeak-ng1 and its synth callback.

Why the library and not the ``espeak-ng`` program: a sentence synthesizes in a few milliseconds, less
than spawning the program would take, and the callback lets a cancel stop a sentence at the next
callback (``espeak_Initialize``'s buffer length, 100 ms of audio). The callback's pieces are gathered
per sentence, not yielded one by one: the library's state is one per process (voice, rate, output),
so one sentence must finish before another stream's sentence may start, and the whole sentence is
ready a few milliseconds after its first piece anyway.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, List, Optional, Sequence

from ...errors import InstanceError
from .catalogue import ESPEAK_SAMPLE_RATE_HZ, Voice
from .engine import Audio, little_endian

LIBRARY = 'libespeak-ng.so.1'
PACKAGES = 'libespeak-ng1, espeak-ng-data'

# espeak_ng's speak_lib.h
AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_DONT_EXIT = 0x8000  # report a missing data directory instead of calling exit()
CHARS_UTF8 = 1
END_PAUSE = 0x1000  # a pause after the text, as the espeak-ng program adds: sentences do not run together
POS_CHARACTER = 1
PARAM_RATE = 1
EE_OK = 0
CALLBACK_BUFFER_MS = 100

#: Words per minute at speed 1 (espeak-ng's default) and the range the library accepts: slower than
#: 80 is spoken at 80; up to 1,000 it speeds up (past 450 with its sonic speed-up).
DEFAULT_WPM = 175
MIN_WPM = 80
MAX_WPM = 1000

_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)

# NOTE: libespeak-ng holds one synthesizer per process, initialized once; every engine object of the
# process shares it (tests load several adapters in one process).
_library_lock = threading.Lock()
_library: Optional[ctypes.CDLL] = None
_data_path: str = ''


def words_per_minute(speed: float) -> int:
    return max(MIN_WPM, min(MAX_WPM, round(DEFAULT_WPM * speed)))


def _open_library() -> ctypes.CDLL:
    global _library, _data_path
    with _library_lock:
        if _library is not None:
            return _library
        try:
            library = ctypes.CDLL(LIBRARY)
        except OSError as err:
            raise InstanceError('load_failed', f'The espeak voices need the shared library {LIBRARY} (Debian '
                                               f'packages {PACKAGES}): {err}') from err
        library.espeak_Initialize.restype = ctypes.c_int
        library.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        library.espeak_Info.restype = ctypes.c_char_p
        library.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        library.espeak_SetSynthCallback.restype = None
        library.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        library.espeak_SetVoiceByName.restype = ctypes.c_int
        library.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        library.espeak_SetParameter.restype = ctypes.c_int
        library.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        library.espeak_Synth.restype = ctypes.c_int
        library.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                         ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        rate = library.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, CALLBACK_BUFFER_MS, None, INITIALIZE_DONT_EXIT)
        if rate != ESPEAK_SAMPLE_RATE_HZ:
            raise InstanceError('load_failed', f'Expected espeak-ng to start at {ESPEAK_SAMPLE_RATE_HZ} Hz: it answered '
                                               f'{rate} (is the Debian package espeak-ng-data installed?)')
        path = ctypes.c_char_p()
        library.espeak_Info(ctypes.byref(path))
        _data_path = (path.value or b'').decode('utf-8', 'replace')
        _library = library
        return library


class EspeakEngine:
    def __init__(self) -> None:
        self._library: Optional[ctypes.CDLL] = None
        self._pieces: List[bytes] = []
        self._cancelled: Optional[threading.Event] = None
        self._callback = _SynthCallback(self._on_audio)  # kept: the library holds only its address

    def load(self, voices: Sequence[Voice]) -> None:
        library = _open_library()
        missing: List[str] = []
        for voice in voices:
            voice_file, _, variant = voice.engine_voice.partition('+')
            paths = [os.path.join(_data_path, 'lang', voice_file)]
            if variant:
                paths.append(os.path.join(_data_path, 'voices', '!v', variant))
            missing += [f'{voice.name} ({path})' for path in paths if not os.path.isfile(path)]
        if missing:
            raise InstanceError('load_failed', f'The espeak voices need their voice files (Debian package '
                                               f'espeak-ng-data): missing for {", ".join(missing)}')
        self._library = library

    def warmup(self) -> None:
        pass  # nothing to touch: the library loads a voice's files when it is selected, in microseconds

    def synthesize(self, voice: Voice, text: str, speed: float, cancelled: threading.Event) -> Optional[Audio]:
        library = self._library
        if library is None:
            raise InstanceError('model_failed', 'Expected the espeak engine to be loaded: it is not')
        with _library_lock:
            # Selected for every sentence (tens of microseconds): another engine object of the process may
            # have selected its own voice since.
            code = library.espeak_SetVoiceByName(voice.engine_voice.encode())
            if code != EE_OK:
                raise InstanceError('model_failed', f'espeak-ng could not select voice {voice.engine_voice!r} '
                                                    f'(error {code})')
            library.espeak_SetParameter(PARAM_RATE, words_per_minute(speed), 0)
            library.espeak_SetSynthCallback(self._callback)
            data = ctypes.create_string_buffer(text.encode('utf-8'))
            self._pieces, self._cancelled = [], cancelled
            try:
                code = library.espeak_Synth(data, len(data), 0, POS_CHARACTER, 0, CHARS_UTF8 | END_PAUSE, None, None)
                pieces = self._pieces
            finally:
                self._pieces, self._cancelled = [], None
        if cancelled.is_set():
            return None
        if code != EE_OK:
            raise InstanceError('model_failed', f'espeak-ng failed to synthesize a sentence (error {code})')
        return Audio(ESPEAK_SAMPLE_RATE_HZ, little_endian(b''.join(pieces)))

    def _on_audio(self, wav: Any, samples: int, events: Any) -> int:
        """The library's callback, during espeak_Synth on this thread: 1 stops the synthesis."""
        if samples > 0 and wav:
            self._pieces.append(ctypes.string_at(wav, samples * 2))
        cancelled = self._cancelled
        return 1 if cancelled is not None and cancelled.is_set() else 0

    def close(self) -> None:
        # The library stays initialized for the process (see _library); this engine just lets go of it.
        self._library = None
