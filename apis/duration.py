"""Go ``time.Duration`` strings (``"300s"``, ``"1h30m"``, ``"1.5h"``, ``"-2m"``), parsed by Go's rules.

Units are ns, us (also µs and μs), ms, s, m and h; there is no day unit. ``"0"`` alone is valid;
any other number needs a unit. The value is kept exactly as integer nanoseconds.

Input is bounded before any arithmetic: an integer part with more significant digits than int64
nanoseconds can hold overflows at once, and fraction digits past :data:`_FRACTION_DIGITS` are
dropped (Go drops them too, once its accumulator would overflow), so a 5,000-digit term costs no
more than a short one. Messages quote at most :data:`apis.errors.ECHO_LIMIT` characters of input.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

from apis.errors import InvalidValue, echo

__all__ = ["format_go_duration", "parse_go_duration", "parse_go_duration_ns"]

_UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_TERM = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_MAX_NS = 2**63 - 1
_INT_DIGITS = 19
"""Significant digits of the largest integer part that can fit: 2**63 - 1 ns has 19."""
_FRACTION_DIGITS = 30
"""Fraction digits kept per term: far below a nanosecond even for hours (1e-30 h < 1e-17 ns)."""
_SCALE: int = 10**_FRACTION_DIGITS
_MAX_SCALED: int = (_MAX_NS + 1) * _SCALE


def parse_go_duration_ns(text: str) -> int:
    """Nanoseconds of a Go duration string; raises InvalidValue on anything Go would reject."""
    if not isinstance(text, str):
        raise InvalidValue(f"duration must be a string such as '300s', got {echo(text)}")
    s = text
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise InvalidValue(f"invalid duration {echo(text)}: empty")
    total = 0  # in units of 10**-_FRACTION_DIGITS ns: integers only, whatever the term count
    pos = 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if m is None or m.end() == pos:
            raise InvalidValue(
                f"invalid duration {echo(text)}: expected a number followed by one of ns, us, ms, s, m, h"
            )
        number: str = m.group(1)
        unit: str = m.group(2)
        if number in ("", "."):
            raise InvalidValue(f"invalid duration {echo(text)}: missing number before {unit!r}")
        whole, _, fraction = number.partition(".")
        whole = whole.lstrip("0")
        if len(whole) > _INT_DIGITS:
            raise InvalidValue(f"invalid duration {echo(text)}: overflows int64 nanoseconds")
        fraction = fraction[:_FRACTION_DIGITS].ljust(_FRACTION_DIGITS, "0")
        total += (int(whole or "0") * _SCALE + int(fraction)) * _UNIT_NS[unit]
        if total > _MAX_SCALED:
            raise InvalidValue(f"invalid duration {echo(text)}: overflows int64 nanoseconds")
        pos = m.end()
    ns = total // _SCALE  # Go truncates fractional nanoseconds
    if ns > _MAX_NS:
        raise InvalidValue(f"invalid duration {echo(text)}: overflows int64 nanoseconds")
    return sign * ns


def parse_go_duration(text: str) -> timedelta:
    return timedelta(microseconds=parse_go_duration_ns(text) / 1000)


def format_go_duration(ns: int) -> str:
    """Go's ``Duration.String()`` for whole seconds and above; sub-second values use ms/us/ns."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return f"{sign}{_trim(Fraction(ns, size))}{unit}"
    hours, rem = divmod(ns, _UNIT_NS["h"])
    minutes, rem = divmod(rem, _UNIT_NS["m"])
    seconds = _trim(Fraction(rem, _UNIT_NS["s"]))
    out = f"{hours}h" if hours else ""
    if hours or minutes:
        out += f"{minutes}m"
    return f"{sign}{out}{seconds}s"


def _trim(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):.9f}".rstrip("0").rstrip(".")
    return text
