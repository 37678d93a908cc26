"""Word timestamps from decoded tokens: the grouping against a token-by-token reference."""
from __future__ import annotations

from typing import List

import numpy as np
import pytest

from voxmux_host.model_api import Word
from voxmux_host.models.parakeet.adapter import words_from_tokens
from voxmux_host.models.parakeet.decoder import DecodedItem
from voxmux_host.models.parakeet.tokenizer import WORD_START, SyntheticTokenizer, Tokenizer


def _reference_words(tokenizer: Tokenizer, item: DecodedItem, frame_s: float, duration_s: float) -> List[Word]:
    """Token by token: a piece that starts with WORD_START closes the open word and opens the next."""
    words: List[Word] = []
    group: List[int] = []

    def flush() -> None:
        if not group:
            return
        text = tokenizer.decode([item.tokens[k] for k in group]).strip()
        if text:
            last = group[-1]
            start = min(item.frames[group[0]] * frame_s, duration_s)
            end = min((item.frames[last] + max(item.durations[last], 1)) * frame_s, duration_s)
            words.append(Word(word=text, start=round(start, 3), end=round(max(end, start), 3)))
        group.clear()

    for k, token in enumerate(item.tokens):
        if tokenizer.piece(token).startswith(WORD_START):
            flush()
        group.append(k)
    flush()
    return words


def _item(rng: np.random.Generator, vocab: int, count: int, max_frame: int) -> DecodedItem:
    return DecodedItem(
        tokens=rng.integers(0, vocab, count).tolist(),
        frames=sorted(rng.integers(0, max_frame, count).tolist()),
        durations=rng.integers(0, 5, count).tolist(),
        steps=count,
    )


@pytest.mark.parametrize("seed", range(8))
def test_words_equal_the_token_by_token_grouping(seed: int) -> None:
    tokenizer = SyntheticTokenizer(1024)
    rng = np.random.default_rng(seed)
    # Lengths from empty to long; frames past the clip's end get clamped; id 0 (<unk>) decodes to nothing.
    for count in (0, 1, 2, 7, 160):
        item = _item(rng, 1024, count, max_frame=600)
        assert words_from_tokens(tokenizer, item, 0.08, 45.0) == _reference_words(tokenizer, item, 0.08, 45.0)
        assert words_from_tokens(tokenizer, item, 0.08, 3.0) == _reference_words(tokenizer, item, 0.08, 3.0)


def test_a_first_token_inside_a_word_still_opens_one() -> None:
    tokenizer = SyntheticTokenizer(64)
    flags = tokenizer.word_starts()
    inside = next(i for i in range(1, 64) if not flags[i])
    start = next(i for i in range(1, 64) if flags[i])
    item = DecodedItem(tokens=[inside, start, inside], frames=[0, 5, 6], durations=[1, 1, 0], steps=3)
    words = words_from_tokens(tokenizer, item, 0.08, 10.0)
    assert [w.word for w in words] == [tokenizer.decode([inside]), tokenizer.decode([start, inside])]
    assert (words[1].start, words[1].end) == (0.4, 0.56)  # ends one frame after its last token's frame
    assert words == _reference_words(tokenizer, item, 0.08, 10.0)


def test_word_start_flags_follow_the_pieces() -> None:
    tokenizer = SyntheticTokenizer(300)
    flags = tokenizer.word_starts()
    assert len(flags) == tokenizer.vocab_size
    assert all(flags[i] == tokenizer.piece(i).startswith(WORD_START) for i in range(tokenizer.vocab_size))
