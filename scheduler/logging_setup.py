"""Structured JSON logs and klog-style verbosity (``--v``, ``PUT /debug/flags/v``).

One JSON object per line: ``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``,
``message``, then every ``extra={...}`` field of the call, then ``exception`` when there is one::

    log.info("bound pod", extra={"pod": "default/p", "node": "n1"})
    {"time": "2025-01-01T00:00:00.000Z", "level": "INFO", "logger": "scheduler.binder",
     "message": "bound pod", "pod": "default/p", "node": "n1"}

Verbosity follows klog's convention: 0 and 1 show INFO and above, 2 and 3 add the ``V(2)`` and
``V(3)`` levels (between INFO and DEBUG), 4 and above show DEBUG. Log at a klog level with
``log.log(level_for_verbosity(3), ...)``; such records carry ``"v": 3``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from apis.goflags import level_for_verbosity

__all__ = [
    "JsonFormatter",
    "configure_logging",
    "level_for_verbosity",
    "set_verbosity",
    "verbosity_for_level",
]

_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def verbosity_for_level(level: int) -> int:
    """The smallest verbosity whose level shows records of ``level`` (INFO and above: 0)."""
    for v in range(5):
        if level >= level_for_verbosity(v):
            return v
    return 4


class JsonFormatter(logging.Formatter):
    """One JSON object per record; values that JSON cannot hold are written with ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")
        verbose = logging.DEBUG < record.levelno < logging.INFO  # a klog V(2)/V(3) record
        out: dict[str, Any] = {
            "time": when.replace("+00:00", "Z"),
            "level": "INFO" if verbose else record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if verbose:
            out["v"] = verbosity_for_level(record.levelno)
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _OurHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler ``configure_logging`` installed, so calling it again replaces it."""


def configure_logging(
    verbosity: int = 0, *, stream: IO[str] | None = None, json_format: bool = True
) -> logging.Handler:
    """Send the root logger's records to ``stream`` (stderr) as JSON lines at ``verbosity``.

    Idempotent: a handler installed by an earlier call is replaced; other handlers are left alone.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _OurHandler):
            root.removeHandler(handler)
    handler = _OurHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        JsonFormatter() if json_format else logging.Formatter("%(levelname).1s %(name)s] %(message)s")
    )
    root.addHandler(handler)
    set_verbosity(verbosity)
    return handler


def set_verbosity(v: int) -> None:
    """Set the root logger's level from a klog verbosity."""
    logging.getLogger().setLevel(level_for_verbosity(v))
