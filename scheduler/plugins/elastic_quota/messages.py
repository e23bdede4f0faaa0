"""Why the quota rejects a pod: our sentence first (the first resource short, with the figures),
then Koordinator's own wording in parentheses, unchanged, because users and tools match on it
(``Insufficient quotas, quotaName: ..., exceedDimensions: [cpu memory]``; Koordinator's
``PreFilter`` and ``checkQuotaRecursive``). Resource lists are printed as Koordinator's
``printResourceList`` does: ``name:quantity`` pairs, sorted, joined by commas (``<empty>`` for none)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.resources import from_int_units
from scheduler.quota.tree import Resources

__all__ = ["insufficient", "insufficient_non_preemptible", "insufficient_parent"]


def insufficient(
    name: str, used: Resources, request: Resources, limits: Resources, limit_name: str, what: str
) -> str | None:
    """The quota's own check: ``used + request <= limits`` (runtime, or max)."""
    dims = _exceeded(used, request, limits)
    if not dims:
        return None
    ours = _sentence(name, dims[0], used, request, limits, limit_name, what)
    theirs = (
        f"Insufficient quotas, quotaName: {name}, runtime: {_print(limits)}, used: {_print(used)}, "
        f"pod's request: {_print(request)}, exceedDimensions: {_go_slice(dims)}"
    )
    return f"Insufficient quotas: {ours} ({theirs})"


def insufficient_non_preemptible(
    name: str, used: Resources, request: Resources, minimum: Resources, what: str
) -> str | None:
    """A non-preemptible pod: ``non-preemptible used + request <= min``."""
    dims = _exceeded(used, request, minimum)
    if not dims:
        return None
    ours = _sentence(name, dims[0], used, request, minimum, "min", what, "non-preemptible ")
    theirs = (
        f"Insufficient non-preemptible quotas, quotaName: {name}, min: {_print(minimum)}, "
        f"nonPreemptibleUsed: {_print(used)}, pod's request: {_print(request)}, "
        f"exceedDimensions: {_go_slice(dims)}"
    )
    return f"Insufficient non-preemptible quotas: {ours} ({theirs})"


def insufficient_parent(
    topology: Sequence[str],
    used: Resources,
    request: Resources,
    limits: Resources,
    limit_name: str,
    what: str,
) -> str | None:
    """An ancestor's check (``enableCheckParentQuota``); ``topology`` runs from that ancestor down
    to the pod's quota, as Koordinator's ``quotaNameTopo``."""
    dims = _exceeded(used, request, limits)
    if not dims:
        return None
    ours = _sentence(topology[0], dims[0], used, request, limits, limit_name, what)
    theirs = (
        f"Insufficient quotas, quotaNameTopo: {_go_slice(topology)}, runtime: {_print(limits)}, "
        f"used: {_print(used)}, pod's request: {_print(request)}, exceedDimensions: {_go_slice(dims)}"
    )
    return f"Insufficient quotas: parent {ours} ({theirs})"


def _exceeded(used: Resources, request: Resources, limits: Resources) -> list[str]:
    """The resources of ``limits`` where used + request is over, by name."""
    return sorted(r for r in limits if used.get(r, 0) + request.get(r, 0) > limits[r])


def _sentence(
    name: str,
    resource: str,
    used: Resources,
    request: Resources,
    limits: Resources,
    limit_name: str,
    what: str,
    kind: str = "",
) -> str:
    have, amount = used.get(resource, 0), request.get(resource, 0)
    return (
        f"quota {name} {resource} {kind}used {_fmt(resource, have)} + request "
        f"{_fmt(resource, amount)}{what} > {limit_name} {_fmt(resource, limits[resource])}"
    )


def _fmt(resource: str, amount: int) -> str:
    return str(from_int_units(resource, amount))


def _print(resources: Mapping[str, int]) -> str:
    if not resources:
        return "<empty>"
    return ",".join(sorted(f"{name}:{_fmt(name, amount)}" for name, amount in resources.items()))


def _go_slice(items: Sequence[str]) -> str:
    return "[" + " ".join(items) + "]"
