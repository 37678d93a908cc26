"""The sortformer adapter behind the sequence contract (tiny configuration on the CPU): the output shape
of the diarization engine contract, speaker ids in order of first appearance, maxSpeakers, per-item
failures that leave the other items and the session usable, option checking, the registry and the
documented options."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from voxmux_host.errors import InstanceError
from voxmux_host.model_api import ItemFailure, LoadContext, SequenceAdapter, SequenceOutput
from voxmux_host.models.sortformer.adapter import DEFAULT_OPTIONS, SortformerAdapter, graph_batch_sizes
from voxmux_host.registry import create_adapter

from test_sortformer_streaming import TINY_OPTIONS, item, make_adapter, recording, run_session

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters.md"


def test_registry_builds_a_sequence_adapter() -> None:
    adapter = create_adapter("sortformer")
    assert isinstance(adapter, SortformerAdapter)
    assert isinstance(adapter, SequenceAdapter)
    assert adapter.work_kinds == ("sequence",)


def _start(segment: Dict[str, Any]) -> float:
    return float(segment["start"])


def _check_segments(segments: List[Dict[str, Any]]) -> None:
    assert [s["start"] for s in segments] == sorted(s["start"] for s in segments)
    for s in segments:
        assert set(s) == {"start", "end", "speaker"}
        assert isinstance(s["speaker"], int) and s["speaker"] >= 0
        assert 0.0 <= s["start"] < s["end"]


def test_output_follows_the_engine_contract() -> None:
    outputs, _ = run_session(make_adapter(seed=2), recording(10.0, 7), [40000, 80000, 120000])
    seen: List[int] = []
    timeline: List[Dict[str, Any]] = []
    for output in outputs:
        assert set(output) == {"finalized", "provisional", "speakers"}
        _check_segments(output["finalized"])
        _check_segments(output["provisional"])
        for s in sorted(output["finalized"] + output["provisional"], key=_start):
            if s["speaker"] not in seen:
                seen.append(s["speaker"])
        assert output["speakers"] >= len({s["speaker"] for s in output["finalized"]})
        timeline.extend(output["finalized"])
    assert outputs[-1]["provisional"] == []
    assert timeline, "the random model should produce some speech"
    first_seen: List[int] = []
    for s in sorted(timeline, key=_start):
        if s["speaker"] not in first_seen:
            first_seen.append(s["speaker"])
    assert first_seen == list(range(len(first_seen)))  # ids in order of first appearance
    assert outputs[-1]["speakers"] == len(first_seen)
    for speaker in first_seen:
        mine = sorted((s for s in timeline if s["speaker"] == speaker), key=_start)
        assert all(a["end"] <= b["start"] for a, b in zip(mine, mine[1:]))


def test_stats_time_each_stage_of_a_step() -> None:
    adapter = make_adapter(seed=2)
    assert adapter.stats().stage_ms == {}
    run_session(adapter, recording(10.0, 7), [40000, 80000, 120000])
    stage_ms = adapter.stats().stage_ms
    assert set(stage_ms) == {"prepare", "stage", "forward", "update", "finish"}
    assert all(ms >= 0.0 for ms in stage_ms.values()) and stage_ms["forward"] > 0.0


def test_max_speakers_caps_the_speakers() -> None:
    adapter = make_adapter(seed=2)
    audio = recording(6.0, 7)
    result = adapter.run_sequence([item("s", 0, audio, None, True, {"maxSpeakers": 1, "minSpeakers": 1,
                                                                     "chunkOffsetS": 0.0})])[0]
    assert isinstance(result, SequenceOutput)
    assert {s["speaker"] for s in result.output["finalized"]} <= {0}
    assert result.output["speakers"] <= 1


def test_bad_items_fail_alone_and_leave_the_session_usable() -> None:
    adapter = make_adapter()
    audio = recording(3.0, 8)
    first = adapter.run_sequence([item("a", 0, audio, None, False)])[0]
    assert isinstance(first, SequenceOutput)
    results = adapter.run_sequence([
        item("a", 1, audio.astype(np.float32), first.state, False),  # type: ignore[arg-type]
        item("b", 0, np.zeros(61 * 16000, dtype=np.int16), None, False),
        item("c", 1, audio, first.state, False, {"chunkOffsetS": 1.0}),
        item("d", 1, audio, b"garbage", False),
        item("e", 0, audio, None, False, {"maxSpeakers": 0}),
        item("f", 0, audio, None, True),
        item("g", 0, audio, None, True, {"chunkOffsetS": "soon"}),
    ])
    codes = [r.code if isinstance(r, ItemFailure) else None for r in results]
    assert codes == ["invalid_audio", "invalid_audio", "unsupported_option", "session_state_missing",
                     "unsupported_option", None, "unsupported_option"]
    messages = [r.message for r in results if isinstance(r, ItemFailure)]
    assert "int16" in messages[0] and "at most 60 s" in messages[1] and "at least 3 s" in messages[2]
    again = adapter.run_sequence([item("a", 1, audio, first.state, True)])[0]
    assert isinstance(again, SequenceOutput)


def test_a_state_from_another_configuration_is_refused() -> None:
    audio = recording(2.0, 9)
    first = make_adapter().run_sequence([item("a", 0, audio, None, False)])[0]
    assert isinstance(first, SequenceOutput)
    other = make_adapter(seed=5).run_sequence([item("a", 1, audio, first.state, True)])[0]
    assert isinstance(other, ItemFailure) and other.code == "session_state_missing"
    assert "another configuration" in other.message


def test_an_empty_whole_file_gives_an_empty_timeline() -> None:
    result = make_adapter().run_sequence([item("a", 0, np.zeros(0, dtype=np.int16), None, True)])[0]
    assert isinstance(result, SequenceOutput)
    assert result.output == {"finalized": [], "provisional": [], "speakers": 0}


def test_an_ended_session_takes_no_more_items() -> None:
    adapter = make_adapter()
    audio = recording(1.0, 9)
    done = adapter.run_sequence([item("a", 0, audio, None, True)])[0]
    assert isinstance(done, SequenceOutput)
    after = adapter.run_sequence([item("a", 1, audio, done.state, True)])[0]
    assert isinstance(after, ItemFailure) and "already ended" in after.message


@pytest.mark.parametrize(
    "options, message",
    [
        ({"colour": 1}, "Unknown sortformer option"),
        ({"config": "huge"}, "Expected config"),
        ({"preset": "fast"}, "Expected preset"),
        ({"chunkLen": 0}, "chunk_len must be >= 1"),
        ({"spkcacheLen": 8}, "spkcache_len must be >= "),
        ({"onset": 2}, "onset must be within"),
        ({"maxBatchSize": 0}, "maxBatchSize"),
        ({"dtype": "int8"}, "Expected dtype"),
        ({"device": "tpu"}, "Expected device"),
        ({"compileHead": "yes"}, "Expected compileHead to be true or false"),
        ({"chunkLen": 2000, "config": "full"}, "over the 1048576 allowed"),
    ],
)
def test_invalid_options_fail_the_load(options: Dict[str, Any], message: str) -> None:
    with pytest.raises(InstanceError) as caught:
        SortformerAdapter().load(LoadContext("i0", "diar", {**TINY_OPTIONS, **options}))
    assert caught.value.code == "load_failed"
    assert message in caught.value.message


def test_load_reports_facts_and_warmup_captures_nothing_on_cpu() -> None:
    adapter = SortformerAdapter()
    info = adapter.load(LoadContext("i0", "diar", dict(TINY_OPTIONS)))
    assert info.device == "cpu" and info.parameters > 0
    assert getattr(info, "dtype") == "fp32" and getattr(info, "weights") == "random"
    assert adapter.warmup().graphs_captured == 0
    assert adapter.probe()
    adapter.close()


@pytest.mark.parametrize("max_batch_size, sizes", [
    (1, [1]), (2, [1, 2]), (5, [1, 2, 3, 4, 5]), (8, [1, 2, 3, 4, 6, 8]),
    (64, [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]), (100, [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 100]),
])
def test_graphs_are_captured_for_powers_of_two_and_one_and_a_half_times_each(max_batch_size: int,
                                                                               sizes: List[int]) -> None:
    assert graph_batch_sizes(max_batch_size) == sizes
    # Every batch up to the largest runs at a captured size at most about 1.5 times its own.
    for batch in range(2, max_batch_size + 1):
        assert min(s for s in sizes if s >= batch) <= 1.5 * batch


def test_every_option_is_documented_and_nothing_else() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## `sortformer`", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `([A-Za-z]+)` \|", section, flags=re.MULTILINE)) == set(DEFAULT_OPTIONS)


def test_a_failed_chunk_still_counts_in_the_session_clock() -> None:
    """The engine contract (docs/adapters.md, Diarization) gives every item ``chunkOffsetS``, the chunk's
    start in the session (the sum of the earlier chunks' durations), and docs/operations.md says a chunk
    that fails leaves the state as it was with "the failed chunk's audio counted in the offsets but not
    in the timeline": the next chunk's segments start at its offset (timing them by the audio the state
    has had would place them a failed chunk's length early). The failed audio is heard as silence: the
    timeline is that of the session whose second chunk was silent."""
    adapter = make_adapter(seed=2)
    audio = recording(6.0, 7)
    first = adapter.run_sequence([item("s", 0, audio[:48000], None, False, {"chunkOffsetS": 0.0})])[0]
    assert isinstance(first, SequenceOutput)
    failed = adapter.run_sequence([item("s", 1, np.zeros(48000, np.float32), first.state, False,  # type: ignore[arg-type]
                                        {"chunkOffsetS": 3.0})])[0]
    assert isinstance(failed, ItemFailure)
    last = adapter.run_sequence([item("s", 2, audio[48000:], first.state, True, {"chunkOffsetS": 6.0})])[0]
    assert isinstance(last, SequenceOutput)
    segments = first.output["finalized"] + last.output["finalized"]
    assert segments, "the random model should produce some speech"
    assert max(s["end"] for s in segments) == 9.04  # the end of the 113th frame: 9 s of session
    silent = np.concatenate((audio[:48000], np.zeros(48000, np.int16), audio[48000:]))
    outputs, _ = run_session(make_adapter(seed=2), silent, [48000, 96000])
    assert segments == [s for output in outputs for s in output["finalized"]]


def test_an_item_after_failed_first_items_starts_the_session_at_its_offset() -> None:
    """Without a checkpoint (the session's first items all failed) the scheduler sends the next item with
    no state: it starts the session, its audio placed at chunkOffsetS."""
    audio = recording(6.0, 7)
    late = make_adapter(seed=2).run_sequence([item("s", 1, audio[48000:], None, True, {"chunkOffsetS": 3.0})])[0]
    assert isinstance(late, SequenceOutput)
    silent = np.concatenate((np.zeros(48000, np.int16), audio[48000:]))
    whole = make_adapter(seed=2).run_sequence([item("s", 0, silent, None, True, {"chunkOffsetS": 0.0})])[0]
    assert isinstance(whole, SequenceOutput)
    assert late.output == whole.output
