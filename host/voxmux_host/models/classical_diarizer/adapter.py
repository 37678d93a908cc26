"""The ``classical-diarizer`` adapter: speaker diarization on the CPU with no trained model, of the
sequence work kind (docs/adapters.md, "classical-diarizer").

Voice activity (the gateway's Silero VAD regions, else an energy detector), MFCCs, speaker change
detection on KL2 between adjacent windows, and speaker clustering: offline for a whole file (one item,
``is_last``), online chunk by chunk for a session (diarizer.py). Every item carries its session's whole
state (state.py), so any instance continues any session with the same result.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...errors import InstanceError
from ...load_options import with_defaults
from ...model_api import (AdapterStats, ItemFailure, LoadContext, LoadInfo, SequenceInput, SequenceOutput,
                          SimpleSequenceAdapter, WarmupInfo)
from .clustering import Thresholds
from .diarizer import ChunkOptions, Settings, StepResult, diarize_chunk, diarize_file
from .features import FRAME_RATE_HZ, SAMPLE_RATE_HZ
from .state import EMPTY, decode, encode

#: Load options and their defaults.
OPTIONS: Dict[str, Any] = {
    'maxSpeakers': 8,
    'maxItemSeconds': 3600,
    'changeThreshold': 0.5,
    'clusterThreshold': 0.4,
    'mergePenalty': 1.5,
    'minSpeakerSeconds': 3.0,
    'minNewSpeakerSeconds': 2.0,
}
#: The largest ``maxSpeakers``: with MAX_EXEMPLARS pieces each and the longest tail, the state stays under
#: 1 MiB (test_classical_diarizer_parts.py checks the worst case).
MAX_SPEAKERS = 16
#: Item options (the diarization engine contract).
ITEM_OPTIONS: Tuple[str, ...] = ('minSpeakers', 'maxSpeakers', 'chunkOffsetS', 'speech')
#: Speech frames (10 ms) a piece needs to take part in clustering (0.5 s).
MIN_PIECE_FRAMES = 50


def _number(options: Dict[str, Any], key: str, minimum: float) -> float:
    value = options[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise InstanceError('load_failed', f'Expected option {key} to be a number >= {minimum:g}: got {value!r}')
    return float(value)


def parse_load_options(raw: Dict[str, Any]) -> Tuple[Settings, int, float]:
    """(settings, speaker cap, longest item in seconds); InstanceError('load_failed') naming an unknown
    key or a bad value."""
    options = with_defaults(raw, OPTIONS, 'classical-diarizer')
    cap = options['maxSpeakers']
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_SPEAKERS:
        raise InstanceError('load_failed', f'Expected option maxSpeakers to be an integer from 1 to {MAX_SPEAKERS}: '
                                           f'got {cap!r}')
    thresholds = Thresholds(cluster=_number(options, 'clusterThreshold', 0), merge=_number(options, 'mergePenalty', 0),
                            min_frames=MIN_PIECE_FRAMES,
                            min_speaker_frames=int(round(_number(options, 'minSpeakerSeconds', 0) * FRAME_RATE_HZ)),
                            min_new_speaker_frames=int(round(_number(options, 'minNewSpeakerSeconds', 0)
                                                             * FRAME_RATE_HZ)))
    settings = Settings(change_threshold=_number(options, 'changeThreshold', 0), thresholds=thresholds)
    return settings, cap, _number(options, 'maxItemSeconds', 1)


def _count(options: Dict[str, Any], key: str) -> Optional[int]:
    value = options.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InstanceError('unsupported_option', f'Expected item option {key} to be an integer >= 1: got {value!r}')
    return value


def parse_item_options(options: Dict[str, Any], cap: int, chunk_s: float) -> ChunkOptions:
    """The contract's item options; InstanceError('unsupported_option') naming an unknown key or a bad value.
    ``maxSpeakers`` is capped at the engine's ``cap``."""
    unknown = sorted(set(options) - set(ITEM_OPTIONS))
    if unknown:
        raise InstanceError('unsupported_option', f'Expected item options among {", ".join(ITEM_OPTIONS)}: got '
                                                  f'{", ".join(unknown)}')
    least, most = _count(options, 'minSpeakers'), _count(options, 'maxSpeakers')
    most = min(cap, most if most is not None else cap)
    least = least if least is not None else 1
    if least > most:
        raise InstanceError('unsupported_option', f'Expected minSpeakers ({least}) to be at most maxSpeakers ({most}, '
                                                  f'this engine serves at most {cap})')
    offset = options.get('chunkOffsetS', 0.0)
    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not math.isfinite(offset) or offset < 0:
        raise InstanceError('unsupported_option', f'Expected item option chunkOffsetS to be a number >= 0: got '
                                                  f'{offset!r}')
    speech = options.get('speech')
    regions: Optional[Tuple[Tuple[float, float], ...]] = None
    if speech is not None:
        if not isinstance(speech, list):
            raise InstanceError('unsupported_option', f'Expected item option speech to be a list of [startS, endS]: '
                                                      f'got {type(speech).__name__}')
        parsed: List[Tuple[float, float]] = []
        for region in speech:
            is_pair = (isinstance(region, list) and len(region) == 2
                       and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                               for v in region))
            # A region may end a little past the chunk (the VAD's padding): it is clipped there.
            if not is_pair or not 0 <= region[0] <= region[1]:
                raise InstanceError('unsupported_option', f'Expected each speech region to be [startS, endS] with '
                                                          f'0 <= startS <= endS: got {region!r}')
            parsed.append((float(region[0]), min(float(region[1]), chunk_s)))
        regions = tuple(parsed)
    return ChunkOptions(least, most, float(offset), regions)


