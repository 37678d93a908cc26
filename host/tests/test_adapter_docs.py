"""docs/adapters.md lists every option each adapter accepts."""
from __future__ import annotations

import re
from pathlib import Path

from voxmux_host.models.parakeet.adapter import DEFAULT_OPTIONS
from voxmux_host.models.vits.adapter import DEFAULT_OPTIONS as VITS_OPTIONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def _section_options(name: str) -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Za-z]+)` \|", section, flags=re.MULTILINE))


def test_every_parakeet_option_is_documented_and_nothing_else() -> None:
    assert _section_options("parakeet") == set(DEFAULT_OPTIONS)


def test_every_debian_voices_option_and_stream_param_is_documented_and_nothing_else() -> None:
    from voxmux_host.models.debian_voices.adapter import OPTIONS, PARAMS

    assert _section_options("debian-voices") == set(OPTIONS) | set(PARAMS)


def test_every_vits_option_is_documented_and_nothing_else() -> None:
    assert _section_options("vits") == set(VITS_OPTIONS)


def test_every_classical_diarizer_option_and_item_option_is_documented() -> None:
    from voxmux_host.models.classical_diarizer.adapter import ITEM_OPTIONS, OPTIONS

    assert _section_options("classical-diarizer") == set(OPTIONS)
    section = DOC.read_text(encoding="utf-8").split("## `classical-diarizer`", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{name}`" in section for name in ITEM_OPTIONS)


def test_every_whisper_option_is_documented_and_nothing_else() -> None:
    from voxmux_host.models.whisper.adapter import DEFAULT_OPTIONS as WHISPER_OPTIONS

    assert _section_options("whisper") == set(WHISPER_OPTIONS)
