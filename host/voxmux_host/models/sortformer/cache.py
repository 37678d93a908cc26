"""The speaker cache and FIFO of one session, updated after each step (NeMo's ``streaming_update_async``
for one item, with the arrival-order speaker-cache compression ``_compress_spkcache``).

The update runs on the CPU in float32 on small tensors (at most a few hundred frames): the session state
has to come back to the host after every step anyway, and CPU arithmetic keeps the result independent of
the device and of the batch the step ran in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Tuple

import torch

from .config import StreamingParams

#: Score of an unusable frame (non-speech, or overlapped speech of a speaker with enough clean frames).
DISABLED = float("-inf")


@dataclass
class SpeakerContext:
    """Speaker cache and FIFO: embeddings (the pre-encode outputs, in the storage dtype) and their
    predictions (float32). ``compressed``: the cache was compressed at least once, so its predictions are
    its own; before that they are refreshed from every step."""

    spkcache: torch.Tensor  # [Lc, D]
    spkcache_preds: torch.Tensor  # [Lc, S]
    fifo: torch.Tensor  # [Lf, D]
    fifo_preds: torch.Tensor  # [Lf, S]
    mean_sil_emb: torch.Tensor  # [D] float32
    n_sil_frames: int
    compressed: bool

    @staticmethod
    def empty(d_model: int, n_speakers: int, dtype: torch.dtype) -> "SpeakerContext":
        return SpeakerContext(
            spkcache=torch.zeros(0, d_model, dtype=dtype),
            spkcache_preds=torch.zeros(0, n_speakers),
            fifo=torch.zeros(0, d_model, dtype=dtype),
            fifo_preds=torch.zeros(0, n_speakers),
            mean_sil_emb=torch.zeros(d_model),
            n_sil_frames=0,
            compressed=False,
        )

    def packed(self) -> torch.Tensor:
        """[Lc + Lf, D]: the context a step sees before its chunk."""
        return torch.cat((self.spkcache, self.fifo), dim=0)


def update_context(
    ctx: SpeakerContext,
    preds: torch.Tensor,
    chunk_embs: torch.Tensor,
    left: int,
    core: int,
    params: StreamingParams,
    compress: bool = True,
) -> Tuple[SpeakerContext, torch.Tensor]:
    """Apply one step to one session.

    preds [>= Lc + Lf + left + core, S] float32: the step's predictions over [cache | FIFO | chunk];
    chunk_embs [>= left + core, D]: the chunk's pre-encode embeddings (with its left context).
    Returns the new context and the chunk core's predictions [core, S]. With ``compress=False`` a cache
    that outgrew ``spkcache_len`` is left for :func:`compress_contexts` (which compresses many at once).
    """
    lc, lf = ctx.spkcache.shape[0], ctx.fifo.shape[0]
    preds = preds.float()
    chunk_preds = preds[lc + lf + left : lc + lf + left + core].clone()
    fifo = _cat_rows(ctx.fifo, chunk_embs[left : left + core].to(ctx.fifo.dtype))
    fifo_preds = torch.cat((preds[lc : lc + lf], chunk_preds), dim=0)
    spkcache, spkcache_preds = ctx.spkcache, ctx.spkcache_preds
    if not ctx.compressed:
        spkcache_preds = preds[:lc].clone()
    mean_sil, n_sil = ctx.mean_sil_emb, ctx.n_sil_frames
    compressed = ctx.compressed
    if fifo.shape[0] > params.fifo_len:
        # NeMo's streaming_update: the raw update period, raised to the overflow and capped at the whole
        # FIFO. (Its parameter check warns of an "effective" period clamped into [chunk_len, fifo_len +
        # chunk_len], but the pop does not clamp: a period under the chunk pops just the period, or the
        # overflow when that is more.)
        n = fifo.shape[0]
        pop = min(max(params.update_period, n - params.fifo_len), n)
        popped, popped_preds = fifo[:pop], fifo_preds[:pop]
        fifo, fifo_preds = fifo[pop:], fifo_preds[pop:]
        mean_sil, n_sil = update_silence_profile(mean_sil, n_sil, popped, popped_preds, params.sil_threshold)
        spkcache = _cat_rows(spkcache, popped)
        spkcache_preds = torch.cat((spkcache_preds, popped_preds), dim=0)
        if compress and spkcache.shape[0] > params.spkcache_len:
            spkcache, spkcache_preds = compress_spkcache(spkcache, spkcache_preds, mean_sil, params)
            compressed = True
    new = SpeakerContext(spkcache.contiguous(), spkcache_preds.contiguous(), fifo.contiguous(),
                         fifo_preds.contiguous(), mean_sil, n_sil, compressed)
    return new, chunk_preds


def update_silence_profile(
    mean: torch.Tensor, count: int, embs: torch.Tensor, preds: torch.Tensor, threshold: float
) -> Tuple[torch.Tensor, int]:
    """Running mean of the embeddings of frames whose summed speaker probability is below ``threshold``."""
    is_sil = preds.sum(dim=1) < threshold
    n_new = int(is_sil.sum())
    if n_new == 0:
        return mean, count
    total = mean * count + embs[is_sil].float().sum(dim=0)
    return total / (count + n_new), count + n_new


def log_pred_scores(preds: torch.Tensor, threshold: float) -> torch.Tensor:
    """High for confident single-speaker frames: log p_k - log(1 - p_k) + sum_j log(1 - p_j) - log 0.5
    (speakers on the last dimension)."""
    log_p = torch.log(preds.clamp(min=threshold))
    log_1p = torch.log((1.0 - preds).clamp(min=threshold))
    return log_p - log_1p + log_1p.sum(dim=-1, keepdim=True) - math.log(0.5)


def compress_contexts(contexts: List[SpeakerContext], params: StreamingParams) -> List[SpeakerContext]:
    """Compress every cache longer than ``spkcache_len``: the frames to keep are chosen for caches of equal
    length together (from their predictions), then each cache copies its own kept rows."""
    out = list(contexts)
    groups: Dict[int, List[int]] = {}
    for i, ctx in enumerate(contexts):
        if ctx.spkcache.shape[0] > params.spkcache_len:
            groups.setdefault(ctx.spkcache.shape[0], []).append(i)
    for indices in groups.values():
        frames, disabled = kept_frames(torch.stack([contexts[i].spkcache_preds for i in indices]), params)
        for row, i in enumerate(indices):
            ctx = contexts[i]
            kept, kept_preds = _take_frames(ctx.spkcache, ctx.spkcache_preds, ctx.mean_sil_emb, frames[row],
                                            disabled[row])
            out[i] = SpeakerContext(kept, kept_preds, ctx.fifo, ctx.fifo_preds, ctx.mean_sil_emb, ctx.n_sil_frames,
                                    True)
    return out


def compress_spkcache(
    embs: torch.Tensor, preds: torch.Tensor, mean_sil: torch.Tensor, params: StreamingParams
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Keep ``spkcache_len`` of N frames, ordered by speaker (0, 1, ...) and by time within a speaker;
    silence placeholders take the mean silence embedding and zero predictions."""
    frames, disabled = kept_frames(preds.unsqueeze(0), params)
    return _take_frames(embs, preds, mean_sil, frames[0], disabled[0])


