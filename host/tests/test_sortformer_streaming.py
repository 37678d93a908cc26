"""Streaming Sortformer on the CPU (tiny configuration): the windowed front end equals the whole-file
one, the step plan follows NeMo's chunk loader, the result does not depend on how the audio is cut into
items, a batch of sessions equals each session alone, a session continued from its state bytes on a
fresh instance equals an undisturbed one, and the speaker-cache compression on hand-made predictions."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pytest
import torch

from voxmux_host.model_api import ItemFailure, LoadContext, SequenceInput, SequenceOutput
from voxmux_host.models.parakeet.random_init import speech_like_noise
from voxmux_host.models.sortformer.adapter import SortformerAdapter, max_state_bytes
from voxmux_host.models.sortformer.cache import SpeakerContext, compress_contexts, compress_spkcache
from voxmux_host.models.sortformer.config import FULL, PRESETS, TINY, StreamingParams
from voxmux_host.models.sortformer.engine import new_context, plan_step
from voxmux_host.models.sortformer.features import whole_recording_mel, window_mel
from voxmux_host.models.sortformer.model import build_model
from voxmux_host.models.sortformer.postprocess import PostState
from voxmux_host.models.sortformer.session import SessionState
from voxmux_host.protocol import MAX_STATE_BYTES

from sortformer_support import two_batch_outputs

TINY_OPTIONS: Dict[str, Any] = {"config": "tiny", "device": "cpu", "chunkLen": 6, "leftContext": 1,
                                "rightContext": 2, "fifoLen": 8, "spkcacheLen": 16, "updatePeriod": 4}
RATE = 16000


def recording(seconds: float, seed: int) -> npt.NDArray[np.int16]:
    audio = speech_like_noise(seconds, seed) * 32768 * 3
    return np.clip(audio, -32768, 32767).astype(np.int16)


def make_adapter(**extra: Any) -> SortformerAdapter:
    adapter = SortformerAdapter()
    adapter.load(LoadContext("i0", "diar", {**TINY_OPTIONS, **extra}))
    return adapter


def item(session: str, seq: int, audio: npt.NDArray[np.int16], state: Optional[bytes], last: bool,
         options: Optional[Dict[str, Any]] = None) -> SequenceInput:
    return SequenceInput(f"{session}-{seq}", session, seq, audio, state, last, options or {})


def run_session(adapter: SortformerAdapter, audio: npt.NDArray[np.int16], cuts: Sequence[int],
                session: str = "s", state: Optional[bytes] = None, first_seq: int = 0,
                last: bool = True) -> Tuple[List[Dict[str, Any]], bytes]:
    bounds = [0, *cuts, audio.shape[0]]
    outputs = []
    for k in range(len(bounds) - 1):
        is_last = last and k == len(bounds) - 2
        result = adapter.run_sequence([item(session, first_seq + k, audio[bounds[k]:bounds[k + 1]], state,
                                            is_last)])[0]
        assert isinstance(result, SequenceOutput), result
        outputs.append(result.output)
        state = result.state
    assert state is not None
    return outputs, state


def timeline(outputs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every finalized segment of a session, sorted by start (then speaker)."""
    segments = [segment for output in outputs for segment in output["finalized"]]
    return sorted(segments, key=lambda s: (s["start"], s["speaker"]))


