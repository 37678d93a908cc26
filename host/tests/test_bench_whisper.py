"""bench_whisper.py's dry run on the CPU (tiny config): both modes run and the report has their numbers; parts run alone."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_whisper  # noqa: E402


def test_dry_run_reports_naive_and_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--naive-clips", "1", "--iterations", "1", "--warmup", "0", "--tokens-per-audio-second",
                               "2", "--stage-repeats", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [m["mode"] for m in report["modes"]] == ["a-naive", "b-engine"]
    naive, engine = report["modes"]
    assert naive["speedupOverNaive"] == 1.0
    assert engine["batchSize"] == 2 and engine["encoderCallsPerBatch"] == 1  # two clips, one encoder call
    for mode in report["modes"]:
        assert mode["clipsPerSecond"] > 0 and math.isfinite(mode["latencyP95S"])
        assert 0 < mode["tokensPerSecond"]
    # Where a batch's time goes: the encoder and one decode step, for every captured batch size.
    stages = report["stages"]
    assert sorted(stages["encoderMs"]) == sorted(stages["stepMs"]) == ["1", "2"]
    assert all(ms > 0 for ms in [*stages["encoderMs"].values(), *stages["stepMs"].values()])
    printed = capsys.readouterr().out
    assert "x naive" in printed and "encoder ms" in printed


def test_speech_like_clip_is_seeded_and_bounded() -> None:
    a, b = bench_whisper.speech_like_clip(1.0, 3), bench_whisper.speech_like_clip(1.0, 3)
    assert a.shape == (16000,) and bool((a == b).all()) and float(a.abs().max()) <= 1.0


def test_parts_run_alone_and_each_is_written_as_it_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--stage-repeats", "10", "--parts", "variants", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["modes"] == [] and "stages" not in report
    assert sorted(report["encoderVariants"]["eager"]) == ["1", "2"]
    printed = capsys.readouterr().out
    assert "encoder eager, batch 2:" in printed and "encoder variants: done" in printed
    with pytest.raises(SystemExit):
        bench_whisper.main(["--device", "cpu", "--parts", "modes,everything", "--out", str(out)])


def test_the_ahead_part_runs_the_engine_with_and_without_step_ahead_on_the_same_clips(tmp_path: Path,
                                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert bench_whisper.main(["--device", "cpu", "--config", "tiny", "--clip-seconds", "2", "--batch-sizes", "2",
                               "--parts", "ahead", "--ahead-clips", "5", "--iterations", "2", "--warmup", "0",
                               "--out", str(out)]) == 0
    ahead = json.loads(out.read_text())["stepAhead"]
    assert (ahead["clips"], ahead["slots"], ahead["rounds"]) == (5, 2, 2)
    for side in ("plain", "ahead"):
        assert len(ahead[side]["seconds"]) == 2 and ahead[side]["clipsPerSecond"] > 0
    assert ahead["plain"]["tokens"] == ahead["ahead"]["tokens"], "the same transcripts"
    # Every window's end is read one step later: the engine ahead decodes more steps, at most one a window more.
    assert all(p < a <= p + 5 for p, a in zip(ahead["plain"]["decodeSteps"], ahead["ahead"]["decodeSteps"]))
    assert "step ahead x" in capsys.readouterr().out
