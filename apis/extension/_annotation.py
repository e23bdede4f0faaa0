"""The one place where label and annotation values are turned into typed Python values.

Every parser in ``apis.extension`` goes through these helpers so that a malformed value always
surfaces the same way: as :class:`~apis.errors.InvalidAnnotation` whose ``key`` is the full
label/annotation key and whose ``problem`` names the path inside the value and the offending input,
e.g. ``gatherStrategy[0].strategy: Input should be 'MustGather' or 'PreferGather' (got 'Sometimes')``.

JSON values are validated in pydantic's *strict* JSON mode, which mirrors Go's ``encoding/json``:

- unknown object fields are ignored (``KoordModel`` uses ``extra="ignore"``);
- an object key that is not a field's exact JSON name still names the field when it matches it
  case-insensitively (``"GatherStrategy"``), as Go's decoder does (:func:`apis.base.go_json_keys`);
- a value of the wrong JSON type is an error (``"1"`` is not an integer, ``1.5`` is not an int);
- malformed JSON is an error.

Scalar helpers mirror Go's ``strconv`` functions that Koordinator uses for the same keys.

Values are hostile until parsed: every failure is an InvalidAnnotation (never a bare ValueError
or OverflowError), numbers are bounded by their digit count before any arithmetic, and messages
quote at most :data:`apis.errors.ECHO_LIMIT` characters of the input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Annotated, Any, Generic, TypeVar, overload

from pydantic import AfterValidator, BaseModel, BeforeValidator, TypeAdapter, ValidationError
from pydantic_core import from_json

from apis.base import go_json_keys
from apis.duration import parse_go_duration_ns
from apis.errors import InvalidAnnotation, InvalidValue, echo
from apis.quantity import Quantity

__all__ = [
    "EmptyAsNone",
    "Fallback",
    "NonNegativeQuantity",
    "NonNegativeResourceList",
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

_PROBLEMS_LISTED = 5
"""Validation problems spelled out in a message; the rest are counted."""


def _empty_as_none(value: Any) -> Any:
    return None if value == "" else value


EmptyAsNone = BeforeValidator(_empty_as_none)
"""Go's zero value ``""`` of an ``omitempty`` string enum means "unset": map it to ``None`` before the
enum check, so ``{"allocateStrategy": ""}`` is accepted as Go accepts it while ``"Bogus"`` is rejected."""

ResourceList = dict[str, Quantity]
"""corev1.ResourceList on the wire: resource name -> Quantity (an integer or a quantity string)."""


def _non_negative(value: Quantity) -> Quantity:
    if value.sign() < 0:
        raise ValueError(f"{value} is negative; an amount is 0 or more")
    return value


NonNegativeQuantity = Annotated[Quantity, AfterValidator(_non_negative)]
"""An amount held or reserved: a negative one would give capacity back, so it is refused."""

NonNegativeResourceList = dict[str, NonNegativeQuantity]
"""A ResourceList of amounts (a reservation, an allocation): every quantity 0 or more."""


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


def _describe(error: ValidationError, raw: str) -> str:
    problems = []
    items = error.errors(include_url=False)
    for item in items[:_PROBLEMS_LISTED]:
        if item["type"] == "json_invalid":
            problems.append(f"malformed JSON: {item['ctx']['error']} (got {echo(raw)})")
            continue
        path = format_loc(item["loc"])
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        text = f"{path}: {message}" if path else message
        problems.append(f"{text} (got {echo(item['input'])})")
    if len(items) > _PROBLEMS_LISTED:
        problems.append(f"and {len(items) - _PROBLEMS_LISTED} more")
    return "; ".join(problems)


def _go_keys(adapter: TypeAdapter[Any], raw: str) -> str:
    """``raw`` with object keys renamed as Go's decoder matches them; ``raw`` itself when none is.

    Malformed JSON is left for the strict validation to report.
    """
    try:
        data = from_json(raw)
    except ValueError:
        return raw
    renamed = go_json_keys(adapter.core_schema, data)
    if renamed is data:
        return raw
    try:
        return json.dumps(renamed)
    except ValueError:  # an integer too long to print: let the validation reject it as written
        return raw


def _check_text(key: str, raw: object) -> None:
    """A value is a string of Unicode scalar values: the API server sends only UTF-8, but ``koordctl
    simulate`` input and the memory backend can hold a lone surrogate (``"\\ud800"``), which the JSON
    reader would refuse with a TypeError instead of a parse error."""
    if not isinstance(raw, str):
        raise InvalidAnnotation(key, f"value must be a string, got {echo(raw)}")
    if raw.isascii():
        return
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidAnnotation(
            key, f"not valid text: a lone surrogate at position {error.start} (got {echo(raw)})"
        ) from None


@cache
def _adapter(target: Any) -> TypeAdapter[Any]:
    return TypeAdapter(target)


@overload
def parse_json(key: str, raw: str, target: type[M]) -> M: ...


@overload
def parse_json(key: str, raw: str, target: TypeAdapter[T]) -> T: ...


def parse_json(key: str, raw: str, target: type[M] | TypeAdapter[T]) -> M | T:
    """Parse the JSON ``raw`` value of ``key`` into ``target`` (a model class or a TypeAdapter).

    Object keys match fields case-insensitively, as in Go (see the module docstring). Raises
    InvalidAnnotation naming ``key``, the path inside the value and the offending input.
    """
    _check_text(key, raw)
    adapter: TypeAdapter[Any] = target if isinstance(target, TypeAdapter) else _adapter(target)
    try:
        return adapter.validate_json(_go_keys(adapter, raw), strict=True)  # type: ignore[no-any-return]
    except ValidationError as error:
        raise InvalidAnnotation(key, _describe(error, raw)) from error


_RESOURCE_LIST: TypeAdapter[ResourceList] = TypeAdapter(ResourceList)


def parse_resource_list(key: str, raw: str) -> ResourceList:
    """A JSON ResourceList value such as ``{"cpu": "4", "memory": "8Gi"}``."""
    return parse_json(key, raw, _RESOURCE_LIST)


_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_DECIMAL = re.compile(r"[+-]?[0-9]+")


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
    A value with more significant digits than int``bits`` can hold is out of range before it is
    converted, so a 5,000-digit value costs no more than a 20-digit one.
    """
    if not isinstance(raw, str):
        raise InvalidAnnotation(key, f"value must be a string, got {echo(raw)}")
    if base not in (0, 10):
        raise ValueError(f"unsupported base {base}")

    def problem() -> str:
        return f"{echo(raw)} is not a valid {'integer' if base == 0 else 'decimal integer'}"

    sign, body = 1, raw
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    radix, prefixed = 10, False
    if base == 10:
        if _DECIMAL.fullmatch(raw) is None:
            raise InvalidAnnotation(key, problem())
        digits = body
    else:
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
            raise InvalidAnnotation(key, problem())
    significant = digits.lstrip("0")
    if len(significant) > bits:  # no radix packs more than one bit into a digit
        raise InvalidAnnotation(key, f"{echo(raw)} is out of range for int{bits}")
    value = sign * int(significant or "0", radix)
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not low <= value <= high:
        raise InvalidAnnotation(key, f"{echo(raw)} is out of range for int{bits}")
    return value


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(key: str, raw: str) -> bool:
    """Go's ``strconv.ParseBool``: 1/t/T/TRUE/true/True and 0/f/F/FALSE/false/False."""
    if raw in _GO_TRUE:
        return True
    if raw in _GO_FALSE:
        return False
    raise InvalidAnnotation(key, f"{echo(raw)} is not a boolean (expected true or false)")


def parse_duration(key: str, raw: str) -> timedelta:
    """A Go duration string (``"300s"``, ``"1h30m"``) as a timedelta (sub-microsecond parts dropped)."""
    try:
        ns = parse_go_duration_ns(raw)
    except InvalidValue as error:
        raise InvalidAnnotation(key, str(error)) from error
    return timedelta(microseconds=ns // 1000)
