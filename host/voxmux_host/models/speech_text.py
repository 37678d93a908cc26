"""What the speech adapters do to a sentence's text before an engine sees it."""
from __future__ import annotations

import unicodedata


def without_control_characters(text: str) -> str:
    """``text`` with each control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) as a space.

    The gateway already turns them into spaces; this keeps each engine safe on its own. The engines read
    text as C strings (flite, espeak-ng's library) or as a stream (the espeak-ng program): a NUL ended the
    sentence there, silently dropping every word after it."""
    if text.isprintable():
        return text
    return ''.join(' ' if unicodedata.category(ch) == 'Cc' else ch for ch in text)
