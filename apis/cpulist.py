"""Linux CPU lists (``0-3,8,10-11``), as ``cpuset.cpus``, sysfs ``cpulist`` files and Koordinator's
annotations write them: the one parser koordlet, koord-manager and koord-scheduler share.

A list is hostile until parsed (a pod's ``resource-status`` annotation reaches koord-scheduler's
event path), so the parser bounds its work by what it reads and by what it builds:

- ids are ASCII decimal digits (``"٣"`` is not CPU 3) below :data:`MAX_CPUS`;
- the ranges together name at most :data:`MAX_CPUS` ids, repeats and overlaps counted, so
  ``"0-8191,0-8191"`` is refused instead of being enumerated twice;
- hence at most ``MAX_CPUS + 2`` elements are looked at, each of at most a few dozen characters,
  and at most ``MAX_CPUS`` ids are added to the set, whatever the length of the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from apis.errors import InvalidValue, echo

__all__ = ["MAX_CPUS", "format_cpus", "parse_cpus"]

MAX_CPUS = 8192
"""CPU ids run from 0 to ``MAX_CPUS - 1``, and a list names at most this many ids in all: the
largest Linux build (x86-64 ``CONFIG_MAXSMP``, ``NR_CPUS=8192``) has no more. A larger id is a typo
or an attack, not a reason to build a huge set."""

_ID = r"[ \t\r\n]*([0-9]{1,10})[ \t\r\n]*"
_ELEMENT = re.compile(f"{_ID}(?:-{_ID})?")
"""One element: an id or a range, ASCII digits and ASCII blanks only, at most ten digits an id."""

_BLANK = " \t\r\n"


def parse_cpus(text: str) -> frozenset[int]:
    """The CPU ids of a list; ``""`` is the empty set, a trailing comma is allowed.

    Raises :class:`~apis.errors.InvalidValue` (a ValueError) naming the bad part: an element that is
    not an id or a range, a descending range, an id of :data:`MAX_CPUS` or more, or more than
    :data:`MAX_CPUS` ids in all.
    """
    text = text.strip(_BLANK)
    if not text:
        return frozenset()
    # Past MAX_CPUS + 1 elements the list names too many ids anyway: split no further, so the
    # last part holds the rest and fails the element check.
    parts = text.split(",", MAX_CPUS + 1)
    if len(parts) > 1 and not parts[-1].strip(_BLANK):
        parts.pop()  # a trailing comma, as some tools write the list
    cpus: set[int] = set()
    named = 0
    for part in parts:
        if not part.strip(_BLANK):
            raise InvalidValue(f"invalid CPU list {echo(text)}: empty element")
        match = _ELEMENT.fullmatch(part)
        if match is None:
            raise InvalidValue(f"invalid CPU list {echo(text)}: {echo(part)} is not a CPU id or range")
        first = int(match.group(1))
        last = first if match.group(2) is None else int(match.group(2))
        if last < first:
            raise InvalidValue(f"invalid CPU list {echo(text)}: bad range {echo(part)} (descending)")
        if last >= MAX_CPUS:
            raise InvalidValue(
                f"invalid CPU list {echo(text)}: bad range {echo(part)} (CPU ids stop at {MAX_CPUS - 1})"
            )
        named += last - first + 1
        if named > MAX_CPUS:
            raise InvalidValue(
                f"invalid CPU list {echo(text)}: more than {MAX_CPUS} CPU ids in all "
                "(ranges repeated or overlapping)"
            )
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpus(cpus: Iterable[int]) -> str:
    """The shortest list of ranges, ascending (``{0, 1, 2, 5}`` -> ``"0-2,5"``)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = previous = None
    for cpu in ordered:
        if start is None:
            start = previous = cpu
        elif previous is not None and cpu == previous + 1:
            previous = cpu
        else:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = previous = cpu
    if start is not None:
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
    return ",".join(parts)
