"""Test support for diarization: conversations synthesized from distinct voices with known turns, and a
frame-level diarization error rate (DER) scorer."""
from __future__ import annotations

import threading
from functools import lru_cache
from dataclasses import dataclass
from math import gcd
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import linear_sum_assignment
from scipy.signal import resample_poly

from voxmux_host.models.debian_voices.catalogue import VOICES, Voice
from voxmux_host.models.debian_voices.engine import Engine
from voxmux_host.models.debian_voices.espeak import EspeakEngine
from voxmux_host.models.debian_voices.flite import FliteEngine

SAMPLE_RATE_HZ = 16000
#: Frames of the scorer, in seconds.
FRAME_S = 0.01
#: No score within this many seconds either side of a reference boundary (the field's usual collar).
COLLAR_S = 0.25


@dataclass(frozen=True)
class Turn:
    start: float  # seconds
    end: float  # seconds
    speaker: str


@dataclass(frozen=True)
class Conversation:
    audio: NDArray[np.int16]  # 16 kHz mono
    turns: Tuple[Turn, ...]

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE_HZ


# -------------------------------------------------------------------------------------------------
# DER


@dataclass(frozen=True)
class DerScore:
    scored_s: float  # reference speaker time scored (overlap counts each speaker)
    missed_s: float
    false_alarm_s: float
    confusion_s: float

    @property
    def der(self) -> float:
        if self.scored_s == 0:
            return 0.0 if self.missed_s + self.false_alarm_s + self.confusion_s == 0 else float('inf')
        return (self.missed_s + self.false_alarm_s + self.confusion_s) / self.scored_s


def _activity(turns: Sequence[Turn], speakers: Sequence[str], frames: int) -> NDArray[np.bool_]:
    active = np.zeros((len(speakers), frames), dtype=bool)
    index = {name: i for i, name in enumerate(speakers)}
    for turn in turns:
        a = max(0, int(round(turn.start / FRAME_S)))
        b = min(frames, int(round(turn.end / FRAME_S)))
        if b > a:
            active[index[turn.speaker], a:b] = True
    return active


def score_der(reference: Sequence[Turn], hypothesis: Sequence[Turn], collar_s: float = COLLAR_S) -> DerScore:
    """The DER of ``hypothesis`` against ``reference`` on 10 ms frames, as md-eval scores it: overlapped
    speech scored (a frame with n reference and m hypothesis speakers counts max(n - m, 0) missed,
    max(m - n, 0) false alarm and min(n, m) minus the correctly mapped ones as confusion), speakers mapped
    one to one to maximize the time they share (Hungarian), and no frame scored within ``collar_s`` of a
    reference turn's start or end."""
    end_s = max([t.end for t in reference] + [t.end for t in hypothesis] + [0.0])
    frames = int(np.ceil(end_s / FRAME_S)) + 1
    ref_names = sorted({t.speaker for t in reference})
    hyp_names = sorted({t.speaker for t in hypothesis})
    ref = _activity(reference, ref_names, frames)
    hyp = _activity(hypothesis, hyp_names, frames)
    scored = np.ones(frames, dtype=bool)
    collar = int(round(collar_s / FRAME_S))
    for turn in reference:
        for edge in (turn.start, turn.end):
            at = int(round(edge / FRAME_S))
            scored[max(0, at - collar):max(0, at + collar)] = False
    ref, hyp = ref[:, scored], hyp[:, scored]
    shared = ref.astype(np.int64) @ hyp.T.astype(np.int64)  # [ref, hyp] frames both speak
    correct = 0
    if shared.size:
        rows, cols = linear_sum_assignment(-shared)
        correct = int(shared[rows, cols].sum())
    n_ref, n_hyp = ref.sum(axis=0), hyp.sum(axis=0)
    missed = int(np.maximum(n_ref - n_hyp, 0).sum())
    false_alarm = int(np.maximum(n_hyp - n_ref, 0).sum())
    confusion = int(np.minimum(n_ref, n_hyp).sum()) - correct
    return DerScore(float(n_ref.sum()) * FRAME_S, missed * FRAME_S, false_alarm * FRAME_S, confusion * FRAME_S)


def turns_from_segments(segments: Sequence[Mapping[str, object]]) -> List[Turn]:
    """An engine's ``{"start", "end", "speaker"}`` segments as turns."""
    return [Turn(float(s['start']), float(s['end']), str(s['speaker']))  # type: ignore[arg-type]
            for s in segments]


