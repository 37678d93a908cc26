"""Every voice the ``debian-voices`` adapter can serve, and the ``voices`` option that restricts them.

The catalogue is declared, not discovered: a voice that the configuration names (a gateway alias, say)
must fail the load when its package is missing, not vanish from the list. Each engine checks at load
that the voices it was given are installed (flite.py, festival.py, espeak.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...errors import InstanceError

ENGINES: Tuple[str, ...] = ('flite', 'festival', 'espeak')


@dataclass(frozen=True)
class Voice:
    name: str  # the engine-native voice id of the API: 'flite-slt', 'festival-kal', 'espeak-en-us+f3'
    engine: str  # one of ENGINES
    engine_voice: str  # the engine's own name: 'slt', 'voice_kal_diphone', 'gmw/en-US+f3'
    language: str
    sample_rate: int  # Hz, the engine's native rate for this voice
    gender: Optional[str]  # 'female', 'male' or None
    description: str

    def entry(self) -> Dict[str, Any]:
        """The voice as the adapter's ``catalog()`` lists it."""
        return {'name': self.name, 'kind': 'voice', 'language': self.language, 'sampleRate': self.sample_rate,
                'gender': self.gender, 'description': self.description}


# -- flite (libflite1: one shared library per voice) -------------------------------------------------

FLITE_VOICES: Tuple[Voice, ...] = (
    Voice('flite-slt', 'flite', 'slt', 'en-US', 16000, 'female',
          'Flite, CMU ARCTIC slt: US English female, unit selection'),
    Voice('flite-rms', 'flite', 'rms', 'en-US', 16000, 'male',
          'Flite, CMU ARCTIC rms: US English male, unit selection'),
    Voice('flite-awb', 'flite', 'awb', 'en-GB', 16000, 'male',
          'Flite, CMU ARCTIC awb: Scottish English male, unit selection'),
    Voice('flite-kal16', 'flite', 'kal16', 'en-US', 16000, 'male',
          'Flite, kal16: US English male, diphone'),
    Voice('flite-kal', 'flite', 'kal', 'en-US', 8000, 'male',
          'Flite, kal: US English male, diphone, 8 kHz'),
)

# -- Festival (festival + festvox-* packages) --------------------------------------------------------

FESTIVAL_VOICES: Tuple[Voice, ...] = (
    Voice('festival-slt-hts', 'festival', 'voice_cmu_us_slt_arctic_hts', 'en-US', 32000, 'female',
          'Festival, CMU ARCTIC slt: US English female, HTS statistical parametric, 32 kHz'),
    Voice('festival-kal', 'festival', 'voice_kal_diphone', 'en-US', 16000, 'male',
          'Festival, kal: US English male, residual-excited LPC diphone'),
    Voice('festival-ked', 'festival', 'voice_ked_diphone', 'en-US', 16000, 'male',
          'Festival, ked: US English male, residual-excited LPC diphone'),
)

# -- eSpeak NG (libespeak-ng1 + espeak-ng-data) -------------------------------------------------------

ESPEAK_SAMPLE_RATE_HZ = 22050

#: The English voices of ``espeak-ng --voices=en`` (espeak-ng 1.51) without the MBROLA ones (``mb/*``),
#: which need the mbrola program and databases that Debian main does not have:
#: (voice id suffix, voice file under espeak-ng-data/lang, language, accent).
ESPEAK_ACCENTS: Tuple[Tuple[str, str, str, str], ...] = (
    ('en-us', 'gmw/en-US', 'en-US', 'American'),
    ('en-us-nyc', 'gmw/en-US-nyc', 'en-US', 'American, New York City'),
    ('en-gb', 'gmw/en', 'en-GB', 'British'),
    ('en-gb-x-rp', 'gmw/en-GB-x-rp', 'en-GB', 'British, Received Pronunciation'),
    ('en-gb-scotland', 'gmw/en-GB-scotland', 'en-GB', 'Scottish'),
    ('en-gb-x-gbclan', 'gmw/en-GB-x-gbclan', 'en-GB', 'British, Lancaster'),
    ('en-gb-x-gbcwmd', 'gmw/en-GB-x-gbcwmd', 'en-GB', 'British, West Midlands'),
    ('en-029', 'gmw/en-029', 'en-029', 'Caribbean'),
)

#: The variants (espeak-ng-data/voices/!v) combined with every accent: the numbered male and female
#: formant settings. The ~80 others (named characters, robots, whisper, klatt) are left out: they are
#: novelty voices or near-duplicates of these.
ESPEAK_VARIANTS: Tuple[Tuple[str, str], ...] = (
    *((f'm{i}', 'male') for i in range(1, 8)),
    *((f'f{i}', 'female') for i in range(1, 6)),
)


def _espeak_voices() -> Tuple[Voice, ...]:
    voices: List[Voice] = []
    for suffix, voice_file, language, accent in ESPEAK_ACCENTS:
        voices.append(Voice(f'espeak-{suffix}', 'espeak', voice_file, language, ESPEAK_SAMPLE_RATE_HZ, 'male',
                            f'eSpeak NG formant synthesis: {accent} English, default (male) voice'))
        for variant, gender in ESPEAK_VARIANTS:
            voices.append(Voice(f'espeak-{suffix}+{variant}', 'espeak', f'{voice_file}+{variant}', language,
                                ESPEAK_SAMPLE_RATE_HZ, gender,
                                f'eSpeak NG formant synthesis: {accent} English, variant {variant} ({gender})'))
    return tuple(voices)


ESPEAK_VOICES: Tuple[Voice, ...] = _espeak_voices()

#: The whole catalogue, in the order catalog() lists it.
VOICES: Tuple[Voice, ...] = (*FLITE_VOICES, *FESTIVAL_VOICES, *ESPEAK_VOICES)


def select_voices(patterns: Optional[Sequence[Any]], voices: Sequence[Voice] = VOICES) -> Tuple[Voice, ...]:
    """The voices the ``voices`` option keeps: every voice whose id equals one of ``patterns`` or starts with
    it ('flite-', 'espeak-en-gb'); all of them when the option is absent.

    Raises InstanceError('load_failed') for an option that is not a non-empty list of strings, or for a
    pattern that matches no voice (a typo).
    """
    if patterns is None:
        return tuple(voices)
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise InstanceError('load_failed', f'Expected option voices to be a non-empty list of voice ids or id '
                                           f'prefixes: got {patterns!r}')
    unmatched = [p for p in patterns if not any(voice.name.startswith(p) for voice in voices)]
    if unmatched:
        raise InstanceError('load_failed', f'Expected option voices to name voices of the debian-voices adapter '
                                           f'(ids or prefixes such as flite-, festival-, espeak-en-us): '
                                           f'{", ".join(repr(p) for p in unmatched)} match none')
    return tuple(voice for voice in voices if any(voice.name.startswith(p) for p in patterns))
