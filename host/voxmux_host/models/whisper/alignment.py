"""Word timestamps from the decoder's cross-attention, as OpenAI's ``timing.find_alignment`` does: the
attention of the alignment heads (here the heads of the decoder's second half, OpenAI's default where a
checkpoint names none) from each text token to the audio frames, normalised per head, median-filtered
and averaged, then a dynamic-time-warping path through it; each word starts where its first token's row
first advances on the path."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from .config import TIME_PRECISION
from .model import WhisperModel
from .tokenizer import WhisperTokenizer

MEDIAN_FILTER_WIDTH = 7


def cross_attention_weights(model: WhisperModel, tokens: torch.Tensor, xa: torch.Tensor) -> torch.Tensor:
    """The cross-attention weights of the second half of the decoder's layers for one sequence:
    tokens [T], audio features [1500, D] -> [layers * heads, T, 1500] (float32)."""
    decoder = model.decoder
    length = tokens.shape[0]
    x = (decoder.token_embedding(tokens[None]) + decoder.positional_embedding[:length]).to(xa.dtype)
    causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
    first = len(decoder.blocks) // 2
    collected: List[torch.Tensor] = []
    for index, block in enumerate(decoder.blocks):
        x = x + block.attn(block.attn_ln(x), mask=causal)
        cross = block.cross_attn
        h = block.cross_attn_ln(x)
        q, k, v = cross.heads(cross.query(h)), cross.heads(cross.key(xa[None])), cross.heads(cross.value(xa[None]))
        weights = torch.softmax((q @ k.transpose(-1, -2)).float() * (q.shape[-1] ** -0.5), dim=-1)
        if index >= first:
            collected.append(weights[0])
        x = x + cross.merge(weights.to(v.dtype) @ v)
        x = x + block.mlp(block.mlp_ln(x))
    return torch.cat(collected, dim=0)


def median_filter(x: torch.Tensor, width: int) -> torch.Tensor:
    """Median over the last axis, window ``width`` (odd), reflect-padded."""
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    rows = x.reshape(-1, 1, x.shape[-1])  # reflect padding of the last axis takes [N, C, W]
    padded = F.pad(rows, (pad, pad), mode="reflect").reshape(*x.shape[:-1], x.shape[-1] + 2 * pad)
    filtered: torch.Tensor = padded.unfold(-1, width, 1).median(dim=-1).values
    return filtered


def dtw(cost: npt.NDArray[np.float64]) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The cheapest monotonic path through ``cost`` [N, M] from (0, 0) to (N-1, M-1): its row and column
    indices."""
    n, m = cost.shape
    inf = float("inf")
    total = [[inf] * (m + 1) for _ in range(n + 1)]  # plain lists: a Python loop over numpy scalars is slower
    total[0][0] = 0.0
    trace = np.zeros((n + 1, m + 1), dtype=np.int8)
    values = cost.tolist()
    for i in range(1, n + 1):
        above, row, costs = total[i - 1], total[i], values[i - 1]
        for j in range(1, m + 1):
            diagonal, up, left = above[j - 1], above[j], row[j - 1]
            if diagonal <= up and diagonal <= left:
                best, choice = diagonal, 0
            elif up <= left:
                best, choice = up, 1
            else:
                best, choice = left, 2
            row[j] = costs[j - 1] + best
            trace[i, j] = choice
    i, j = n, m
    rows: List[int] = []
    cols: List[int] = []
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        step = trace[i, j]
        if step == 0:
            i, j = i - 1, j - 1
        elif step == 1:
            i -= 1
        else:
            j -= 1
    return np.array(rows[::-1], dtype=np.int64), np.array(cols[::-1], dtype=np.int64)


def split_words(tokenizer: WhisperTokenizer, tokens: Sequence[int]) -> List[List[int]]:
    """Tokens grouped into words: a word starts at a token whose text begins with a space."""
    words: List[List[int]] = []
    for token in tokens:
        text = tokenizer.decode([token])
        if not words or text.startswith(" "):
            words.append([token])
        else:
            words[-1].append(token)
    return words


def word_times(model: WhisperModel, tokenizer: WhisperTokenizer, prefix: Sequence[int], text_tokens: Sequence[int],
               features: torch.Tensor, frames: int) -> List[Tuple[str, float, float]]:
    """(word, start, end) in seconds from the window's start, for the window's text tokens decoded after
    ``prefix`` (its start-of-transcript sequence); ``frames``: mel frames of audio in the window."""
    if not text_tokens:
        return []
    sequence = [*prefix, tokenizer.no_timestamps, *text_tokens, tokenizer.eot]
    tokens = torch.tensor(sequence, device=features.device)
    with torch.no_grad():
        weights = cross_attention_weights(model, tokens, features)[:, :, : max(frames // 2, 1)]
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std.clamp(min=1e-9), MEDIAN_FILTER_WIDTH)
    matrix = weights.mean(dim=0)[len(prefix) + 1:-1]  # the text tokens and end-of-text
    rows, cols = dtw(-matrix.double().cpu().numpy())
    jumps = np.diff(rows, prepend=-1).astype(bool)
    times = cols[jumps] * TIME_PRECISION  # where each token row starts on the path
    words = split_words(tokenizer, text_tokens)
    out: List[Tuple[str, float, float]] = []
    position = 0
    for word in words:
        start = float(times[position])
        position += len(word)
        end = float(times[position]) if position < len(times) else start
        out.append((tokenizer.decode(word).strip(), round(start, 3), round(max(end, start), 3)))
    return [w for w in out if w[0]]