def test_windowed_frames_equal_whole_recording_frames() -> None:
    model = build_model(TINY, seed=0)
    featurizer = model.preprocessor.featurizer
    audio = recording(2.37, 1)
    whole = whole_recording_mel(featurizer, audio)
    assert whole.shape == (audio.shape[0] // 160, 128)
    for first, end, start in ((0, 40, 0), (17, 90, 2000), (100, audio.shape[0] // 160, 15000)):
        feats = window_mel(featurizer, audio[start:], start, audio.shape[0], first, end)
        assert feats.shape == (end - first, 128)
        torch.testing.assert_close(feats, whole[first:end], atol=1e-4, rtol=1e-5)


def test_window_needs_the_sample_before_it() -> None:
    audio = recording(1.0, 2)
    featurizer = build_model(TINY, seed=0).preprocessor.featurizer
    with pytest.raises(ValueError, match="Expected audio from sample 6143"):
        window_mel(featurizer, audio[6144:], 6144, audio.shape[0], 40, 50)
    window_mel(featurizer, audio[6143:], 6143, audio.shape[0], 40, 50)


def _nemo_windows(feat_len: int, params: StreamingParams) -> List[Tuple[int, int, int, int]]:
    """NeMo's streaming_feat_loader, paraphrased: (window start, window end, lc, rc) per chunk."""
    out = []
    stt, end = 0, 0
    while end < feat_len:
        left = min(params.left_context * 8, stt)
        end = min(stt + params.chunk_len * 8, feat_len)
        right = min(params.right_context * 8, feat_len - end)
        out.append((stt - left, end + right, round(left / 8), math.ceil(right / 8)))
        stt = end
    return out


@pytest.mark.parametrize("samples", [16000, 16000 * 3 + 37, 25 * 160 * 8 + 5])
def test_step_plan_of_a_whole_recording_follows_nemo(samples: int) -> None:
    params = StreamingParams(chunk_len=6, left_context=1, right_context=2, fifo_len=8, spkcache_len=16,
                             update_period=4)
    state = SessionState(fingerprint="f", context=new_context(TINY, torch.float32), post=PostState(4),
                         samples=samples, finished=True)
    got = []
    while True:
        window = plan_step(state, TINY, params)
        if window is None:
            break
        got.append((window.first_frame, window.end_frame, window.left, window.right))
        state.steps += 1
    assert got == _nemo_windows(samples // 160, params)


def test_a_step_waits_for_its_right_context() -> None:
    params = PRESETS["chunk-15s"]
    state = SessionState(fingerprint="f", context=new_context(FULL, torch.float32), post=PostState(4),
                         samples=15 * RATE)
    window = plan_step(state, FULL, params)
    assert window is not None and (window.first_frame, window.end_frame) == (0, 187 * 8)
    state.samples = 187 * 8 * 160 + 255
    state.steps = 0
    assert plan_step(state, FULL, params) is not None
    state.samples = 187 * 8 * 160 - 160 + 255
    assert plan_step(state, FULL, params) is None


def test_results_do_not_depend_on_how_the_audio_is_cut() -> None:
    adapter = make_adapter()
    audio = recording(9.0, 3)
    whole, whole_state = run_session(adapter, audio, [])
    pieces, pieces_state = run_session(adapter, audio, [3000, 3001, 40000, 81234, 110000])
    assert timeline(whole) == timeline(pieces)
    assert whole[-1]["speakers"] == pieces[-1]["speakers"]
    assert whole_state == pieces_state


def test_a_batch_of_sessions_equals_each_session_alone() -> None:
    adapter = make_adapter()
    audios = [recording(7.0, 10), recording(4.3, 11), recording(9.1, 12)]
    cuts = [[40000, 80000], [30000, 50000], [20000, 100000]]
    alone = [run_session(adapter, a, c, session=f"s{i}")[0] for i, (a, c) in enumerate(zip(audios, cuts))]
    together: List[List[Dict[str, Any]]] = [[] for _ in audios]
    states: List[Optional[bytes]] = [None] * len(audios)
    for k in range(3):
        batch = []
        for i, (a, c) in enumerate(zip(audios, cuts)):
            bounds = [0, *c, a.shape[0]]
            batch.append(item(f"s{i}", k, a[bounds[k]:bounds[k + 1]], states[i], k == 2))
        results = adapter.run_sequence(batch)
        for i, result in enumerate(results):
            assert isinstance(result, SequenceOutput)
            together[i].append(result.output)
            states[i] = result.state
    assert adapter._require_engine().counters.largest_batch == 3
    for i in range(len(audios)):
        assert timeline(together[i]) == timeline(alone[i])


def test_the_next_batch_beginning_before_this_one_finishes_changes_nothing() -> None:
    """begin_sequence runs every forward pass and leaves the last round's updates to its finish, which the
    host calls on another thread while the next batch (other sessions) begins: interleaved as the host
    does it, each session's outputs and states equal those of one batch run after the other, for chunks
    of several steps (rounds before the last updated in begin) and for last items (the tail flushed)."""
    audios = [recording(7.0, 30), recording(5.2, 31), recording(6.1, 32), recording(4.4, 33)]
    cuts = [[40000, 80000], [30000, 50000], [20000, 70000], [25000, 45000]]
    chunks = [[a[lo:hi] for lo, hi in zip([0, *c], [*c, a.shape[0]])] for a, c in zip(audios, cuts)]
    assert (two_batch_outputs(make_adapter(seed=3), chunks, 2, interleaved=True)
            == two_batch_outputs(make_adapter(seed=3), chunks, 2, interleaved=False))


def test_batched_step_predictions_equal_single_ones() -> None:
    adapter = make_adapter()
    engine = adapter._require_engine()

    def fresh(audio: npt.NDArray[np.int16]) -> SessionState:
        return SessionState(fingerprint="f", context=new_context(TINY, torch.float32), post=PostState(4),
                            samples=audio.shape[0], pending=audio.copy(), finished=True)

    audios = [recording(5.0, 20), recording(3.1, 21), recording(6.4, 22)]
    together = engine.run([fresh(a) for a in audios])
    for audio, batched in zip(audios, together):
        single = engine.run([fresh(audio)])[0]
        assert len(single) == len(batched)
        for a, b in zip(single, batched):
            np.testing.assert_allclose(a, b, atol=1e-5)


def test_state_restored_on_a_fresh_instance_equals_continuing_in_place() -> None:
    audio = recording(12.0, 4)
    cuts = [30000, 70000, 120000, 150000]
    undisturbed, final_state = run_session(make_adapter(), audio, cuts)
    first, state = run_session(make_adapter(), audio[:70000], cuts[:1], last=False)
    rest, resumed_state = run_session(make_adapter(), audio[70000:], [c - 70000 for c in cuts[2:]],
                                      state=state, first_seq=2)
    assert first + rest == undisturbed
    assert resumed_state == final_state
    assert any(o["finalized"] or o["provisional"] for o in undisturbed)


def test_session_state_stays_within_its_bound() -> None:
    adapter = make_adapter()
    _, state = run_session(adapter, recording(6.0, 5), [50000], last=False)
    params = adapter._params
    assert params is not None
    assert len(state) <= max_state_bytes(TINY, params, torch.float32)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_preset_fits_the_state_limit_for_the_full_model(preset: str, dtype: torch.dtype) -> None:
    assert max_state_bytes(FULL, PRESETS[preset], dtype) <= MAX_STATE_BYTES


def test_compression_keeps_the_best_frames_by_speaker_then_time() -> None:
    params = StreamingParams(chunk_len=4, left_context=0, right_context=0, fifo_len=0, spkcache_len=16,
                             update_period=4)
    n = 24
    preds = torch.zeros(n, 4)
    preds[0:6, 1] = 0.95  # speaker 1 first (clean)
    preds[6:12, 0] = 0.9  # then speaker 0 (clean)
    preds[12:14, 0] = 0.9
    preds[12:14, 1] = 0.9  # overlap: low scores
    preds[20:22, 2] = 0.8
    embs = torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, 3)
    mean_sil = torch.full((3,), -1.0)
    kept, kept_preds = compress_spkcache(embs, preds, mean_sil, params)
    assert kept.shape == (16, 3) and kept_preds.shape == (16, 4)
    # per speaker: (16 // 4 - 3) = 1 frame, then 3 silence frames; speaker 0's block comes first
    rows = kept[:, 0].tolist()
    assert rows[:4] == [6.0, -1.0, -1.0, -1.0] or rows[0] in (6.0, 7.0, 8.0, 9.0, 10.0, 11.0)
    speaker_of_row = [int(torch.argmax(p)) if float(p.max()) > 0 else -1 for p in kept_preds]
    real = [s for s in speaker_of_row if s >= 0]
    assert real == sorted(real)  # ordered by speaker
    assert set(real) == {0, 1, 2}
    assert int((kept[:, 0] == -1.0).sum()) == 16 - len(real)
    assert torch.all(kept_preds[kept[:, 0] == -1.0] == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_caches_compressed_together_equal_each_compressed_alone(dtype: torch.dtype) -> None:
    """compress_contexts chooses the kept frames of equal-length caches together and copies each cache's own
    rows: the result is the single-cache compression's, bit for bit, for every cache of the group."""
    params = PRESETS["chunk-15s"]
    generator = torch.Generator().manual_seed(3)
    contexts = []
    for i, n in enumerate([374, 374, 374, 300, 188]):
        turns = torch.randint(0, 4, (n // 20 + 1,), generator=generator).repeat_interleave(20)[:n]
        preds = torch.nn.functional.one_hot(turns, 4).float() * torch.rand(n, 1, generator=generator)
        preds += torch.rand(n, 4, generator=generator) * 0.3 * (i % 2)  # some overlap in every other cache
        contexts.append(SpeakerContext(torch.randn(n, 8, generator=generator).to(dtype), preds,
                                       torch.zeros(0, 8, dtype=dtype), torch.zeros(0, 4),
                                       torch.randn(8, generator=generator), 5, False))
    compressed = compress_contexts(contexts, params)
    for before, after in zip(contexts, compressed):
        if before.spkcache.shape[0] <= params.spkcache_len:
            assert after is before  # nothing to compress
            continue
        kept, kept_preds = compress_spkcache(before.spkcache, before.spkcache_preds, before.mean_sil_emb, params)
        assert after.compressed and after.spkcache.dtype == dtype
        assert after.spkcache.shape == (params.spkcache_len, 8)
        assert torch.equal(after.spkcache.view(torch.int16) if dtype == torch.bfloat16 else after.spkcache,
                           kept.view(torch.int16) if dtype == torch.bfloat16 else kept)
        assert torch.equal(after.spkcache_preds, kept_preds)
        silence = after.spkcache_preds.sum(dim=1) == 0
        assert bool(silence.any())  # the silence frames per speaker take the silence profile
        assert torch.equal(after.spkcache[silence].float(), before.mean_sil_emb.to(dtype).float().expand(
            int(silence.sum()), 8))


def test_long_session_compresses_its_cache_and_keeps_the_limits() -> None:
    adapter = make_adapter(seed=1)
    audio = recording(20.0, 6)
    bounds = list(range(0, audio.shape[0], 48000))[1:]
    _, data = run_session(adapter, audio, bounds, last=False)
    state = SessionState.from_bytes(data, adapter._fingerprint, 4)
    params = adapter._params
    assert params is not None
    assert state.context.spkcache.shape[0] == params.spkcache_len
    assert state.context.fifo.shape[0] <= params.fifo_len
    assert state.context.compressed


def failure_codes(results: Sequence[Union[SequenceOutput, ItemFailure]]) -> List[Optional[str]]:
    return [r.code if isinstance(r, ItemFailure) else None for r in results]


def test_fifo_pops_what_nemo_pops_when_the_update_period_is_shorter_than_a_chunk() -> None:
    """NeMo's streaming_update (and streaming_update_async) pops
    min(fifo + chunk, max(spkcache_update_period, fifo + chunk - fifo_len)) frames: the raw update period,
    only the warning in _check_streaming_parameters speaks of an effective [chunk_len, fifo_len +
    chunk_len] range. With chunkLen 4, fifoLen 10, updatePeriod 2 the FIFO fills 4, 8, then 12 > 10:
    NeMo pops 2 (FIFO 10, cache 2); clamping the period to the chunk would pop 4 (FIFO 8, cache 4), and
    the FIFO would then stay 2 frames short of fifoLen for the whole session."""
    from voxmux_host.models.sortformer.cache import update_context
    params = StreamingParams(chunk_len=4, left_context=0, right_context=0, fifo_len=10, spkcache_len=16,
                             update_period=2)
    ctx = SpeakerContext.empty(2, 4, torch.float32)
    sizes = []
    for step in range(5):
        n = ctx.spkcache.shape[0] + ctx.fifo.shape[0] + 4
        preds = torch.full((n, 4), 0.1)
        embs = torch.full((4, 2), float(step))
        ctx, _ = update_context(ctx, preds, embs, 0, 4, params)
        sizes.append((ctx.spkcache.shape[0], ctx.fifo.shape[0]))
    assert sizes == [(0, 4), (0, 8), (2, 10), (6, 10), (10, 10)]
