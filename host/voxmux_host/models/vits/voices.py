"""The voice catalogue: one weight file per voice.

- ``voicesDir``: every ``<name>.pt`` and ``<name>.ckpt`` in the folder is the voice ``<name>``. Its Piper
  config, when present (``<name>.json``, ``<name>.onnx.json`` or ``<name>.pt.json``/``<name>.ckpt.json``),
  gives its ``phoneme_id_map``, ``phoneme_type``, ``espeak.voice``, ``audio.sample_rate``, ``inference``
  scales and ``language.code``; otherwise the defaults of random voices apply.
- ``randomVoices: N``: voices ``vits-0`` … ``vits-<N-1>`` with seeded random weights (random_init.py),
  written once to ``<voiceCacheDir>/<config>-seed<seed>/vits-<n>.pt`` (atomically, and shared out by
  lock files among instances that start together) and read from there like any voice file, so a load
  really reads the disk."""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import torch

from voxmux_host.errors import InstanceError

from .config import VitsConfig
from .phonemes import default_phoneme_id_map
from .random_init import random_state, voice_seed
from .synthesizer import NOISE_SCALE, NOISE_W, Scales

VOICE_SUFFIXES = ('.pt', '.ckpt')
DEFAULT_ESPEAK_VOICE = 'en-us'
DEFAULT_LANGUAGE = 'en-US'
#: How long an instance waits for a random voice that another instance is writing before writing it itself.
STALE_LOCK_S = 600.0


@dataclass(frozen=True)
class VoiceSpec:
    name: str
    path: str
    sample_rate: int
    phoneme_id_map: Dict[str, List[int]] = field(default_factory=default_phoneme_id_map)
    phoneme_type: str = 'espeak'
    espeak_voice: str = DEFAULT_ESPEAK_VOICE
    scales: Scales = Scales()
    language: str = DEFAULT_LANGUAGE
    description: str = ''

    def catalog_entry(self) -> Dict[str, Any]:
        return {'name': self.name, 'kind': 'voice', 'language': self.language, 'sampleRate': self.sample_rate,
                'gender': None, 'description': self.description}


def scan_voices_dir(path: str, config: VitsConfig) -> List[VoiceSpec]:
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        raise InstanceError('load_failed', f'Could not list voicesDir {path}: {err}') from err
    specs: List[VoiceSpec] = []
    seen: Dict[str, str] = {}
    for entry in names:
        stem, suffix = os.path.splitext(entry)
        if suffix not in VOICE_SUFFIXES:
            continue
        if stem in seen:
            raise InstanceError('load_failed', f"Two files for voice '{stem}' in {path}: {seen[stem]} and {entry}")
        seen[stem] = entry
        file_path = os.path.join(path, entry)
        specs.append(_spec_with_config(stem, file_path, config))
    if not specs:
        raise InstanceError('load_failed', f'voicesDir {path} holds no .pt or .ckpt voice file')
    return specs


def _spec_with_config(name: str, file_path: str, config: VitsConfig) -> VoiceSpec:
    folder = os.path.dirname(file_path)
    candidates = [os.path.join(folder, f'{name}.json'), os.path.join(folder, f'{name}.onnx.json'),
                  file_path + '.json']
    config_path = next((c for c in candidates if os.path.isfile(c)), None)
    if config_path is None:
        return VoiceSpec(name, file_path, config.sample_rate, description=f'VITS voice from {os.path.basename(file_path)}')
    try:
        with open(config_path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError) as err:
        raise InstanceError('load_failed', f'Could not read voice config {config_path}: {err}') from err
    id_map = data.get('phoneme_id_map') or default_phoneme_id_map()
    inference = data.get('inference') or {}
    language = str((data.get('language') or {}).get('code') or DEFAULT_LANGUAGE).replace('_', '-')
    sample_rate = int((data.get('audio') or {}).get('sample_rate') or config.sample_rate)
    if sample_rate != config.sample_rate:
        raise InstanceError('load_failed', f'Voice {name} is {sample_rate} Hz: the {config.name} model is '
                                           f'{config.sample_rate} Hz')
    phoneme_type = str(data.get('phoneme_type') or 'espeak')
    if phoneme_type not in ('espeak', 'text'):
        raise InstanceError('load_failed', f'Voice {name} has phoneme_type {phoneme_type!r}: expected espeak or text')
    return VoiceSpec(
        name=name, path=file_path, sample_rate=sample_rate,
        phoneme_id_map={str(k): [int(i) for i in v] for k, v in id_map.items()},
        phoneme_type=phoneme_type,
        espeak_voice=str((data.get('espeak') or {}).get('voice') or DEFAULT_ESPEAK_VOICE),
        scales=Scales(float(inference.get('noise_scale', NOISE_SCALE)), float(inference.get('length_scale', 1.0)),
                      float(inference.get('noise_w', NOISE_W))),
        language=language,
        description=str(data.get('dataset') or f'VITS voice from {os.path.basename(file_path)}'))


def random_voices_dir(cache_dir: str, config: VitsConfig, seed: int) -> str:
    return os.path.join(cache_dir, f'{config.name}-seed{seed}')


def ensure_random_voices(cache_dir: str, config: VitsConfig, count: int, seed: int,
                         device: Optional[torch.device] = None, clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> List[VoiceSpec]:
    """The random voices' specs, writing any file that is not in the cache yet. Instances that start
    together share the work: each writes the voices whose lock file (``<file>.lock``) it creates first,
    then waits for the others' (a lock older than STALE_LOCK_S is taken over)."""
    folder = random_voices_dir(cache_dir, config, seed)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise InstanceError('load_failed', f'Could not create voiceCacheDir {folder}: {err}') from err
    specs: List[VoiceSpec] = []
    waiting: List[str] = []
    for index in range(count):
        name = f'vits-{index}'
        path = os.path.join(folder, f'{name}.pt')
        if not os.path.isfile(path) and not _generate_locked(path, config, voice_seed(seed, index), device):
            waiting.append(path)
        description = f'random VITS voice ({config.name}, seed {seed}, #{index})'
        specs.append(VoiceSpec(name, path, config.sample_rate, description=description))
    for path in waiting:
        deadline = clock() + STALE_LOCK_S
        while not os.path.isfile(path):
            if clock() > deadline:
                index = int(os.path.basename(path)[len('vits-'):-len('.pt')])
                _take_over(path)
                if not _generate_locked(path, config, voice_seed(seed, index), device):
                    raise InstanceError('load_failed', f'Random voice {path} is still locked by another instance')
            else:
                sleep(0.05)
    return specs


def _generate_locked(path: str, config: VitsConfig, seed: int, device: Optional[torch.device]) -> bool:
    """Write the voice file unless another instance holds its lock: True when the file is there."""
    lock = path + '.lock'
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return os.path.isfile(path)
    os.close(fd)
    try:
        if not os.path.isfile(path):
            state, _ = random_state(config, seed, device)
            _write_atomically(path, state)
    finally:
        os.unlink(lock)
    return True


def _take_over(path: str) -> None:
    try:
        os.unlink(path + '.lock')
    except FileNotFoundError:
        pass


def _write_atomically(path: str, state: Dict[str, torch.Tensor]) -> None:
    fd, tmp = tempfile.mkstemp(prefix='.tmp-', suffix='.pt', dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, 'wb') as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
