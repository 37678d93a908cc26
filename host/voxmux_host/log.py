"""JSON-line logging to stderr: one object per line, ``{"level", "msg", "time", ...fields}``.

The supervisor reads these lines and re-logs them with the instance id. Messages are short
fixed phrases; variable data goes in camelCase fields (``requestId``, ``durationMs``, ``err``).
"""
from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from typing import Any, Dict, Optional, TextIO

LEVELS: Dict[str, int] = {'trace': 10, 'debug': 20, 'info': 30, 'warn': 40, 'error': 50, 'fatal': 60}


def serialize_error(err: BaseException) -> Dict[str, Any]:
    """The shape of pino's error serializer: type, message and stack."""
    stack = ''.join(traceback.format_exception(type(err), err, err.__traceback__))
    return {'type': type(err).__name__, 'message': str(err), 'stack': stack}


class Logger:
    def __init__(self, stream: Optional[TextIO] = None, level: str = 'info',
                 bindings: Optional[Dict[str, Any]] = None, lock: Optional[threading.Lock] = None) -> None:
        if level not in LEVELS:
            raise ValueError(f'Expected a log level ({", ".join(LEVELS)}): got {level!r}')
        self._stream = stream if stream is not None else sys.stderr
        self._threshold = LEVELS[level]
        self._level = level
        self._bindings = dict(bindings or {})
        self._lock = lock if lock is not None else threading.Lock()

    def child(self, **bindings: Any) -> 'Logger':
        return Logger(self._stream, self._level, {**self._bindings, **bindings}, self._lock)

    def is_enabled(self, level: str) -> bool:
        return LEVELS[level] >= self._threshold

    def log(self, level: str, msg: str, **fields: Any) -> None:
        if LEVELS[level] < self._threshold:
            return
        record: Dict[str, Any] = {'level': level, 'msg': msg, 'time': int(time.time() * 1000)}
        record.update(self._bindings)
        for key, value in fields.items():
            record[key] = serialize_error(value) if isinstance(value, BaseException) else value
        line = json.dumps(record, separators=(',', ':'), ensure_ascii=False, default=str)
        with self._lock:
            try:
                self._stream.write(line + '\n')
                self._stream.flush()
            except (OSError, ValueError):
                pass  # the log pipe is gone; nothing better to do than keep serving

    def trace(self, msg: str, **fields: Any) -> None:
        self.log('trace', msg, **fields)

    def debug(self, msg: str, **fields: Any) -> None:
        self.log('debug', msg, **fields)

    def info(self, msg: str, **fields: Any) -> None:
        self.log('info', msg, **fields)

    def warn(self, msg: str, **fields: Any) -> None:
        self.log('warn', msg, **fields)

    def error(self, msg: str, **fields: Any) -> None:
        self.log('error', msg, **fields)

    def fatal(self, msg: str, **fields: Any) -> None:
        self.log('fatal', msg, **fields)
