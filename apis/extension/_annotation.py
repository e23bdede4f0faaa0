"""The one place where label and annotation values are turned into typed Python values.

Every parser in ``apis.extension`` goes through these helpers so that a malformed value always
surfaces the same way: as :class:`~apis.errors.InvalidAnnotation` whose ``key`` is the full
label/annotation key and whose ``problem`` names the path inside the value and the offending input,
e.g. ``gatherStrategy[0].strategy: Input should be 'MustGather' or 'PreferGather' (got 'Sometimes')``.

JSON values are validated in pydantic's *strict* JSON mode, which mirrors Go's ``encoding/json``:

- unknown object fields are ignored (``KoordModel`` uses ``extra="ignore"``);
- a value of the wrong JSON type is an error (``"1"`` is not an integer, ``1.5`` is not an int);
- malformed JSON is an error.

Scalar helpers mirror Go's ``strconv`` functions that Koordinator uses for the same keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, BeforeValidator, TypeAdapter, ValidationError

from apis.duration import parse_go_duration_ns
from apis.errors import InvalidAnnotation, InvalidValue
from apis.quantity import Quantity

__all__ = [
    "EmptyAsNone",
    "Fallback",
    "ResourceList",
    "format_loc",
    "lookup",
    "parse_bool",
    "parse_duration",
    "parse_go_int",
    "parse_json",
    "parse_resource_list",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_INPUT_REPR_LIMIT = 120


def _empty_as_none(value: Any) -> Any:
    return None if value == "" else value


EmptyAsNone = BeforeValidator(_empty_as_none)
"""Go's zero value ``""`` of an ``omitempty`` string enum means "unset": map it to ``None`` before the
enum check, so ``{"allocateStrategy": ""}`` is accepted as Go accepts it while ``"Bogus"`` is rejected."""

ResourceList = dict[str, Quantity]
"""corev1.ResourceList on the wire: resource name -> Quantity (an integer or a quantity string)."""


@dataclass(frozen=True, slots=True)
class Fallback(Generic[T]):
    """A value Koordinator resolves leniently: ``value`` is what it uses, ``warning`` says why the
    written value was replaced by a default (``None`` when the written value was used as is)."""

    value: T
    warning: str | None = None


def lookup(mapping: Mapping[str, str] | None, key: str) -> str | None:
    """``mapping[key]``, or ``None`` when the mapping or the key is absent."""
    if mapping is None:
        return None
    return mapping.get(key)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """``("gatherStrategy", 0, "strategy")`` -> ``"gatherStrategy[0].strategy"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (key)"
        else:
            out += f".{part}" if out else str(part)
    return out


def _short_repr(value: Any) -> str:
    text = repr(value)
    if len(text) > _INPUT_REPR_LIMIT:
        text = text[: _INPUT_REPR_LIMIT - 3] + "..."
    return text


def _describe(error: ValidationError, raw: str) -> str:
    problems = []
    for item in error.errors(include_url=False):
        if item["type"] == "json_invalid":
            problems.append(f"malformed JSON: {item['ctx']['error']} (got {_short_repr(raw)})")
            continue
        path = format_loc(item["loc"])
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        text = f"{path}: {message}" if path else message
        problems.append(f"{text} (got {_short_repr(item['input'])})")
    return "; ".join(problems)


