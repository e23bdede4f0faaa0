"""The node pass and the prod pass (``evictPodsFromSourceNodes``, ``balancePods``, ``evictPods``).

Sources are visited hottest first; on each, candidates in ``ordering`` order. Before each pod the
source must still be over its high threshold and every budget must be > 0, so a source gives up
at most one pod more than it needed to. With ``nodeFit``, a pod is moved only if some target
fits it and stays under its high threshold with the pod's usage added
(``podFitsAnyNodeWithThreshold``), and only a pod actually moved keeps that virtual placement:
Koordinator placed every candidate while filtering, using up target headroom for pods it never
moved. The prod pass also checks the target's node-level high, not only its prod high.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from apis.core import Pod
from apis.podkey import pod_ref
from apis.resources import ResourceList, add
from operators.descheduler.lownodeload.classify import is_over, over_resources
from operators.descheduler.lownodeload.nodefit import node_fits, pod_requests_with_slot
from operators.descheduler.lownodeload.ordering import node_score, sort_pods, sort_sources
from operators.descheduler.lownodeload.thresholds import NodeThresholds
from operators.descheduler.lownodeload.usage import Amounts, NodeUsage, is_prod

__all__ = [
    "EvictFn",
    "Move",
    "PassKind",
    "PoolNode",
    "headroom",
    "node_budget",
    "prod_budget",
    "run_pass",
]

PassKind = Literal["node", "prod"]
EvictFn = Callable[[Pod, "PoolNode", str], Awaitable[bool]]
"""Ask to move a pod off a source with a reason; True when it was (or, in a dry run, would be)."""


@dataclass(slots=True)
class PoolNode:
    """A node of the pool being balanced, with the state the passes change."""

    usage: NodeUsage
    thresholds: NodeThresholds
    requested: ResourceList = field(default_factory=dict)
    """What the node's pods request, plus pods planned onto it (for nodeFit)."""

    @property
    def name(self) -> str:
        return self.usage.name

    def used(self, kind: PassKind) -> Amounts:
        return self.usage.prod_usage if kind == "prod" else self.usage.usage

    def high(self, kind: PassKind) -> Amounts:
        return self.thresholds.prod_high if kind == "prod" else self.thresholds.high


@dataclass(frozen=True, slots=True)
class Move:
    pod: Pod
    source: str
    target: str | None
    """The target the pod was virtually placed on; None without nodeFit."""
    reason: str


def headroom(nodes: Sequence[PoolNode], kind: PassKind) -> Amounts:
    """Σ (high - used) over the nodes, per resource."""
    total: Amounts = {}
    for node in nodes:
        used, high = node.used(kind), node.high(kind)
        for name, limit in high.items():
            total[name] = total.get(name, 0) + limit - used.get(name, 0)
    return total


def node_budget(targets: Sequence[PoolNode]) -> Amounts:
    return headroom(targets, "node")


def prod_budget(prod_low: Sequence[PoolNode], both_low: Sequence[PoolNode], node_left: Amounts) -> Amounts:
    """Σ_prodLow prod headroom + min(Σ_bothLow prod headroom, bothLow's node headroom capped at
    what the node pass left of its budget)."""
    prod_low_room = headroom(prod_low, "prod")
    both_prod_room = headroom(both_low, "prod")
    both_node_room = headroom(both_low, "node")
    budget: Amounts = {}
    for name in dict.fromkeys([*prod_low_room, *both_prod_room]):
        capped = min(both_node_room.get(name, 0), node_left.get(name, both_node_room.get(name, 0)))
        budget[name] = prod_low_room.get(name, 0) + min(both_prod_room.get(name, 0), capped)
    return budget


def _added(amounts: Amounts, pod_usage: Amounts) -> Amounts:
    return {name: value + pod_usage.get(name, 0) for name, value in amounts.items()}


def _stays_cool(target: PoolNode, pod: Pod, pod_usage: Amounts, kind: PassKind) -> bool:
    if is_over(_added(target.usage.usage, pod_usage), target.thresholds.high):
        return False
    prod = kind == "prod" or is_prod(pod)
    return not (prod and is_over(_added(target.usage.prod_usage, pod_usage), target.thresholds.prod_high))


def find_target(pod: Pod, pod_usage: Amounts, targets: Sequence[PoolNode], kind: PassKind) -> PoolNode | None:
    """The first target (by name) the pod fits and does not make hot."""
    for target in targets:
        if node_fits(pod, target.usage.node, target.requested) and _stays_cool(target, pod, pod_usage, kind):
            return target
    return None


def _reason(source: PoolNode, kind: PassKind) -> str:
    used, high, alloc = source.used(kind), source.high(kind), source.usage.allocatable
    parts = [
        f"{kind} {name} usage({used[name] / alloc[name]:.2%})>threshold({high[name] / alloc[name]:.2%})"
        for name in sorted(over_resources(used, high))
        if alloc.get(name)
    ]
    return "node is overutilized, " + ", ".join(parts)


def _apply(amounts: Amounts, delta: Amounts, sign: int) -> None:
    for name in amounts:
        amounts[name] += sign * delta.get(name, 0)


async def run_pass(
    kind: PassKind,
    sources: Sequence[PoolNode],
    targets: Sequence[PoolNode],
    budget: Amounts,
    weights: Mapping[str, int],
    removable: Callable[[Pod], bool],
    evict: EvictFn,
    node_fit: bool,
    on_relieved: Callable[[PoolNode], None],
) -> list[Move]:
    """Move pods off ``sources`` onto ``targets`` within ``budget`` (changed in place)."""
    moves: list[Move] = []
    scored = [(s.name, node_score(s.used(kind), s.usage.allocatable, weights)) for s in sources]
    by_name = {s.name: s for s in sources}
    for source in (by_name[name] for name in sort_sources(scored)):
        candidates = [
            pod
            for pod in source.usage.pods
            if removable(pod)
            and (kind == "node" or is_prod(pod))
            and (not node_fit or pod_ref(pod) in source.usage.pod_usage)
        ]
        if node_fit:  # a pod no target could take now is not a candidate (checked, not placed)
            candidates = [
                pod
                for pod in candidates
                if find_target(pod, source.usage.pod_usage[pod_ref(pod)], targets, kind) is not None
            ]
        ordered = sort_pods(candidates, source.usage.pod_usage, source.used(kind), source.high(kind), weights)
        for pod in ordered:
            if not is_over(source.used(kind), source.high(kind)):
                on_relieved(source)
                break
            if any(value <= 0 for value in budget.values()):
                return moves
            pod_usage = source.usage.pod_usage.get(pod_ref(pod), {})
            target = None
            if node_fit:
                target = find_target(pod, pod_usage, targets, kind)
                if target is None:
                    continue
            reason = _reason(source, kind)
            if not await evict(pod, source, reason):
                continue
            _apply(budget, pod_usage, -1)
            _apply(source.usage.usage, pod_usage, -1)
            if is_prod(pod):
                _apply(source.usage.prod_usage, pod_usage, -1)
            if target is not None:
                _apply(target.usage.usage, pod_usage, +1)
                if is_prod(pod):
                    _apply(target.usage.prod_usage, pod_usage, +1)
                target.requested = add(target.requested, pod_requests_with_slot(pod))
            moves.append(
                Move(pod=pod, source=source.name, target=target.name if target else None, reason=reason)
            )
    return moves
