"""Random voice files of the vits adapter: written once, shared out among instances by lock files."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List

import torch

from voxmux_host.models.vits.config import TINY
from voxmux_host.models.vits.random_init import random_state, voice_seed
from voxmux_host.models.vits.voices import STALE_LOCK_S, ensure_random_voices, random_voices_dir


def test_random_voices_are_written_once(tmp_path: Path) -> None:
    specs = ensure_random_voices(str(tmp_path), TINY, 2, seed=4)
    assert [s.name for s in specs] == ['vits-0', 'vits-1']
    mtimes = [os.stat(s.path).st_mtime_ns for s in specs]
    again = ensure_random_voices(str(tmp_path), TINY, 3, seed=4)
    assert [os.stat(s.path).st_mtime_ns for s in again[:2]] == mtimes
    state = torch.load(again[2].path)
    expected, _ = random_state(TINY, voice_seed(4, 2))
    assert all(torch.equal(state[k], expected[k]) for k in expected)


def test_a_voice_another_instance_is_writing_is_waited_for(tmp_path: Path) -> None:
    folder = Path(random_voices_dir(str(tmp_path), TINY, 0))
    folder.mkdir(parents=True)
    (folder / 'vits-1.pt.lock').write_text('')
    slept: List[float] = []

    def other_instance_finishes(seconds: float) -> None:
        slept.append(seconds)
        state, _ = random_state(TINY, voice_seed(0, 1))
        torch.save(state, folder / 'vits-1.pt')
        (folder / 'vits-1.pt.lock').unlink()

    specs = ensure_random_voices(str(tmp_path), TINY, 3, seed=0, clock=lambda: 0.0, sleep=other_instance_finishes)
    assert len(slept) == 1
    assert all(os.path.isfile(s.path) for s in specs)


def test_a_stale_lock_is_taken_over(tmp_path: Path) -> None:
    folder = Path(random_voices_dir(str(tmp_path), TINY, 0))
    folder.mkdir(parents=True)
    (folder / 'vits-0.pt.lock').write_text('')
    now = [0.0]

    def time_passes(seconds: float) -> None:
        now[0] += STALE_LOCK_S / 2

    specs = ensure_random_voices(str(tmp_path), TINY, 1, seed=0, clock=lambda: now[0], sleep=time_passes)
    assert os.path.isfile(specs[0].path) and not (folder / 'vits-0.pt.lock').exists()
