"""Error codes that cross the instance boundary, and the exception adapters raise.

The list mirrors ``WIRE_ERROR_CODES`` in ``src/core/error-catalog.ts``; a test keeps the two equal.
"""
from __future__ import annotations

from typing import Tuple

WIRE_ERROR_CODES: Tuple[str, ...] = (
    'invalid_audio',
    'model_failed',
    'out_of_memory',
    'unsupported_option',
    'load_failed',
    'protocol_mismatch',
    'bad_frame',
    'instance_wedged',
    'stream_cancelled',
    'session_state_missing',
    'resource_not_found',
    'state_too_large',
)


class InstanceError(Exception):
    """A failure with a wire code, sent to the supervisor unchanged.

    Adapters raise it for failures they can classify; any other exception becomes
    ``model_failed`` and its traceback is written to the instance log.
    """

    def __init__(self, code: str, message: str) -> None:
        if code not in WIRE_ERROR_CODES:
            raise ValueError(f'Expected a wire error code: got {code!r}')
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f'InstanceError({self.code!r}, {self.message!r})'
