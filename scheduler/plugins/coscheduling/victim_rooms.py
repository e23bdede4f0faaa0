"""Victims that free the right cards, not just enough of them.

The victim solver counts what victims free per resource; a plugin that knows more (DeviceShare:
which cards, on which PCIe switch) gives each node's room with every candidate gone, which bounds
the members a node may take but cannot say which victims make that room. So a selection is checked
against the plugins' room with exactly its victims gone. Where the room falls short, the victims
that node needs are found as kube-scheduler's reprieve finds them (every candidate gone, then each
put back, highest priority first, and kept if the members still fit), required for the members'
groups there (the problem's ``blockers``), and the victims are chosen again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import ProfileView
from scheduler.plugins.coscheduling.placement import short_of_room
from scheduler.solver import PreemptionProblem, VictimSelection

__all__ = ["require_room"]


def require_room(
    problem: PreemptionProblem,
    selection: VictimSelection,
    members: Sequence[PodInfo],
    snapshot: Snapshot,
    profile: ProfileView,
) -> PreemptionProblem | None:
    """None when the selection's victims make the room its members need; otherwise the problem
    again with the victims each short node needs required there (a node that cannot hold its
    members even with every candidate gone is taken from those groups)."""
    victims = {v.uid: v for v in problem.victims}
    assignment = selection.assignment
    short = _short(
        members, assignment, [p for uid in selection.victims if (p := snapshot.pod(uid))], snapshot, profile
    )
    if not short:
        return None
    group_of = {m: g.name for g in problem.placement.pod_groups for m in g.member_ids}
    blockers = dict(problem.blockers)
    feasible = dict(problem.placement.feasible_nodes)
    for node in short:
        planned = [m for m in members if assignment.get(m.uid) == node]
        groups = {group_of[m.uid] for m in planned}
        local = [p for v in victims.values() if v.node == node and (p := snapshot.pod(v.uid)) is not None]
        needed = _reprieve(planned, node, local, snapshot, profile)
        for group in groups:
            if needed is None:
                feasible[group] = frozenset(feasible.get(group, frozenset()) - {node})
            else:
                blockers[group, node] = blockers.get((group, node), frozenset()) | needed
    placement = dataclasses.replace(problem.placement, feasible_nodes=feasible)
    return dataclasses.replace(problem, placement=placement, blockers=blockers)


def _short(
    members: Sequence[PodInfo],
    assignment: Mapping[str, str],
    gone: Sequence[PodInfo],
    snapshot: Snapshot,
    profile: ProfileView,
) -> list[str]:
    restore = snapshot.simulate_removal(gone)
    try:
        return short_of_room(
            members, assignment, lambda pod, nodes, limit: profile.member_room(pod, snapshot, nodes, limit)
        )
    finally:
        restore()


def _reprieve(
    planned: Sequence[PodInfo], node: str, local: Sequence[PodInfo], snapshot: Snapshot, profile: ProfileView
) -> frozenset[str] | None:
    """The candidates on ``node`` that must go for ``planned`` to fit there (None: none suffice)."""
    assignment = {m.uid: node for m in planned}
    gone = list(local)
    if _short(planned, assignment, gone, snapshot, profile):
        return None
    for pod in sorted(local, key=lambda p: (-p.priority, p.key)):
        spared = [p for p in gone if p.uid != pod.uid]
        if not _short(planned, assignment, spared, snapshot, profile):
            gone = spared
    return frozenset(p.uid for p in gone)
