"""Text -> phoneme ids, as Piper does it: espeak-ng's IPA (or the text's own characters), one symbol per
code point, mapped through the voice's ``phoneme_id_map``: BOS ``^``, each symbol followed by the pad
``_``, EOS ``$``. Symbols missing from the map are skipped (Piper does the same).

espeak-ng is used through its C library (``libespeak-ng.so.1``, Debian package ``libespeak-ng1``) with
ctypes: ``espeak_Initialize`` (synchronous output, no audio device, told not to exit the process on an
error), ``espeak_SetVoiceByName`` and ``espeak_TextToPhonemes`` in IPA mode, which phonemizes one clause
per call. The library keeps global state: call it from one thread (the host's main thread).

The clauses are put together as piper-phonemize's ``phonemize_eSpeak`` does (src/phonemize.cpp), since
Piper voices are trained on its output: espeak-ng's language-switch flags such as ``(en)`` are removed,
and each clause is followed by its terminator, ``.``, ``?`` or ``!`` (which end a sentence), or ``, ``,
``: `` or ``; ``; a clause that ends otherwise is followed by nothing. Piper speaks each sentence on its
own; here they are joined by a space."""
from __future__ import annotations

import ctypes
import unicodedata
from typing import Dict, List, Optional

from voxmux_host.errors import InstanceError
from voxmux_host.models.speech_text import without_control_characters

PAD = '_'
BOS = '^'
EOS = '$'
SPACE = ' '
#: Symbols that are not phones: they get durations like any symbol but do not count towards the speech rate.
NOT_PHONES = frozenset({PAD, BOS, EOS, SPACE, 'ˈ', 'ˌ', 'ː', 'ˑ', '\u0329', '\u032f', '\u0303'})

_PUNCTUATION = "!'(),-.:;?\"«»“”"
_IPA = ('aæɐɑɒbβɓcçɕdðɖɗeəɘɚɛɜɝɞfɟɠgɡɢɣɤhħɦɧiɨɪjʝklɫɬɭɮʟmɱnŋɲɳɴoøɵœɶɔpɸqrɹɺɻɽɾʀʁsʂʃtθʈuʉʊʋvⱱʌwʍɯɰxχyʏʎzʐʑʒʔʕʡʢʘǀǁǂǃ'
        'ˈˌːˑʰʲʷˠˤ˞ᵻ\u0303\u0329\u032a\u032f\u033a\u033b\u0361')


def default_phoneme_id_map() -> Dict[str, List[int]]:
    """The map of random voices: pad 0, BOS 1, EOS 2, space 3 (Piper's special ids), then punctuation,
    Latin letters and digits (for the ``text`` phonemizer) and the IPA symbols espeak-ng writes."""
    symbols: List[str] = [PAD, BOS, EOS, SPACE]
    for ch in _PUNCTUATION + 'abcdefghijklmnopqrstuvwxyz0123456789' + _IPA:
        if ch not in symbols:
            symbols.append(ch)
    assert len(symbols) < 256
    return {symbol: [i] for i, symbol in enumerate(symbols)}


def to_ids(phonemes: str, id_map: Dict[str, List[int]]) -> List[int]:
    ids: List[int] = list(id_map[BOS]) + list(id_map[PAD])
    for symbol in phonemes:
        mapped = id_map.get(symbol)
        if mapped is None:
            continue
        ids.extend(mapped)
        ids.extend(id_map[PAD])
    ids.extend(id_map[EOS])
    return ids


def phone_count(phonemes: str, id_map: Dict[str, List[int]]) -> int:
    """Phones among the symbols (stress, length marks and spaces excluded), for speech-rate checks."""
    return sum(1 for symbol in phonemes if symbol in id_map and symbol not in NOT_PHONES)


class TextPhonemizer:
    """Piper's ``phoneme_type: "text"``: the lower-cased text's code points (NFD) are the symbols."""

    def phonemize(self, text: str, voice: str) -> str:
        return unicodedata.normalize('NFD', text.lower())


AUDIO_OUTPUT_SYNCHRONOUS = 2
ESPEAK_INITIALIZE_DONT_EXIT = 0x8000
ESPEAK_CHARS_UTF8 = 1
PHONEMES_IPA = 0x02
LIBRARY = 'libespeak-ng.so.1'
#: What piper-phonemize writes after a clause, by the clause's terminator.
CLAUSE_ENDS: Dict[int, str] = {ord('.'): '.', ord('?'): '?', ord('!'): '!', ord(','): ', ', ord(':'): ': ',
                               ord(';'): '; '}
SENTENCE_ENDS = frozenset({ord('.'), ord('?'), ord('!')})


def clause_terminator(text: bytes, after: int) -> int:
    """The clause terminator as piper-phonemize finds it: the last byte other than a space before
    ``after - 1`` (espeak-ng's text pointer stops one character past the clause; ``after`` is
    ``len(text) + 1`` for the last clause), the first byte excluded; 0 for none."""
    for at in range(after - 2, 0, -1):
        if text[at] != ord(' '):
            return text[at]
    return 0


def without_language_flags(phonemes: str) -> str:
    """``phonemes`` without espeak-ng's language-switch flags: "(en)fˈʊtbɔːl(fr)" is "fˈʊtbɔːl"."""
    kept: List[str] = []
    in_flag = False
    for symbol in phonemes:
        if in_flag:
            in_flag = symbol != ')'
        elif symbol == '(':
            in_flag = True
        else:
            kept.append(symbol)
    return ''.join(kept)


class EspeakPhonemizer:
    """espeak-ng's IPA through ctypes, clause by clause (espeak-ng splits at punctuation), as
    piper-phonemize puts it together (see the module's docstring)."""

    def __init__(self, data_path: Optional[str] = None, library: str = LIBRARY) -> None:
        try:
            lib = ctypes.CDLL(library)
        except OSError as err:
            raise InstanceError('load_failed', f'Could not load {library} (Debian package libespeak-ng1; or set '
                                               f'phonemizer "text"): {err}') from err
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        path = data_path.encode() if data_path else None
        rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, path, ESPEAK_INITIALIZE_DONT_EXIT)
        if rate <= 0:
            raise InstanceError('load_failed', f'espeak_Initialize failed ({rate}) with data path {data_path!r}')
        self._lib = lib
        self._voice: Optional[str] = None

    def phonemize(self, text: str, voice: str) -> str:
        if voice != self._voice:
            if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise InstanceError('load_failed', f'espeak-ng has no voice {voice!r}')
            self._voice = voice
        raw = without_control_characters(text).encode('utf-8')
        encoded = ctypes.create_string_buffer(raw)
        start = ctypes.addressof(encoded)
        pointer = ctypes.c_void_p(start)
        sentences: List[str] = []
        sentence = ''
        while pointer.value:
            out = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), ESPEAK_CHARS_UTF8, PHONEMES_IPA)
            after = pointer.value - start if pointer.value else len(raw) + 1
            terminator = clause_terminator(raw, after)
            if out:
                sentence += without_language_flags(out.decode('utf-8', errors='replace')).strip()
            sentence += CLAUSE_ENDS.get(terminator, '')
            if terminator in SENTENCE_ENDS:
                sentences.append(sentence.strip())
                sentence = ''
        sentences.append(sentence.strip())
        return unicodedata.normalize('NFD', ' '.join(s for s in sentences if s))

