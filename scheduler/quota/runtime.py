"""Sharing one resource among the children of one quota (algorithms.md 4.3 and 4.4), in exact integers.

Three pure functions, each one numbered step list of the guide:

- ``scale_mins``: when the children's mins add up to more than the parent has, every min shrinks in
  proportion (``enableMinQuotaScale``, 4.4);
- ``hamilton_shares``: split an amount by weight with the largest-remainder method (ties by name);
- ``share``: give every child its floor, then hand the spare to the hungry ones by shared weight,
  capping each at its request and recycling the excess, until nothing is left (4.3).

Amounts are integer units (milli-CPU, bytes, counts); nothing here rounds through floats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Child", "hamilton_shares", "scale_mins", "share"]


@dataclass(frozen=True, slots=True)
class Child:
    """One child quota, for one resource."""

    name: str
    min: int
    """The floor: its min after ``scale_mins``."""
    request: int
    """Its request capped at its max (``limited_request`` in 4.2)."""
    weight: int
    """Its shared weight; 0 never receives spare."""
    lends: bool = True
    """False: it keeps its whole min even when it asks for less (``allow-lent-resource: "false"``)."""


def scale_mins(total: int, mins: Mapping[str, int]) -> dict[str, int]:
    """Every child's min, scaled down in proportion when they add up to more than ``total`` (4.4).

    1. If the mins fit in ``total``, they are kept as they are.
    2. Else, with ``total <= 0`` every min is 0;
    3. else each min becomes ``floor(min * total / sum(mins))`` (exact integers, so they still fit).
    """
    wanted = sum(mins.values())
    if wanted <= total:
        return dict(mins)
    if total <= 0:
        return dict.fromkeys(mins, 0)
    return {name: amount * total // wanted for name, amount in mins.items()}


def hamilton_shares(amount: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``amount`` by ``weights`` with the largest-remainder (Hamilton) method.

    1. Each gets ``floor(w * amount / W)``.
    2. The units left over go one each to the largest remainders ``w * amount mod W``, ties broken by
       name ascending, so the result is deterministic and sums exactly to ``amount``.
    Names with weight <= 0 get nothing; with no positive weight nobody gets anything.
    """
    positive = {name: w for name, w in weights.items() if w > 0}
    total_weight = sum(positive.values())
    if amount <= 0 or total_weight == 0:
        return dict.fromkeys(weights, 0)
    shares = dict.fromkeys(weights, 0)
    remainders: list[tuple[int, str]] = []
    for name, weight in positive.items():
        base, remainder = divmod(weight * amount, total_weight)
        shares[name] = base
        remainders.append((remainder, name))
    leftover = amount - sum(shares.values())
    for _, name in sorted(remainders, key=lambda item: (-item[0], item[1]))[:leftover]:
        shares[name] += 1
    return shares


def share(total: int, children: Sequence[Child]) -> dict[str, int]:
    """Each child's runtime for one resource, from the parent's ``total`` (4.3).

    1. A child asking for more than its min is *hungry* and starts at its min; one asking for less
       starts at its request if it lends, at its min if it does not.
    2. ``spare = total - sum(runtime)``; nothing more happens when it is not positive.
    3. While there is spare and a hungry child with a positive weight: split the spare among the
       hungry children by weight (``hamilton_shares``); a child that reaches its request is capped
       there, stops being hungry, and its excess is the next round's spare.
    """
    runtime: dict[str, int] = {}
    hungry: dict[str, Child] = {}
    for child in children:
        if child.request > child.min:
            hungry[child.name] = child
            runtime[child.name] = child.min
        else:
            runtime[child.name] = child.request if child.lends else child.min
    spare = total - sum(runtime.values())
    while spare > 0:
        weights = {name: child.weight for name, child in hungry.items() if child.weight > 0}
        if not weights:
            break
        given = hamilton_shares(spare, weights)
        spare = 0
        for name, amount in given.items():
            runtime[name] += amount
            request = hungry[name].request
            if runtime[name] >= request:
                spare += runtime[name] - request
                runtime[name] = request
                del hungry[name]
    return runtime
