"""Go's ``strconv.ParseFloat`` grammar, read exactly into a Fraction with its size bounded first.

Accepted, as Go accepts them: an optional sign, then either decimal digits with an optional point
and an optional ``e`` exponent (``"0.9"``, ``".5"``, ``"5."``, ``"1e-3"``), or a hexadecimal
mantissa with a mandatory ``p`` binary exponent (``"0x1p-1"``). ``_`` may separate digits as in
Go literals (``"1_0"`` is 10, as Go's own test ``"1_23.50_0_0e+1_2"`` = 1.235e14 shows) but must
sit between digits (``"1__0"``, ``"_1"``, ``"1_.5"`` are refused). ``Inf``, ``Infinity`` and
``NaN`` parse in Go but are no number: they are refused here, as is anything Go refuses.

Hostile input is refused before any arithmetic: the text is at most :data:`MAX_LENGTH`
characters and the exponent at most :data:`MAX_DECIMAL_EXPONENT` (or
:data:`MAX_BINARY_EXPONENT`) in size, about the range of a float64, so ``"1e999999999"`` costs
no more than ``"1"``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from apis.errors import InvalidValue, echo

__all__ = ["MAX_BINARY_EXPONENT", "MAX_DECIMAL_EXPONENT", "MAX_LENGTH", "parse_go_float"]

MAX_LENGTH = 64
"""Characters of the whole text; a float64 never needs more than 25."""
MAX_DECIMAL_EXPONENT = 330
"""Largest ``|e|`` accepted: float64 spans 1e-324 to 1.8e308."""
MAX_BINARY_EXPONENT = 1100
"""Largest ``|p|`` accepted: float64 spans 2**-1074 to 2**1024."""

_DECIMAL = re.compile(r"([0-9_]*)(?:\.([0-9_]*))?(?:[eE]([+-]?[0-9_]+))?")
_HEX = re.compile(r"0[xX]([0-9a-fA-F_]*)(?:\.([0-9a-fA-F_]*))?[pP]([+-]?[0-9_]+)")
_SPECIAL = frozenset({"inf", "infinity", "nan"})
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _underscores_ok(text: str) -> bool:
    """Go's ``strconv.underscoreOK``: each ``_`` sits between two digits (a base prefix counts as one)."""
    saw = "^"  # ^ start, 0 digit or prefix, _ underscore, ! anything else
    body = text[1:] if text[:1] in ("+", "-") else text
    hex_digits = body[:2] in ("0x", "0X")
    if hex_digits:
        body, saw = body[2:], "0"
    for ch in body:
        if "0" <= ch <= "9" or (hex_digits and ch in _HEX_DIGITS):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_go_float(text: str) -> Fraction:
    """The exact value of ``text`` read as Go's ``strconv.ParseFloat(text, 64)`` reads it.

    Raises InvalidValue when Go refuses the text, when it is infinite or NaN, or when it is
    longer than :data:`MAX_LENGTH` or its exponent is beyond a float64's range.
    """
    if not isinstance(text, str):
        raise InvalidValue(f"expected a decimal string such as '0.9', got {echo(text)}")
    if len(text) > MAX_LENGTH:
        raise InvalidValue(f"{echo(text)} is longer than {MAX_LENGTH} characters")
    negative = text[:1] == "-"
    body = text[1:] if text[:1] in ("+", "-") else text
    if body.lower() in _SPECIAL:
        raise InvalidValue(f"{echo(text)} is not a finite number")
    hexadecimal = body[:2] in ("0x", "0X")
    m = (_HEX if hexadecimal else _DECIMAL).fullmatch(body)
    whole, fraction = (m.group(1), m.group(2) or "") if m else ("", "")
    whole, fraction = whole.replace("_", ""), fraction.replace("_", "")
    if m is None or not (whole or fraction) or ("_" in body and not _underscores_ok(text)):
        raise InvalidValue(f"{echo(text)} is not a number (Go's strconv.ParseFloat refuses it)")
    exponent = int((m.group(3) or "0").replace("_", ""))  # at most MAX_LENGTH digits
    radix, limit = (16, MAX_BINARY_EXPONENT) if hexadecimal else (10, MAX_DECIMAL_EXPONENT)
    if abs(exponent) > limit:
        raise InvalidValue(f"{echo(text)}: exponent out of range (at most {limit} in size)")
    mantissa = int(whole + fraction, radix)
    # A hex exponent counts powers of 2 and each hex fraction digit is 4 of them.
    base, exp = (2, exponent - 4 * len(fraction)) if hexadecimal else (10, exponent - len(fraction))
    value = Fraction(mantissa * base**exp) if exp >= 0 else Fraction(mantissa, base**-exp)
    return -value if negative else value
