"""Exact Kubernetes resource quantities (``"100m"``, ``"64Gi"``, ``"1e3"``), parsed and printed by the
rules of apimachinery's ``resource.Quantity``.

A quantity is kept as an integer count of nano-units. Parsing rounds anything finer than a nano away
from zero, exactly as apimachinery does, so every value the scheduler can see is a whole number of
nanos: addition, subtraction and comparison are then plain integer operations and never lose
precision, which a float would (``0.1 + 0.2`` cores must fit in ``300m``).

Deliberate differences from apimachinery, none of which changes a value the two agree to parse:

* a number needs at least one digit (Go reads ``"m"``, ``"."`` and ``"+"`` as zero);
* decimal exponents outside int32 (which Go silently wraps) and quantities of ``1e1000`` or more
  are rejected, so that a hostile string cannot make us build an enormous integer;
* ``str()`` is always canonical: Go echoes some parsed strings back verbatim (``"+1"``, ``"1.500"``);
* a BinarySI value of ``1024Ei`` or more prints as ``"<n>Ei"`` where Go drops the suffix;
* ``value()`` and ``milli_value()`` return exact Python ints and round negative fractions toward
  +infinity (``ceil``), where Go's int64 accessors may overflow and round either way.
"""

from __future__ import annotations

import functools
import math
import re
import reprlib
from enum import StrEnum
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from apis.errors import InvalidValue, echo

__all__ = ["QUANTITY_PATTERN", "Format", "Quantity"]

# Kubernetes' OpenAPI pattern for a quantity; the parser below is the authority (it rejects "1e1.5").
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


