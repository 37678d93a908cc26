"""The exception adapters raise for a failure with a wire code.

The wire codes are ``WIRE_ERROR_CODE_VALUES`` in the generated ``messages.py`` (from
``WIRE_ERROR_CODES`` in ``src/core/error-catalog.ts``, through the message table).
"""
from __future__ import annotations


class InstanceError(Exception):
    """A failure with a wire code, sent to the supervisor unchanged.

    Adapters raise it for failures they can classify; any other exception becomes
    ``model_failed`` and its traceback is written to the instance log.
    """

    def __init__(self, code: str, message: str) -> None:
        # NOTE: imported here, not at the top: messages imports protocol, which imports this module.
        from .messages import WIRE_ERROR_CODE_VALUES

        if code not in WIRE_ERROR_CODE_VALUES:
            raise ValueError(f'Expected a wire error code: got {code!r}')
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f'InstanceError({self.code!r}, {self.message!r})'
