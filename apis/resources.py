"""Arithmetic on Kubernetes resource lists (``{"cpu": "4", "memory": "16Gi"}``).

A resource missing from a list counts as zero everywhere here, which is how Kubernetes treats a
node or a quota that does not mention a resource. Every function returns a new dict and leaves
its inputs alone, so callers may share lists between pods and snapshots freely.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping

from apis.errors import InvalidValue
from apis.quantity import Format, Quantity

__all__ = [
    "BATCH_CPU",
    "CPU",
    "MID_CPU",
    "ResourceList",
    "add",
    "fits",
    "format_resource_list",
    "from_int_units",
    "insufficient",
    "is_zero",
    "max_of",
    "min_of",
    "parse_resource_list",
    "subtract",
    "to_int_units",
    "zero_filled",
]

ResourceList = dict[str, Quantity]

CPU = "cpu"
# Koordinator's colocation resources: already whole milli-cores (a node advertises "batch-cpu: 4000").
BATCH_CPU = "kubernetes.io/batch-cpu"
MID_CPU = "kubernetes.io/mid-cpu"

# Printed in binary units when rebuilt from integers, so that they read as "16Gi" rather than "17179869184".
_BINARY_RESOURCES = frozenset(
    {
        "memory",
        "ephemeral-storage",
        "storage",
        "kubernetes.io/batch-memory",
        "kubernetes.io/mid-memory",
        "koordinator.sh/batch-memory",
        "koordinator.sh/gpu-memory",
        "kubernetes.io/gpu-memory",
    }
)
_ZERO = Quantity.from_int(0)


def parse_resource_list(raw: Mapping[str, str | int | Quantity]) -> ResourceList:
    """Parses every value; the error names the offending resource, since the quantity alone rarely says."""
    result: ResourceList = {}
    for name, value in raw.items():
        try:
            result[name] = value if isinstance(value, Quantity) else Quantity.parse(value)
        except InvalidValue as e:
            raise InvalidValue(f"resource {name!r}: {e}") from e
    return result


def format_resource_list(rl: Mapping[str, Quantity]) -> dict[str, str]:
    """The canonical strings, as they would appear in a manifest."""
    return {name: str(q) for name, q in rl.items()}


def _combine(
    a: Mapping[str, Quantity], b: Mapping[str, Quantity], op: Callable[[Quantity, Quantity], Quantity]
) -> ResourceList:
    # dict.fromkeys rather than a set union keeps the key order deterministic (a's, then b's new ones).
    return {name: op(a.get(name, _ZERO), b.get(name, _ZERO)) for name in dict.fromkeys([*a, *b])}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``a + b`` over the union of names."""
    return _combine(a, b, operator.add)


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``a - b`` over the union of names; a name only in ``b`` comes out negative, as in Kubernetes'
    ``quota.Subtract``, so that over-commitment stays visible instead of clamping to zero."""
    return _combine(a, b, operator.sub)


def max_of(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """The larger of each resource over the union of names."""
    return _combine(a, b, max)


def min_of(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """The smaller of each resource over the union of names (zero where one side lacks it)."""
    return _combine(a, b, min)


def insufficient(request: Mapping[str, Quantity], free: Mapping[str, Quantity]) -> list[str]:
    """The sorted names of requested resources that exceed what is free, for scheduling diagnostics."""
    return sorted(name for name, q in request.items() if q > free.get(name, _ZERO))


def fits(request: Mapping[str, Quantity], free: Mapping[str, Quantity]) -> bool:
    """Whether every requested resource is at most what is free."""
    return all(q <= free.get(name, _ZERO) for name, q in request.items())


def zero_filled(rl: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    """A copy of ``rl`` that also has an explicit zero for each of ``names`` it lacks."""
    return {**rl, **{name: _ZERO for name in names if name not in rl}}


def is_zero(rl: Mapping[str, Quantity]) -> bool:
    """Whether every resource is zero (an empty list is)."""
    return not any(rl.values())


def to_int_units(name: str, q: Quantity) -> int:
    """The integer the scheduler keeps in its arrays: millicores for ``cpu``, whole units otherwise.

    Rounding up means a pod never looks smaller than it asked to be. Batch and mid CPU are already
    millicores in Koordinator, so their value is taken as is rather than multiplied by a thousand.
    """
    return q.milli_value() if name == CPU else q.value()


def from_int_units(name: str, n: int) -> Quantity:
    """The inverse of :func:`to_int_units`, in the format Kubernetes itself prints such a resource in."""
    if name == CPU:
        return Quantity.from_milli(n)
    if name in _BINARY_RESOURCES or name.startswith("hugepages-"):
        return Quantity.from_int(n, Format.BINARY_SI)
    return Quantity.from_int(n)