@cache
def _adapter(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


@overload
def parse_json(key: str, raw: str, target: type[M]) -> M: ...


@overload
def parse_json(key: str, raw: str, target: TypeAdapter[T]) -> T: ...


def parse_json(key: str, raw: str, target: type[M] | TypeAdapter[T]) -> M | T:
    """Parse the JSON ``raw`` value of ``key`` into ``target`` (a model class or a TypeAdapter).

    Raises InvalidAnnotation naming ``key``, the path inside the value and the offending input.
    """
    if not isinstance(raw, str):
        raise InvalidAnnotation(key, f"value must be a string, got {_short_repr(raw)}")
    adapter: TypeAdapter[Any] = target if isinstance(target, TypeAdapter) else _adapter(target)
    try:
        return adapter.validate_json(raw, strict=True)  # type: ignore[no-any-return]
    except ValidationError as error:
        raise InvalidAnnotation(key, _describe(error, raw)) from error


_RESOURCE_LIST: TypeAdapter[ResourceList] = TypeAdapter(ResourceList)


def parse_resource_list(key: str, raw: str) -> ResourceList:
    """A JSON ResourceList value such as ``{"cpu": "4", "memory": "8Gi"}``."""
    return parse_json(key, raw, _RESOURCE_LIST)


_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_MAX_INT_DIGITS = 64
"""More digits than any int64 needs in any base (64 binary digits); longer is out of range."""


def _underscores_ok(body: str, prefixed: bool) -> bool:
    """Go's rule: '_' only between digits, or between a base prefix and a digit."""
    if "_" not in body:
        return True
    text = ("0" if prefixed else "") + body
    return not (text.startswith("_") or text.endswith("_") or "__" in text)


def parse_go_int(key: str, raw: str, *, base: int = 10, bits: int = 64) -> int:
    """Go's ``strconv.ParseInt(raw, base, bits)`` for base 10 or base 0 (prefix auto-detection).

    Base 0 accepts ``0x``/``0o``/``0b`` prefixes, a leading ``0`` for octal and ``_`` digit separators,
    so ``"0x10"`` is 16 and ``"010"`` is 8. Base 10 accepts an optional sign and decimal digits only.
    """
    if not isinstance(raw, str):
        raise InvalidAnnotation(key, f"value must be a string, got {_short_repr(raw)}")
    if base not in (0, 10):
        raise ValueError(f"unsupported base {base}")
    problem = f"{_short_repr(raw)} is not a valid {'integer' if base == 0 else 'decimal integer'}"
    out_of_range = f"{_short_repr(raw)} is out of range for int{bits}"
    if base == 10:
        if _DECIMAL.fullmatch(raw) is None:
            raise InvalidAnnotation(key, problem)
        digits = raw.lstrip("+-").lstrip("0")
        # int() of more than 4300 digits raises a plain ValueError; no int64 has more than 19.
        if len(digits) > _MAX_INT_DIGITS:
            raise InvalidAnnotation(key, out_of_range)
        value = (-1 if raw[0] == "-" else 1) * int(digits or "0")
    else:
        sign, body = 1, raw
        if body[:1] in ("+", "-"):
            sign = -1 if body[0] == "-" else 1
            body = body[1:]
        radix, prefixed = 10, False
        lowered = body[:2].lower()
        if lowered in ("0x", "0o", "0b"):
            radix, prefixed, body = {"0x": 16, "0o": 8, "0b": 2}[lowered], True, body[2:]
        elif len(body) > 1 and body[0] == "0":
            radix, prefixed, body = 8, True, body[1:]
        digits = body.replace("_", "")
        if (
            not digits
            or any(ch not in _DIGITS[radix] for ch in digits)
            or not _underscores_ok(body, prefixed)
        ):
            raise InvalidAnnotation(key, problem)
        digits = digits.lstrip("0")
        if len(digits) > _MAX_INT_DIGITS:
            raise InvalidAnnotation(key, out_of_range)
        value = sign * int(digits or "0", radix)
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not low <= value <= high:
        raise InvalidAnnotation(key, out_of_range)
    return value


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(key: str, raw: str) -> bool:
    """Go's ``strconv.ParseBool``: 1/t/T/TRUE/true/True and 0/f/F/FALSE/false/False."""
    if raw in _GO_TRUE:
        return True
    if raw in _GO_FALSE:
        return False
    raise InvalidAnnotation(key, f"{raw!r} is not a boolean (expected true or false)")


def parse_duration(key: str, raw: str) -> timedelta:
    """A Go duration string (``"300s"``, ``"1h30m"``) as a timedelta (sub-microsecond parts dropped)."""
    try:
        ns = parse_go_duration_ns(raw)
    except InvalidValue as error:
        raise InvalidAnnotation(key, str(error)) from error
    return timedelta(microseconds=ns // 1000)