def to_output(result: StepResult) -> Dict[str, Any]:
    return {'finalized': [s.to_output() for s in result.finalized],
            'provisional': [s.to_output() for s in result.provisional],
            'speakers': result.speakers}


class ClassicalDiarizerAdapter(SimpleSequenceAdapter):
    work_kinds: ClassVar[Tuple[str, ...]] = ('sequence',)

    def __init__(self) -> None:
        self._settings: Optional[Settings] = None
        self._cap = int(OPTIONS['maxSpeakers'])
        self._max_item_samples = 0
        self._items = 0

    def load(self, ctx: LoadContext) -> LoadInfo:
        self._settings, self._cap, max_item_s = parse_load_options(dict(ctx.options))
        self._max_item_samples = int(max_item_s * SAMPLE_RATE_HZ)
        return LoadInfo(device='cpu')

    def warmup(self) -> WarmupInfo:
        # One second of noise through both paths imports and touches everything (scikit-learn included).
        noise = (np.random.default_rng(0).normal(0, 3000, SAMPLE_RATE_HZ)).astype(np.int16)
        settings = self._require_settings()
        options = ChunkOptions(1, self._cap, 0.0, None)
        diarize_file(noise, options, settings)
        diarize_chunk(EMPTY, noise, False, options, settings)
        return WarmupInfo()

    def run_sequence(self, items: Sequence[SequenceInput]) -> List[Union[SequenceOutput, ItemFailure]]:
        results: List[Union[SequenceOutput, ItemFailure]] = []
        for item in items:
            try:
                results.append(self._run_one(item))
            except InstanceError as err:
                results.append(ItemFailure(err.code, err.message))
        return results

    def _run_one(self, item: SequenceInput) -> SequenceOutput:
        settings = self._require_settings()
        if item.audio.size > self._max_item_samples:
            limit_s = self._max_item_samples / SAMPLE_RATE_HZ
            raise InstanceError('invalid_audio', f'Expected an item of at most {limit_s:g} s of audio: got '
                                                 f'{item.audio.size / SAMPLE_RATE_HZ:g} s')
        options = parse_item_options(dict(item.options), self._cap, item.audio.size / SAMPLE_RATE_HZ)
        audio = np.asarray(item.audio, dtype=np.int16)
        # A state is the last successful item's: the items after it up to this one failed, and their
        # audio is accounted for by chunkOffsetS (no state after item 0: every earlier item failed).
        state = EMPTY if item.state is None else decode(item.state)
        if item.seq < state.next_seq:
            raise InstanceError('model_failed', f'Expected item {state.next_seq} or later of session '
                                                f'{item.session_id!r} after its state: got item {item.seq}')
        if item.seq == 0 and item.is_last:
            result = diarize_file(audio, options, settings)
        else:
            result = diarize_chunk(state, audio, item.is_last, options, settings)
        self._items += 1
        return SequenceOutput(to_output(result), encode(replace(result.state, next_seq=item.seq + 1)))

    def _require_settings(self) -> Settings:
        if self._settings is None:
            raise InstanceError('model_failed', 'Expected the classical diarizer to be loaded: it is not')
        return self._settings

    def stats(self) -> AdapterStats:
        return AdapterStats()

    def probe(self) -> bool:
        return True

    def close(self) -> None:
        self._settings = None
