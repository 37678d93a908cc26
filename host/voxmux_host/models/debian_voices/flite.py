"""Flite voices in process, through ctypes on Debian's libflite1 (no headers needed at run time).

In process, a sentence costs only its synthesis (2-50 ms here), not the 10-50 ms of spawning the
``flite`` program. The bindings follow flite 2.2's headers (flite1-dev: flite.h, cst_wave.h,
cst_voice.h) and flite's own main: ``flite_init``, then ``flite_add_lang`` for the US English
language and lexicon, then ``register_cmu_us_<name>`` for each voice.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Optional, Sequence

from ...errors import InstanceError
from ..speech_text import without_control_characters
from .catalogue import Voice
from .engine import Audio, little_endian

LIBRARY = 'libflite.so.1'
LANGUAGE_LIBRARY = 'libflite_usenglish.so.1'
LEXICON_LIBRARY = 'libflite_cmulex.so.1'
PACKAGE = 'libflite1'
#: The voice feature that scales every segment's duration (flite's --setf duration_stretch).
DURATION_STRETCH = b'duration_stretch'


class _Wave(ctypes.Structure):
    """``cst_wave`` (cst_wave.h)."""

    _fields_ = [
        ('type', ctypes.c_char_p),
        ('sample_rate', ctypes.c_int),
        ('num_samples', ctypes.c_int),
        ('num_channels', ctypes.c_int),
        ('samples', ctypes.POINTER(ctypes.c_short)),
    ]


class _Voice(ctypes.Structure):
    """``cst_voice`` (cst_voice.h): only ``features`` is read."""

    _fields_ = [
        ('name', ctypes.c_char_p),
        ('features', ctypes.c_void_p),
        ('ffunctions', ctypes.c_void_p),
        ('utt_init', ctypes.c_void_p),
    ]


def voice_library(engine_voice: str) -> str:
    return f'libflite_cmu_us_{engine_voice}.so.1'


class FliteEngine:
    def __init__(self) -> None:
        self._flite: Optional[ctypes.CDLL] = None
        self._voices: Dict[str, 'ctypes._Pointer[_Voice]'] = {}
        self._libraries: List[ctypes.CDLL] = []  # kept so that no voice's library is unloaded
        self._libc: Optional[ctypes.CDLL] = None

    def load(self, voices: Sequence[Voice]) -> None:
        missing: List[str] = []
        libraries: Dict[str, ctypes.CDLL] = {}
        for name in (LIBRARY, LANGUAGE_LIBRARY, LEXICON_LIBRARY, *(voice_library(v.engine_voice) for v in voices)):
            try:
                # RTLD_GLOBAL: a voice library resolves the language and lexicon symbols of the others.
                libraries[name] = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                missing.append(name)
        if missing:
            raise InstanceError('load_failed', f'The flite voices need the shared libraries {", ".join(missing)} '
                                               f'(Debian package {PACKAGE}): not found')
        flite = libraries[LIBRARY]
        flite.flite_init.restype = ctypes.c_int
        flite.flite_add_lang.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
        flite.flite_text_to_wave.restype = ctypes.POINTER(_Wave)
        flite.flite_text_to_wave.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Voice)]
        flite.delete_wave.restype = None
        flite.delete_wave.argtypes = [ctypes.POINTER(_Wave)]
        flite.flite_feat_set_float.restype = None
        flite.flite_feat_set_float.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_float]
        flite.flite_get_param_float.restype = ctypes.c_float
        flite.flite_get_param_float.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_float]
        flite.feat_present.restype = ctypes.c_int
        flite.feat_present.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        flite.flite_feat_remove.restype = ctypes.c_int
        flite.flite_feat_remove.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        flite.flite_init()
        lang_init = ctypes.cast(libraries[LANGUAGE_LIBRARY].usenglish_init, ctypes.c_void_p)
        lex_init = ctypes.cast(libraries[LEXICON_LIBRARY].cmu_lex_init, ctypes.c_void_p)
        for lang in (b'eng', b'usenglish'):  # as flite's main does
            flite.flite_add_lang(lang, lang_init, lex_init)
        for voice in voices:
            register = getattr(libraries[voice_library(voice.engine_voice)], f'register_cmu_us_{voice.engine_voice}')
            register.restype = ctypes.POINTER(_Voice)
            register.argtypes = [ctypes.c_char_p]
            handle = register(None)
            if not handle:
                raise InstanceError('load_failed', f'flite could not register its voice {voice.engine_voice!r}')
            self._voices[voice.engine_voice] = handle
        self._libc = ctypes.CDLL(None)
        self._libc.srand.restype = None
        self._libc.srand.argtypes = [ctypes.c_uint]
        self._flite = flite
        self._libraries = list(libraries.values())

    def warmup(self) -> None:
        # One word per voice touches its unit database, so the first request does not pay for it.
        for engine_voice in self._voices:
            self._synthesize(engine_voice, 'Hello.', 1.0)

    def synthesize(self, voice: Voice, text: str, speed: float, cancelled: threading.Event) -> Optional[Audio]:
        # A sentence takes 2-50 ms: it runs to the end, and the caller checks the cancel after it.
        return self._synthesize(voice.engine_voice, text, speed)

    def _synthesize(self, engine_voice: str, text: str, speed: float) -> Audio:
        flite, libc, handle = self._flite, self._libc, self._voices.get(engine_voice)
        if flite is None or libc is None or handle is None:
            raise InstanceError('model_failed', f'Expected flite voice {engine_voice!r} to be loaded: it is not')
        features = handle.contents.features
        # The stretch is a feature of the voice, which every synthesis copies: set it for this call and put
        # back what was there, so that no request changes the next one's speed.
        had_stretch = bool(flite.feat_present(features, DURATION_STRETCH))
        previous = float(flite.flite_get_param_float(features, DURATION_STRETCH, 1.0))
        flite.flite_feat_set_float(features, DURATION_STRETCH, 1.0 / speed)
        # The unit-selection voices (slt, rms, awb) draw from libc's rand() while they join units: seeded
        # as a fresh process is (glibc's seed 1), a sentence sounds the same whatever the instance said
        # before, and the same as the flite program says it.
        libc.srand(1)
        try:
            wave = flite.flite_text_to_wave(without_control_characters(text).encode('utf-8'), handle)
        finally:
            if had_stretch:
                flite.flite_feat_set_float(features, DURATION_STRETCH, previous)
            else:
                flite.flite_feat_remove(features, DURATION_STRETCH)
        if not wave:
            raise InstanceError('model_failed', f'flite voice {engine_voice!r} returned no audio')
        try:
            contents = wave.contents
            if contents.num_channels != 1:
                raise InstanceError('model_failed', f'Expected mono audio from flite: got {contents.num_channels} '
                                                    f'channels')
            samples = max(0, contents.num_samples)
            pcm = ctypes.string_at(contents.samples, samples * 2) if samples else b''
            return Audio(int(contents.sample_rate), little_endian(pcm))
        finally:
            flite.delete_wave(wave)

    def close(self) -> None:
        # Voices registered by flite live as long as the process (flite has no unregister); drop the handles.
        self._voices.clear()
        self._flite = None
