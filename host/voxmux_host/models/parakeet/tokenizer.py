"""Token ids to text: SentencePiece when a real model is given, else a deterministic synthetic vocabulary.

Both mark a word start with '\u2581' (SentencePiece's meta space) at the start of a piece, which is how
word timestamps are grouped.
"""
from __future__ import annotations

from typing import List, Protocol, Sequence

import numpy as np

WORD_START = "\u2581"


class Tokenizer(Protocol):
    @property
    def vocab_size(self) -> int: ...

    def piece(self, token_id: int) -> str: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def word_starts(self) -> Sequence[bool]:
        """For each id, whether its piece begins a word (starts with '\u2581')."""
        ...


def word_start_flags(pieces: Sequence[str]) -> List[bool]:
    return [piece.startswith(WORD_START) for piece in pieces]


class SyntheticTokenizer:
    """``vocab_size`` pseudo-word pieces: id 0 is ``<unk>``; about 60 % of the rest begin a word.

    Pieces are built from consonant-vowel syllables by a fixed-seed generator, so ids map to the same
    text on every machine and text comes out of a model with random weights.
    """

    _CONSONANTS = "bcdfghjklmnprstvwz"
    _VOWELS = "aeiou"

    def __init__(self, vocab_size: int, seed: int = 20240611) -> None:
        if vocab_size < 2:
            raise ValueError(f"Expected vocab_size to be at least 2: got {vocab_size}")
        rng = np.random.default_rng(seed)
        pieces: List[str] = ["<unk>"]
        seen = set(pieces)
        while len(pieces) < vocab_size:
            syllables = int(rng.integers(1, 4))
            consonants, vowels = self._CONSONANTS, self._VOWELS
            text = "".join(
                consonants[int(rng.integers(len(consonants)))] + vowels[int(rng.integers(len(vowels)))]
                for _ in range(syllables)
            )
            if rng.random() < 0.3:
                text = text[: int(rng.integers(1, len(text) + 1))]
            piece = (WORD_START + text) if rng.random() < 0.6 else text
            if piece not in seen:
                seen.add(piece)
                pieces.append(piece)
        self._pieces = pieces
        self._word_starts = word_start_flags(pieces)

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def piece(self, token_id: int) -> str:
        return self._pieces[token_id]

    def decode(self, ids: Sequence[int]) -> str:
        text = "".join(self._pieces[i] for i in ids if 0 < i < len(self._pieces))
        return text.replace(WORD_START, " ").strip()

    def word_starts(self) -> Sequence[bool]:
        return self._word_starts


class SentencePieceTokenizer:
    """A SentencePiece ``.model`` (serialized ModelProto), decoded with ``decode_ids``."""

    def __init__(self, model_proto: bytes) -> None:
        import sentencepiece  # imported here: only needed when a real tokenizer is configured

        processor = sentencepiece.SentencePieceProcessor()
        processor.LoadFromSerializedProto(model_proto)
        self._sp = processor
        self._pieces: List[str] = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        self._word_starts = word_start_flags(self._pieces)

    @staticmethod
    def from_file(path: str) -> "SentencePieceTokenizer":
        with open(path, "rb") as handle:
            return SentencePieceTokenizer(handle.read())

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def piece(self, token_id: int) -> str:
        return self._pieces[token_id]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._sp.decode_ids([int(i) for i in ids]))

    def word_starts(self) -> Sequence[bool]:
        return self._word_starts