def kept_frames(preds: torch.Tensor, params: StreamingParams) -> Tuple[torch.Tensor, torch.Tensor]:
    """Which frames :func:`compress_spkcache` keeps, for G caches of N frames each: preds [G, N, S] ->
    (frames [G, spkcache_len], the source frame of each kept row; disabled [G, spkcache_len], rows that
    take the silence profile instead)."""
    groups, n_frames, n_spk = preds.shape
    per_spk = params.spkcache_len // n_spk - params.sil_frames_per_spk
    strong = math.floor(per_spk * params.strong_boost_rate)
    weak = math.floor(per_spk * params.weak_boost_rate)
    min_pos = math.floor(per_spk * params.min_pos_scores_rate)

    scores = log_pred_scores(preds, params.pred_score_threshold)
    is_speech = preds > 0.5
    scores = torch.where(is_speech, scores, torch.full_like(scores, DISABLED))
    is_pos = scores > 0
    replace = (~is_pos) & is_speech & (is_pos.sum(dim=1, keepdim=True) >= min_pos)
    scores = torch.where(replace, torch.full_like(scores, DISABLED), scores)
    if params.scores_boost_latest > 0:
        scores[:, params.spkcache_len :] += params.scores_boost_latest
    scores = _boost_topk(scores, strong, 2.0)
    scores = _boost_topk(scores, weak, 1.0)
    if params.sil_frames_per_spk > 0:
        pad = torch.full((groups, params.sil_frames_per_spk, n_spk), float("inf"))
        scores = torch.cat((scores, pad), dim=1)
    padded_frames = scores.shape[1]
    flat = scores.transpose(1, 2).reshape(groups, -1)  # speaker-major: index = k * padded_frames + t
    top = _desc_order(flat, dim=1)[:, : params.spkcache_len]
    valid = torch.gather(flat, 1, top) != DISABLED
    top = torch.where(valid, top, torch.full_like(top, _PLACEHOLDER))
    top = torch.sort(top, dim=1).values
    disabled = top == _PLACEHOLDER
    frame = torch.remainder(top, padded_frames)
    disabled = disabled | (frame >= n_frames)
    frame = torch.where(disabled, torch.zeros_like(frame), frame)
    return frame, disabled


def _take_frames(embs: torch.Tensor, preds: torch.Tensor, mean_sil: torch.Tensor, frames: torch.Tensor,
                 disabled: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """One cache's kept rows: embs [N, D] and preds [N, S] at ``frames``, the rows ``disabled`` replaced by
    the silence profile ``mean_sil`` [D] and zero predictions."""
    kept = _bits(embs).index_select(0, frames)
    kept[disabled] = _bits(mean_sil.to(embs.dtype))
    kept_preds = preds.index_select(0, frames)
    kept_preds[disabled] = 0.0
    return kept.view(embs.dtype), kept_preds


_PLACEHOLDER = 1 << 40


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """A 16-bit float tensor as its bit patterns (int16), on which the CPU copies and gathers fast; other
    dtypes as they are."""
    return tensor.view(torch.int16) if tensor.dtype in (torch.bfloat16, torch.float16) else tensor


def _cat_rows(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    return torch.cat((_bits(first), _bits(second)), dim=0).view(first.dtype)


def _boost_topk(scores: torch.Tensor, k: int, scale: float) -> torch.Tensor:
    """Add ``-scale * log 0.5`` to each speaker's ``k`` best frames (-inf stays -inf); scores [G, N, S]."""
    if k <= 0:
        return scores
    k = min(k, scores.shape[1])
    order = _desc_order(scores, dim=1)[:, :k]
    boosted = scores.clone()
    boosted.scatter_add_(1, order, torch.full(order.shape, -scale * math.log(0.5)))
    return boosted


def _desc_order(values: torch.Tensor, dim: int) -> torch.Tensor:
    """Indices from the highest value down along ``dim``; ties by lower index (deterministic)."""
    order: torch.Tensor = torch.sort(-values, dim=dim, stable=True).indices
    return order
