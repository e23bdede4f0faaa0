"""The range of quantities the node table can account, checked where pods and nodes are decoded.

The node table keeps amounts in int64 (``apis.resources.to_int_units``: millicores for ``cpu``,
whole units otherwise), but a Kubernetes quantity is unbounded: the API server accepts
``memory: 10E`` (more than int64 holds) and ``cpu: 1e999``. Every amount is therefore checked once,
when a ``PodInfo`` or a node row is built, against ``[0, MAX_UNITS]``:

- ``MAX_UNITS`` is 2**50 (1Pi bytes of memory, about 1.1e12 cores), above any real node, and
  small enough that 8192 pods at the bound sum to less than 2**63;
- the table also saturates each node's requested amount at ``REQUESTED_CAP`` (2**62) and keeps
  the exact sum beside it (``NodeTable.add_requests``), so any number of pods bound by hand
  cannot wrap it, and ``requested + request`` or ``allocatable - requested`` stay in int64.

What happens to an object outside the range (the caller decides, this module only measures):

- a pending pod is refused for scheduling with a Warning event naming the field
  (``scheduler.queue`` gates it, ``scheduler.reporting`` writes the event);
- a pod already bound to a node is accounted with each amount clamped into the range, so a
  request above it makes the node look full rather than empty, and it is reported once;
- a node whose allocatable is outside the range is not a scheduling candidate at all (its row is
  inactive) and gets a Warning event. Clamping it instead would advertise 1Pi of memory and draw
  every pod to a node whose real capacity nobody knows; the pods already bound there are still
  accounted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.quantity import Quantity
from apis.resources import from_int_units, to_int_units

__all__ = ["MAX_UNITS", "REQUESTED_CAP", "Checked", "check_amount", "check_list", "clamp", "out_of_range"]

MAX_UNITS = 2**50
"""The largest amount, in table units, of one request or one allocatable."""
REQUESTED_CAP = 2**62
"""Where a node's requested amount saturates in the table (the exact sum is kept beside it)."""

_QUOTED = 40
"""Longest quantity text quoted in a message; a 1000-digit quantity is shortened."""


@dataclass(frozen=True, slots=True)
class Checked:
    """Amounts in table units, each clamped into ``[0, MAX_UNITS]``, and why any was clamped."""

    amounts: dict[str, int]
    problems: tuple[str, ...] = ()


def clamp(amount: int) -> int:
    return min(max(amount, 0), MAX_UNITS)


def _quote(text: str) -> str:
    return text if len(text) <= _QUOTED else f"{text[:20]}...{text[-10:]} ({len(text)} characters)"


def out_of_range(field: str, name: str, shown: str) -> str:
    """The message for an amount outside the range: names the field, the value and the bound."""
    return (
        f"{field}: {_quote(shown)} is outside the range koord-scheduler can account "
        f"(0 to {from_int_units(name, MAX_UNITS)})"
    )


def check_amount(name: str, q: Quantity, field: str) -> tuple[int, str | None]:
    """``q`` in table units clamped into the range, and the problem when it had to be clamped."""
    if q.sign() < 0:
        return 0, out_of_range(field, name, str(q))
    # Compare before converting: 1e999 would otherwise become a 1000-digit int first.
    if q > from_int_units(name, MAX_UNITS):
        return MAX_UNITS, out_of_range(field, name, str(q))
    return to_int_units(name, q), None


def check_list(rl: Mapping[str, Quantity], field: str) -> Checked:
    """Every quantity of a resource list (``field`` is its path, e.g. ``status.allocatable``)."""
    amounts: dict[str, int] = {}
    problems: list[str] = []
    for name, q in rl.items():
        amounts[name], problem = check_amount(name, q, f"{field}.{name}")
        if problem is not None:
            problems.append(problem)
    return Checked(amounts, tuple(problems))