class Format(StrEnum):
    """How a quantity prints; parsing remembers the format of its suffix so that ``str`` keeps it."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


# apimachinery's own parser is a hand-written scanner followed by a suffix lookup; this expression
# accepts the same language, except that it insists on at least one digit (checked after matching).
_PARSE = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<bin>[KMGTPE])i|[eE](?P<exp>[+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))"
)
_DECIMAL_SUFFIX_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_EXP_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL_SUFFIX_EXP.items()}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_NANO = 10**9
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# apimachinery clamps parsed BinarySI quantities to the int64 range; decimal ones are unbounded there.
_MAX_BINARY_NANOS = (2**63 - 1) * _NANO
# Our own bound (see the module docstring): keeps ints far below CPython's 4300-digit str() limit.
_MAX_DIGITS = 1000
# Error messages quote the input, but not all of a megabyte-long one.
_quote = reprlib.Repr()
_quote.maxstring = 80


@functools.total_ordering
class Quantity:
    """An exact, immutable resource quantity that remembers the format it was written in.

    Equality, ordering and hashing go by value only, so ``"1Gi"`` equals ``"1073741824"``.
    """

    __slots__ = ("_format", "_nanos", "_text")

    _nanos: int
    _format: Format
    _text: str
    """``str(self)``, kept at its first use: parsed quantities are shared (``_parse_cached``), so
    the few distinct ones of a cluster are printed once, not once per pod serialized."""

    def __init__(self, value: Fraction | int = 0, format: Format = Format.DECIMAL_SI) -> None:
        """Any exact number; a value finer than a nano is rounded away from zero, as parsing does."""
        scaled = Fraction(value) * _NANO
        nanos = math.ceil(abs(scaled))
        self._nanos = -nanos if scaled < 0 else nanos
        self._format = Format(format)

    @classmethod
    def _of(cls, nanos: int, format: Format) -> Quantity:
        q = cls.__new__(cls)
        q._nanos = nanos
        q._format = format
        return q

    @classmethod
    def from_int(cls, value: int, format: Format = Format.DECIMAL_SI) -> Quantity:
        """Go's ``NewQuantity``."""
        return cls._of(value * _NANO, Format(format))

    @classmethod
    def from_milli(cls, value: int, format: Format = Format.DECIMAL_SI) -> Quantity:
        """Go's ``NewMilliQuantity``: ``from_milli(1500)`` is 1.5."""
        return cls._of(value * (_NANO // 1000), Format(format))

    @classmethod
    def parse(cls, text: str | int) -> Quantity:
        """Go's ``ParseQuantity``; an int is read as its decimal digits, as a JSON number would be."""
        if isinstance(text, int) and not isinstance(text, bool):
            if abs(text) >= 10**_MAX_DIGITS:
                raise InvalidValue(
                    f"invalid quantity {_quote.repr(text)}: magnitude of 1e{_MAX_DIGITS} or more"
                )
            return cls.from_int(text)
        if not isinstance(text, str):
            raise InvalidValue(f"quantity must be a string or an integer, got {_quote.repr(text)}")
        if len(text) <= _CACHED_TEXT_LENGTH and cls is Quantity:
            return _parse_cached(text)
        return cls._parse_text(text)

    @classmethod
    def _parse_text(cls, text: str) -> Quantity:
        m = _PARSE.fullmatch(text)
        if m is None or not (m["int"] or m["frac"]):
            raise InvalidValue(
                f"invalid quantity {_quote.repr(text)}: expected a number with an optional suffix "
                "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>)"
            )
        frac = m["frac"] or ""
        digits = (m["int"] + frac).lstrip("0")
        if len(digits) > _MAX_DIGITS:
            raise InvalidValue(f"invalid quantity {_quote.repr(text)}: more than {_MAX_DIGITS} digits")
        mantissa = int(digits or "0")
        if m["bin"] is not None:
            fmt = Format.BINARY_SI
            magnitude = Fraction(mantissa << (10 * _BINARY_SUFFIXES.index(m["bin"] + "i")), 10 ** len(frac))
            nanos = min(math.ceil(magnitude * _NANO), _MAX_BINARY_NANOS)
            if 0 < nanos < _NANO:
                # apimachinery switches sub-unit binary values to DecimalSI rather than print "0.5".
                fmt = Format.DECIMAL_SI
        else:
            if m["exp"] is not None:
                fmt = Format.DECIMAL_EXPONENT
                # Check the length first: int() refuses strings of more than 4300 digits.
                exponent = int(m["exp"]) if len(m["exp"].lstrip("+-").lstrip("0")) <= 10 else _INT32_MAX + 1
                if not _INT32_MIN <= exponent <= _INT32_MAX:
                    raise InvalidValue(f"invalid quantity {_quote.repr(text)}: exponent out of int32 range")
            else:
                fmt, exponent = Format.DECIMAL_SI, _DECIMAL_SUFFIX_EXP[m["dec"]]
            shift = exponent - len(frac) + 9  # the value in nanos is mantissa * 10**shift
            if mantissa == 0:
                nanos = 0
            elif shift < -len(digits):
                nanos = 1  # 0 < value < 1n, without building 10**-shift for a huge negative exponent
            elif len(digits) + shift - 9 > _MAX_DIGITS:
                raise InvalidValue(
                    f"invalid quantity {_quote.repr(text)}: magnitude of 1e{_MAX_DIGITS} or more"
                )
            else:
                nanos = math.ceil(mantissa * Fraction(10) ** shift)
        return cls._of(-nanos if m["sign"] == "-" else nanos, fmt)

    @property
    def format(self) -> Format:
        return self._format

    def as_fraction(self) -> Fraction:
        """The exact value, for arithmetic the operators leave out (ratios, scaling by a factor)."""
        return Fraction(self._nanos, _NANO)

    def value(self) -> int:
        """The value rounded up to a whole unit (Go's ``Value``), e.g. bytes of memory."""
        return -(-self._nanos // _NANO)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up (Go's ``MilliValue``), e.g. millicores of CPU."""
        return -(-self._nanos // (_NANO // 1000))

    def is_zero(self) -> bool:
        return self._nanos == 0

    def sign(self) -> int:
        """-1, 0 or 1, like Go's ``Sign``."""
        return (self._nanos > 0) - (self._nanos < 0)

    def __bool__(self) -> bool:
        return self._nanos != 0

    def __add__(self, other: Quantity) -> Quantity:
        """Keeps the left operand's format, unless it is zero, as Go's ``Add`` does."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._nanos == 0 else self._format
        return Quantity._of(self._nanos + other._nanos, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        """Keeps the left operand's format, unless it is zero, as Go's ``Sub`` does."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._nanos == 0 else self._format
        return Quantity._of(self._nanos - other._nanos, fmt)

    def __neg__(self) -> Quantity:
        return Quantity._of(-self._nanos, self._format)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __str__(self) -> str:
        """apimachinery's canonical form: the largest suffix (or exponent) that needs no fraction."""
        try:
            return self._text
        except AttributeError:
            self._text = self._canonical()
            return self._text

    def _canonical(self) -> str:
        if self._nanos == 0:
            return "0"
        sign = "-" if self._nanos < 0 else ""
        nanos = abs(self._nanos)
        fmt = self._format
        if fmt == Format.BINARY_SI:
            units, rest = divmod(nanos, _NANO)
            if units < 1024 or rest:
                # Small or fractional binary values would need a fraction of "Ki"; Go prints them decimally.
                fmt = Format.DECIMAL_SI
            else:
                power = 0
                while units % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
                    units //= 1024
                    power += 1
                return f"{sign}{units}{_BINARY_SUFFIXES[power]}"
        full = str(nanos)
        mantissa = full.rstrip("0")
        exponent = len(full) - len(mantissa) - 9
        pad = exponent % 3  # the printed exponent is always a multiple of three
        mantissa += "0" * pad
        exponent -= pad
        if fmt == Format.DECIMAL_SI and exponent in _DECIMAL_EXP_SUFFIX:
            return f"{sign}{mantissa}{_DECIMAL_EXP_SUFFIX[exponent]}"
        # DecimalExponent, or DecimalSI beyond "E", which has no suffix.
        return f"{sign}{mantissa}e{exponent}" if exponent else f"{sign}{mantissa}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self._format.value})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }

    @classmethod
    def _validate(cls, value: Any) -> Quantity:
        if isinstance(value, Quantity):
            return value
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(
                f"quantity must be an integer or a string such as '500m' or '16Gi', got {echo(value)}"
            )
        return cls.parse(value)


_CACHED_TEXT_LENGTH = 64
# A cluster writes few distinct quantities ("500m", "1Gi") many times over: every pod and node
# decoded from a watch parses them again. Quantities are immutable, so one parse is shared.
_parse_cached = functools.lru_cache(maxsize=4096)(Quantity._parse_text)
