"""Whisper's tokenizer: GPT-2 byte-level BPE plus Whisper's special tokens, read from Hugging Face tokenizer
files (``tokenizer.json``, or ``vocab.json`` + ``merges.txt`` with an optional ``added_tokens.json``).

The special tokens follow the base vocabulary in OpenAI's order: ``<|endoftext|>``, ``<|startoftranscript|>``,
one token per language (:data:`LANGUAGES`, 99 before large-v3, 100 from it), ``<|translate|>``,
``<|transcribe|>``, ``<|startoflm|>``, ``<|startofprev|>``, ``<|nospeech|>``, ``<|notimestamps|>``, then the
1501 timestamps ``<|0.00|>`` to ``<|30.00|>``. Each is looked up by its text where the files list it, else
placed by that order. :func:`tiny_tokenizer` generates a small vocabulary (256 bytes + 44 merges) with the
same special tokens, for the tiny model and tests.

The pre-tokenizer is GPT-2's pattern with Python's ``re`` classes (letters ``[^\\W\\d_]``, digits ``\\d``) in
place of ``\\p{L}`` and ``\\p{N}``; decoding is exact.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

#: OpenAI's language codes, in token order (the 100th, yue, exists from large-v3 on).
LANGUAGES: Tuple[str, ...] = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi",
    "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml",
    "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs",
    "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am",
    "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln",
    "ha", "ba", "jw", "su", "yue",
)
TIMESTAMP_COUNT = 1501  # <|0.00|> .. <|30.00|>
_PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


class ByteBPE:
    """Byte-level BPE over a vocabulary (token text -> id) and ranked merges."""

    def __init__(self, vocab: Dict[str, int], merges: Sequence[Tuple[str, str]]) -> None:
        self.vocab = vocab
        self.id_to_token = {i: t for t, i in vocab.items()}
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {c: b for b, c in self.byte_encoder.items()}
        self._cache: Dict[str, List[str]] = {}
        missing = [c for c in self.byte_encoder.values() if c not in vocab]
        if missing:
            raise ValueError(f"Expected the vocabulary to hold all 256 byte tokens: {len(missing)} are missing")

    def _bpe(self, word: str) -> List[str]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        parts = list(word)
        while len(parts) > 1:
            best: Optional[Tuple[int, int]] = None
            for i in range(len(parts) - 1):
                rank = self.ranks.get((parts[i], parts[i + 1]))
                if rank is not None and (best is None or rank < best[0]):
                    best = (rank, i)
            if best is None:
                break
            first, second = parts[best[1]], parts[best[1] + 1]
            merged: List[str] = []
            i = 0
            while i < len(parts):
                if i < len(parts) - 1 and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        if len(self._cache) < 100_000:
            self._cache[word] = parts
        return parts

    def encode(self, text: str) -> List[int]:
        ids: List[int] = []
        for piece in _PATTERN.findall(text):
            word = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[p] for p in self._bpe(word))
        return ids

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        text = "".join(self.id_to_token.get(i, "") for i in ids)
        return bytes(self.byte_decoder[c] for c in text if c in self.byte_decoder)


@dataclass
class WhisperTokenizer:
    """Byte-level BPE plus the special token ids."""

    bpe: ByteBPE
    eot: int
    sot: int
    language_ids: Dict[str, int]
    translate: int
    transcribe: int
    sot_lm: int
    sot_prev: int
    no_speech: int
    no_timestamps: int
    timestamp_begin: int
    languages: Tuple[str, ...] = field(default=())

    @property
    def n_vocab(self) -> int:
        return self.timestamp_begin + TIMESTAMP_COUNT

    @property
    def timestamp_end(self) -> int:
        return self.timestamp_begin + TIMESTAMP_COUNT - 1

    def encode(self, text: str) -> List[int]:
        return self.bpe.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of the ids below ``<|endoftext|>`` (special and timestamp tokens are skipped)."""
        return self.bpe.decode_bytes(i for i in ids if i < self.eot).decode("utf-8", errors="replace")

    def sot_sequence(self, language: Optional[str], task: str) -> List[int]:
        sequence = [self.sot]
        if language is not None:
            sequence.append(self.language_ids[language])
            sequence.append(self.translate if task == "translate" else self.transcribe)
        return sequence

    def space_tokens(self) -> List[int]:
        return self.encode(" ")

    def non_speech_tokens(self) -> List[int]:
        """OpenAI's ``Tokenizer.non_speech_tokens``: symbols of speaker tags and annotations (``[DAVID]``,
        ``( SPEAKING FOREIGN LANGUAGE )``, ``♪♪♪``) that are one token, with or without a leading space, the
        first token of the music notes, and " -" and " '" (allowed between words, not at a word's start);
        basic punctuation is kept."""
        symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
        symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
        # U+2640..U+267F share the first two bytes of their UTF-8 form: where a note is several tokens, its
        # first is suppressed.
        miscellaneous = set("♩♪♫♬♭♮♯")
        result = {self.encode(" -")[0], self.encode(" '")[0]}
        for symbol in symbols + sorted(miscellaneous):
            for tokens in (self.encode(symbol), self.encode(" " + symbol)):
                if len(tokens) == 1 or symbol in miscellaneous:
                    result.add(tokens[0])
        return sorted(result)

    @staticmethod
    def from_vocab(vocab: Dict[str, int], merges: Sequence[Tuple[str, str]], added: Dict[str, int]) -> "WhisperTokenizer":
        """Special ids by their text in ``added`` or ``vocab``, else by OpenAI's order after ``<|endoftext|>``."""
        known = {**vocab, **added}
        base = {t: i for t, i in vocab.items() if not (t.startswith("<|") and t.endswith("|>"))}
        eot = known.get("<|endoftext|>", max(base.values()) + 1)
        languages = tuple(code for code in LANGUAGES if f"<|{code}|>" in known)
        if not languages:
            languages = LANGUAGES  # placed by order: the newest layout
        sot = known.get("<|startoftranscript|>", eot + 1)
        after_languages = sot + 1 + len(languages)

        def get(name: str, offset: int, *aliases: str) -> int:
            for text in (name, *aliases):
                if text in known:
                    return known[text]
            return after_languages + offset

        translate = get("<|translate|>", 0)
        transcribe = get("<|transcribe|>", 1)
        sot_lm = get("<|startoflm|>", 2)
        sot_prev = get("<|startofprev|>", 3)
        no_speech = get("<|nospeech|>", 4, "<|nocaptions|>")
        no_timestamps = get("<|notimestamps|>", 5)
        timestamp_begin = known.get("<|0.00|>", no_timestamps + 1)
        language_ids = {code: known.get(f"<|{code}|>", sot + 1 + i) for i, code in enumerate(languages)}
        return WhisperTokenizer(ByteBPE(base, merges), eot, sot, language_ids, translate, transcribe, sot_lm, sot_prev,
                                no_speech, no_timestamps, timestamp_begin, languages)

    @staticmethod
    def from_directory(path: str) -> "WhisperTokenizer":
        """Read ``tokenizer.json``, or ``vocab.json`` + ``merges.txt`` (+ ``added_tokens.json``), from a folder."""
        tokenizer_json = os.path.join(path, "tokenizer.json")
        if os.path.exists(tokenizer_json):
            with open(tokenizer_json, encoding="utf-8") as f:
                data = json.load(f)
            model = data.get("model", {})
            if model.get("type") not in (None, "BPE") or "vocab" not in model or "merges" not in model:
                raise ValueError(f"Expected a BPE model with vocab and merges in {tokenizer_json}")
            merges = [_merge_pair(m) for m in model["merges"]]
            added = {t["content"]: int(t["id"]) for t in data.get("added_tokens", [])}
            return WhisperTokenizer.from_vocab(dict(model["vocab"]), merges, added)
        vocab_path, merges_path = os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")
        if not (os.path.exists(vocab_path) and os.path.exists(merges_path)):
            raise ValueError(f"Expected tokenizer.json, or vocab.json and merges.txt, in {path}")
        with open(vocab_path, encoding="utf-8") as f:
            vocab = dict(json.load(f))
        with open(merges_path, encoding="utf-8") as f:
            merges = [_merge_pair(line.rstrip("\n")) for line in f if line.strip() and not line.startswith("#version")]
        added_path = os.path.join(path, "added_tokens.json")
        extra: Dict[str, int] = {}
        if os.path.exists(added_path):
            with open(added_path, encoding="utf-8") as f:
                extra = {k: int(v) for k, v in json.load(f).items()}
        return WhisperTokenizer.from_vocab(vocab, merges, extra)