def read_rttm(text: str) -> Dict[str, List[Turn]]:
    """The SPEAKER lines of an RTTM file, by recording."""
    turns: Dict[str, List[Turn]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[0] == 'SPEAKER':
            start, duration = float(fields[3]), float(fields[4])
            turns.setdefault(fields[1], []).append(Turn(start, start + duration, fields[7]))
    return turns


# -------------------------------------------------------------------------------------------------
# Conversations

SENTENCES: Tuple[str, ...] = (
    'Yes.',
    'I think so.',
    'Could you say that again, please?',
    'The meeting moved to Thursday afternoon at three.',
    'We measured the latency twice and it was stable both times.',
    'Honestly, I would rather wait until the numbers come in before we decide anything.',
    'Right, that makes sense.',
    'The patient reported mild pain in the left knee after walking for about ten minutes.',
    'No, not yet.',
    'Please send me the report by the end of the day, and copy the whole team on it.',
    'The weather was cold, but the trains were on time this morning.',
    'Okay, let us move on to the next item on the agenda.',
    'I agree with that.',
    'Three hundred and forty two samples were labelled by hand last week.',
    'That sounds good to me.',
    'When the server restarts, every session should resume exactly where it stopped.',
)

_VOICES: Dict[str, Voice] = {voice.name: voice for voice in VOICES}
_FLITE = FliteEngine()
_ESPEAK = EspeakEngine()
_LOADED: Dict[str, bool] = {}


def say(voice_name: str, text: str, speed: float = 1.0) -> NDArray[np.float64]:
    """``text`` said by a debian-voices voice, as 16 kHz floats, without leading or trailing silence."""
    voice = _VOICES[voice_name]
    engine: Engine = _FLITE
    if voice.engine != 'flite':
        engine = _ESPEAK
    if voice.name not in _LOADED:
        engine.load([voice])
        _LOADED[voice.name] = True
    audio = engine.synthesize(voice, text, speed, threading.Event())
    assert audio is not None
    samples = np.frombuffer(audio.pcm, dtype='<i2').astype(np.float64) / 32768.0
    if audio.sample_rate != SAMPLE_RATE_HZ:
        common = gcd(audio.sample_rate, SAMPLE_RATE_HZ)
        samples = resample_poly(samples, SAMPLE_RATE_HZ // common, audio.sample_rate // common)
    loud = np.flatnonzero(np.abs(samples) > 0.01)
    return samples[loud[0]:loud[-1] + 1] if loud.size else samples[:0]


@lru_cache(maxsize=None)
def conversation(voices: Tuple[str, ...], seed: int, total_s: float) -> Conversation:
    """:func:`synthesize_conversation`, made once per test process."""
    return synthesize_conversation(voices, seed, total_s)


def synthesize_conversation(voices: Sequence[str], seed: int, total_s: float) -> Conversation:
    """A conversation of ``voices`` taking turns (never the same voice twice in a row) of 1-6 s with
    pauses of 0.2-0.8 s, about ``total_s`` long, over a faint noise floor; the turns are where each voice's
    audio is."""
    rng = np.random.default_rng(seed)
    pieces: List[NDArray[np.float64]] = []
    turns: List[Turn] = []
    at = int(rng.integers(3, 8)) * SAMPLE_RATE_HZ // 10
    pieces.append(np.zeros(at))
    previous = -1
    while at < total_s * SAMPLE_RATE_HZ:
        speaker = int(rng.integers(len(voices)))
        if speaker == previous:
            speaker = (speaker + 1) % len(voices)
        previous = speaker
        target_s = float(rng.uniform(1.0, 6.0))
        speech = np.zeros(0)
        while len(speech) < 1.0 * SAMPLE_RATE_HZ or len(speech) < target_s * SAMPLE_RATE_HZ * 0.7:
            text = SENTENCES[int(rng.integers(len(SENTENCES)))]
            part = say(voices[speaker], text, float(rng.uniform(0.9, 1.15)))
            speech = np.concatenate([speech, np.zeros(int(0.15 * SAMPLE_RATE_HZ)), part]) if speech.size else part
        speech = speech[:int(target_s * SAMPLE_RATE_HZ)]
        loud = np.flatnonzero(np.abs(speech) > 0.01)
        speech = speech[:loud[-1] + 1]
        turns.append(Turn(at / SAMPLE_RATE_HZ, (at + len(speech)) / SAMPLE_RATE_HZ, voices[speaker]))
        pause = int(rng.uniform(0.2, 0.8) * SAMPLE_RATE_HZ)
        pieces += [speech, np.zeros(pause)]
        at += len(speech) + pause
    mixture = np.concatenate(pieces)
    mixture = mixture / max(1e-9, float(np.abs(mixture).max())) * 0.7
    mixture += rng.normal(0.0, 10 ** (-60 / 20), len(mixture))
    return Conversation(np.clip(np.round(mixture * 32767), -32768, 32767).astype(np.int16), tuple(turns))
