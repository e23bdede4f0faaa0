"""Errors raised by the API package when input is malformed.

Exception tree::

    ValueError
     └── InvalidValue                 a value that does not parse (quantity, duration, ...)
          ├── InvalidAnnotation       a label or annotation value; names the key
          └── InvalidSpec             a field of a custom resource; names the field path

All of them are ``ValueError`` so that pydantic validators turn them into validation errors
that name the field.

Input is hostile until parsed: a message never grows with the input. :func:`echo` quotes an
offending value cut to :data:`ECHO_LIMIT` characters, and every message is cut to
:data:`MESSAGE_LIMIT` characters however it was built.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence

__all__ = [
    "ECHO_LIMIT",
    "MESSAGE_LIMIT",
    "InvalidAnnotation",
    "InvalidSpec",
    "InvalidValue",
    "echo",
    "summary",
]

ECHO_LIMIT = 120
"""Characters of an offending value quoted in a message."""

MESSAGE_LIMIT = 2000
"""Characters of a whole message (a key, a path, several problems, each with its echo)."""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    more = f"... ({len(text) - limit} more characters)"
    return text[: max(limit - len(more), 0)] + more


class _Repr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # str() of a huge int is slow, and refused past 4,300 digits
            return f"<an integer of about {int(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)


def _repr() -> reprlib.Repr:
    r = _Repr()
    r.maxstring = r.maxother = ECHO_LIMIT
    r.maxlong = 40
    r.maxlevel = 3
    return r


_REPR = _repr()


def echo(value: object) -> str:
    """``repr(value)`` cut to :data:`ECHO_LIMIT` characters, for quoting input in a message.

    Long strings and containers are cut before they are rendered (``reprlib``), so a megabyte of
    input costs no more than its first few hundred characters.
    """
    return _cut(_REPR.repr(value), ECHO_LIMIT)


def summary(problems: Sequence[str]) -> str:
    """``problems`` joined with ``"; "``: as many whole ones as fit in :data:`MESSAGE_LIMIT`
    characters (each cut to it), then how many more. An object with a million bad items gets a
    message of bounded size, an admission denial for one."""
    shown: list[str] = []
    used = 0
    for i, problem in enumerate(problems):
        if shown and used + len(problem) > MESSAGE_LIMIT:
            return "; ".join(shown) + f"; and {len(problems) - i} more problems"
        shown.append(_cut(problem, MESSAGE_LIMIT))
        used += len(shown[-1]) + 2
    return "; ".join(shown)


class InvalidValue(ValueError):
    """A value that cannot be parsed."""

    def __init__(self, message: str) -> None:
        super().__init__(_cut(message, MESSAGE_LIMIT))


class InvalidAnnotation(InvalidValue):
    """A malformed label or annotation value. ``key`` is the full key, ``problem`` says what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = _cut(problem, MESSAGE_LIMIT)
        super().__init__(f"invalid value for {_cut(key, ECHO_LIMIT)}: {self.problem}")


class InvalidSpec(InvalidValue):
    """A malformed field of a custom resource. ``path`` is the dotted JSON path (``spec.minMember``)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = _cut(problem, MESSAGE_LIMIT)
        super().__init__(f"{_cut(path, ECHO_LIMIT)}: {self.problem}")