def _merge_pair(raw: object) -> Tuple[str, str]:
    if isinstance(raw, (list, tuple)) and len(raw) == 2:
        return str(raw[0]), str(raw[1])
    if isinstance(raw, str) and raw.count(" ") == 1:
        first, second = raw.split(" ")
        return first, second
    raise ValueError(f"Expected a merge 'a b' or [a, b]: got {raw!r}")


def special_tokens(eot: int, languages: Sequence[str] = LANGUAGES) -> Dict[str, int]:
    """The special tokens' texts and ids in OpenAI's order from ``eot``."""
    names = ["<|endoftext|>", "<|startoftranscript|>", *(f"<|{code}|>" for code in languages), "<|translate|>",
             "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    names += [f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMP_COUNT)]
    return {name: eot + i for i, name in enumerate(names)}


_TINY_CORPUS = (
    "the quick brown fox jumps over the lazy dog and the cat sat on the mat while the sun was shining "
    "in the morning there is a voice that says hello to the world the weather is nice today and then "
    "we will transcribe the speech into text with timestamps for every segment of the recording"
)
TINY_MERGES = 44


def train_merges(corpus: str, count: int, byte_encoder: Dict[int, str]) -> List[Tuple[str, str]]:
    """Plain BPE training: merge the most frequent adjacent pair ``count`` times (ties: the smallest pair)."""
    words: Dict[Tuple[str, ...], int] = {}
    for piece in _PATTERN.findall(corpus):
        word = tuple(byte_encoder[b] for b in piece.encode("utf-8"))
        words[word] = words.get(word, 0) + 1
    merges: List[Tuple[str, str]] = []
    for _ in range(count):
        pairs: Dict[Tuple[str, str], int] = {}
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] = pairs.get(pair, 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged: Dict[Tuple[str, ...], int] = {}
        for word, n in words.items():
            out: List[str] = []
            i = 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return merges


def tiny_vocabulary() -> Tuple[Dict[str, int], List[Tuple[str, str]], Dict[str, int]]:
    """The tiny tokenizer's files as data: vocab (bytes then merges), merges, and added special tokens."""
    byte_encoder = bytes_to_unicode()
    vocab = {c: i for i, c in enumerate(byte_encoder[b] for b in range(256))}
    merges = train_merges(_TINY_CORPUS, TINY_MERGES, byte_encoder)
    for first, second in merges:
        vocab.setdefault(first + second, len(vocab))
    return vocab, merges, special_tokens(len(vocab))


def tiny_tokenizer() -> WhisperTokenizer:
    vocab, merges, added = tiny_vocabulary()
    return WhisperTokenizer.from_vocab(vocab, merges, added)


def write_tokenizer_files(path: str, vocab: Dict[str, int], merges: Sequence[Tuple[str, str]], added: Dict[str, int],
                          layout: str = "vocab") -> None:
    """Write Hugging Face tokenizer files: ``layout`` 'vocab' (vocab.json, merges.txt, added_tokens.json) or
    'tokenizer.json'."""
    os.makedirs(path, exist_ok=True)
    if layout == "tokenizer.json":
        data = {
            "version": "1.0",
            "added_tokens": [{"id": i, "content": t, "special": True} for t, i in added.items()],
            "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
        }
        with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        return
    with open(os.path.join(path, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(path, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    with open(os.path.join(path, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump(added, f, ensure_ascii=False)


def synthetic_tokenizer(n_vocab: int) -> WhisperTokenizer:
    """A tokenizer of ``n_vocab`` tokens for random weights without tokenizer files: the 256 byte tokens, then
    made-up letter pieces (no merges, so text encodes to bytes), then the special tokens in OpenAI's layout:
    99 languages for a 51864-token (English-only, ``<|endoftext|>`` 50256) or 51865-token model, 100
    otherwise."""
    languages = LANGUAGES[:99] if n_vocab in (51864, 51865) else LANGUAGES
    base_size = n_vocab - TIMESTAMP_COUNT - 8 - len(languages)
    if base_size < 256:
        raise ValueError(f"Expected at least {256 + TIMESTAMP_COUNT + 8 + len(languages)} tokens: got {n_vocab}")
    byte_encoder = bytes_to_unicode()
    vocab = {c: i for i, c in enumerate(byte_encoder[b] for b in range(256))}
    letters = "abcdefghijklmnopqrstuvwxyz"
    space = byte_encoder[ord(" ")]
    n = 0
    while len(vocab) < base_size:
        piece, k = "", n
        while True:
            piece = letters[k % 26] + piece
            k = k // 26 - 1
            if k < 0:
                break
        n += 1
        for text in (space + piece, piece):
            if len(vocab) < base_size and len(piece) > 1:
                vocab.setdefault(text, len(vocab))
    return WhisperTokenizer.from_vocab(vocab, [], special_tokens(base_size, languages))
