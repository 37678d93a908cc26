"""Word timestamps from the decoder's cross-attention, as OpenAI's ``timing.find_alignment`` does: the
attention of the alignment heads (here the heads of the decoder's second half, OpenAI's default where a
checkpoint names none) from the rows that predict each text token and end-of-text to the audio's frames,
normalised per head, median-filtered and averaged, then a dynamic-time-warping path through it; each word
starts where its first token's row first advances on the path and ends where the next word's (or
end-of-text's) row does. Words are split as OpenAI's tokenizer splits them; :func:`merge_punctuations`
merges punctuation into them as its transcribe() does. The later adjustments of ``add_word_timestamps``
(long words cut, segments moved to their words) are word_adjustments.py's."""
from __future__ import annotations

import string
from array import array
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from .config import TOKENS_PER_SECOND
from .model import WhisperModel
from .tokenizer import WhisperTokenizer

MEDIAN_FILTER_WIDTH = 7
#: Languages whose words are split at every whole character (OpenAI's ``split_to_word_tokens``).
UNSPACED_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
#: OpenAI's transcribe() defaults: marks merged into the word after them, and into the word before them.
PREPEND_PUNCTUATIONS = "\"'“¿([{-"
APPEND_PUNCTUATIONS = "\"'.。,，!！?？:：”)]}、"
REPLACEMENT = "\ufffd"


def cross_attention_scores(model: WhisperModel, tokens: torch.Tensor, xa: torch.Tensor) -> torch.Tensor:
    """The cross-attention scores (before their softmax) of the second half of the decoder's layers for one
    sequence: tokens [T], audio features [1500, D] -> [layers * heads, T, 1500] (float32)."""
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
        scores = (q @ k.transpose(-1, -2)).float() * (q.shape[-1] ** -0.5)
        if index >= first:
            collected.append(scores[0])
        x = x + cross.merge(torch.softmax(scores, dim=-1).to(v.dtype) @ v)
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
    # Float32 sums and OpenAI's tie-breaking (left, unless up or the diagonal is strictly cheapest), as its
    # dtw_cpu: the same path where sums tie. Arrays of floats rather than numpy: a Python loop over numpy
    # scalars is slower.
    total = [array("f", [inf]) * (m + 1) for _ in range(n + 1)]
    total[0][0] = 0.0
    trace = np.zeros((n + 1, m + 1), dtype=np.int8)
    values = cost.tolist()
    for i in range(1, n + 1):
        above, row, costs = total[i - 1], total[i], values[i - 1]
        for j in range(1, m + 1):
            diagonal, up, left = above[j - 1], above[j], row[j - 1]
            if diagonal < up and diagonal < left:
                best, choice = diagonal, 0
            elif up < diagonal and up < left:
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


def split_on_unicode(tokenizer: WhisperTokenizer, tokens: Sequence[int]) -> List[List[int]]:
    """Tokens grouped where they decode to whole characters (OpenAI's ``split_tokens_on_unicode``)."""
    full = tokenizer.decode(tokens)
    groups: List[List[int]] = []
    current: List[int] = []
    offset = 0
    for token in tokens:
        current.append(token)
        decoded = tokenizer.decode(current)
        if REPLACEMENT not in decoded or full[offset + decoded.index(REPLACEMENT)] == REPLACEMENT:
            groups.append(current)
            current = []
            offset += len(decoded)
    return groups


def split_words(tokenizer: WhisperTokenizer, tokens: Sequence[int], language: Optional[str]) -> List[List[int]]:
    """Text tokens grouped into words as OpenAI's ``split_to_word_tokens`` does: for languages written
    without spaces, at every whole character; else a word starts at a piece that begins with a space or is
    punctuation."""
    pieces = split_on_unicode(tokenizer, tokens)
    if language in UNSPACED_LANGUAGES:
        return pieces
    words: List[List[int]] = []
    for piece in pieces:
        text = tokenizer.decode(piece)
        if not words or text.startswith(" ") or text.strip() in string.punctuation:
            words.append(list(piece))
        else:
            words[-1].extend(piece)
    return words


@dataclass
class WordTiming:
    """OpenAI's ``WordTiming`` less the probability: a word's text (its leading space kept), its times in
    seconds and its tokens."""

    text: str
    start: float
    end: float
    tokens: List[int] = field(default_factory=list)


def merge_punctuations(words: List[WordTiming]) -> None:
    """OpenAI's ``merge_punctuations`` with transcribe()'s defaults, in place: opening marks join the word
    after them, closing marks the word before, which keeps its times; their tokens go with them, and a word
    merged away is left with empty text and no tokens."""
    following = len(words) - 1
    for i in range(len(words) - 2, -1, -1):
        previous = words[i]
        if previous.text.startswith(" ") and previous.text.strip() in PREPEND_PUNCTUATIONS:
            words[following].text = previous.text + words[following].text
            words[following].tokens = previous.tokens + words[following].tokens
            previous.text, previous.tokens = "", []
        else:
            following = i
    kept = 0
    for i in range(1, len(words)):
        previous, current = words[kept], words[i]
        if not previous.text.endswith(" ") and current.text in APPEND_PUNCTUATIONS:
            previous.text += current.text
            previous.tokens = previous.tokens + current.tokens
            current.text, current.tokens = "", []
        else:
            kept = i


def find_alignment(model: WhisperModel, tokenizer: WhisperTokenizer, prefix: Sequence[int],
                   text_tokens: Sequence[int], features: torch.Tensor, frames: int,
                   language: Optional[str]) -> List[WordTiming]:
    """OpenAI's ``find_alignment``: the words of the window's text tokens decoded after ``prefix`` (its
    start-of-transcript sequence), with their times in seconds from the window's start (``frames``: mel
    frames of audio in the window). Each word starts where its first token's row starts on the path and
    ends where the next word's (or end-of-text's) row starts; punctuation is not merged yet."""
    if not text_tokens:
        return []
    sequence = [*prefix, tokenizer.no_timestamps, *text_tokens, tokenizer.eot]
    tokens = torch.tensor(sequence, device=features.device)
    with torch.no_grad():
        scores = cross_attention_scores(model, tokens, features)
    weights = scores[:, :, : max(frames // 2, 1)].softmax(dim=-1)  # the audio's frames only
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std.clamp(min=1e-9), MEDIAN_FILTER_WIDTH)
    # The rows that predict each text token and end-of-text: from <|notimestamps|> to the last text token.
    matrix = weights.mean(dim=0)[len(prefix):-1]
    rows, cols = dtw(-matrix.double().cpu().numpy())
    jumps = np.diff(rows, prepend=-1).astype(bool)
    times = (cols[jumps] / TOKENS_PER_SECOND).tolist()  # where each row starts on the path
    words: List[WordTiming] = []
    position = 0
    for word in split_words(tokenizer, text_tokens, language):
        start = times[position]
        position += len(word)
        words.append(WordTiming(tokenizer.decode(word), start, times[position], list(word)))
    return words
