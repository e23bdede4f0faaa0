"""Errors raised by the API package when input is malformed.

Exception tree::

    ValueError
     └── InvalidValue                 a value that does not parse (quantity, duration, ...)
          ├── InvalidAnnotation       a label or annotation value; names the key
          └── InvalidSpec             a field of a custom resource; names the field path

All of them are ``ValueError`` so that pydantic validators turn them into validation errors
that name the field.
"""

from __future__ import annotations

__all__ = ["InvalidAnnotation", "InvalidSpec", "InvalidValue"]


class InvalidValue(ValueError):
    """A value that cannot be parsed."""


class InvalidAnnotation(InvalidValue):
    """A malformed label or annotation value. ``key`` is the full key, ``problem`` says what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"invalid value for {key}: {problem}")


class InvalidSpec(InvalidValue):
    """A malformed field of a custom resource. ``path`` is the dotted JSON path (``spec.minMember``)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")
