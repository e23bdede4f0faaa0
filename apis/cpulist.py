"""Linux CPU lists (``0-3,8,10-11``), as ``cpuset.cpus``, sysfs ``cpulist`` files and Koordinator's
annotations write them: the one parser koordlet, koord-manager and koord-scheduler share."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["format_cpus", "parse_cpus"]

_MAX_CPU = 1 << 20
"""No machine has more CPUs; a larger id is a typo, not a reason to build a huge set."""


def parse_cpus(text: str) -> frozenset[int]:
    """The CPU ids of a list; ``""`` is the empty set, a trailing comma is allowed. Raises ValueError
    naming the bad part."""
    cpus: set[int] = set()
    if not text.strip():
        return frozenset()
    parts = [part.strip() for part in text.strip().split(",")]
    if len(parts) > 1 and not parts[-1]:
        parts.pop()  # a trailing comma, as some tools write the list
    for part in parts:
        if not part:
            raise ValueError(f"invalid CPU list {text!r}: empty element")
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            raise ValueError(f"invalid CPU list {text!r}: {part!r} is not a CPU id or range")
        first, last = int(low), int(high) if dash else int(low)
        if last < first or last >= _MAX_CPU:
            raise ValueError(f"invalid CPU list {text!r}: bad range {part!r}")
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
