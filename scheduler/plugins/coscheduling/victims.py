"""From the scheduler's view to a victim-selection problem, built once.

With every candidate victim removed from the cycle's view, each class of the job's pending
members runs the profile's PreFilter and Filter (``ProfileView.feasible_rows``), so every Filter
of the members is honoured with the room the victims would free. Each node's free room is given as
it is with the victims still there (``held``), and the victims on each node with their priority,
job (a gang group is one job), PodDisruptionBudgets, reclaim budget and quota release; the solver
(``scheduler.solver.select_victims``) then picks which to evict.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from apis.core import PodDisruptionBudget
from apis.extension.networktopology import NetworkTopologySpec
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.extensions import QuotaRelease
from scheduler.framework.handle import ProfileView
from scheduler.plugins.coscheduling.placement import TopologyError, build_problem, problem_resources
from scheduler.plugins.helper.pod_affinity import may_repel
from scheduler.solver import PreemptionProblem, ResourceVector, SolveOptions, VictimSpec
from scheduler.solver.problem import PlacementProblem

__all__ = ["BudgetOf", "VictimProblemBuilder"]

BudgetOf = Callable[[PodInfo, PodInfo], tuple[str, Mapping[str, int]] | None]
"""(preemptor, victim) -> the reclaim budget the victim counts against (None: none)."""

UNLIMITED = 2**62


@dataclass(frozen=True)
class VictimProblemBuilder:
    profile: ProfileView
    options: SolveOptions
    budget_of: BudgetOf
    pdbs: Mapping[str, PodDisruptionBudget]
    """Every PodDisruptionBudget by ``namespace/name``."""

    def build(
        self,
        trigger: PodInfo,
        job: str,
        members: Sequence[PodInfo],
        candidates: Sequence[PodInfo],
        snapshot: Snapshot,
        *,
        topology: ClusterNetworkTopology | None,
        spec: NetworkTopologySpec | None,
        release: QuotaRelease | None,
    ) -> PreemptionProblem | str:
        """The problem, or why it cannot be posed (a broken topology)."""
        resources = problem_resources(members)
        held: dict[str, list[int]] = {}
        located: list[tuple[PodInfo, str, tuple[int, ...]]] = []
        for pod in candidates:
            node = snapshot.node_of(pod.uid)
            if node is None:
                continue
            requests = tuple(pod.requests.get(resource, 0) for resource in resources)
            located.append((pod, node, requests))
            amounts = held.get(node)
            if amounts is None:
                held[node] = list(requests)
            else:
                held[node] = [a + b for a, b in zip(amounts, requests, strict=True)]
        uids = {m.uid for m in members}
        unlift = snapshot.lift_nominations(lambda n: n.pod.uid in uids)  # the job's own room
        restore = snapshot.simulate_removal(candidates)
        try:
            placement = build_problem(
                job,
                members,
                snapshot,
                lambda member: self.profile.feasible_rows(member, snapshot),
                topology=topology,
                spec=spec,
                options=self.options,
                held=held,
                also_nodes=[node for _, node, _ in located] if release is not None else (),
                member_rooms=lambda member, nodes, limit: self.profile.member_room(
                    member, snapshot, nodes, limit
                ),
            )
            blockers = self._blockers(placement, members, candidates, snapshot)
        except TopologyError as exc:
            return f"gang {job}: {exc}"
        finally:
            restore()
            unlift()
        nodes = {n.name for n in placement.nodes}
        # Room columns (GPU sets) follow the resources; victims free none of it in the solver's
        # count (the node offers its room with them all gone; victim_rooms checks who must go).
        rooms = len(placement.resources) - len(resources)
        pdbs = self._pdbs_of([pod for pod, _, _ in located])
        budgets: dict[str, ResourceVector] = {}
        victims: list[VictimSpec] = []
        job_of_victim: dict[str, str] = {}
        no_rooms = (0,) * rooms
        for pod, node, requests in located:
            if node not in nodes:
                continue  # a node no member can use, and no quota release to count it towards
            budget = self.budget_of(trigger, pod)
            if budget is not None:
                budgets[budget[0]] = ResourceVector(
                    tuple(budget[1].get(r, 0) if r in budget[1] else UNLIMITED for r in resources)
                    + (UNLIMITED,) * rooms
                )
            victims.append(
                VictimSpec(
                    uid=pod.uid,
                    name=pod.key,
                    node=node,
                    request=ResourceVector(requests + no_rooms),
                    priority=pod.priority,
                    job=job_of_victim.setdefault(pod.uid, self.profile.job_of(pod)),
                    pdbs=pdbs.get(pod.uid, ()),
                    budget=budget[0] if budget is not None else None,
                    release=release.key if release is not None and release.holds(pod) else None,
                )
            )
        placement, blockers = _usable(placement, blockers, {v.uid for v in victims})
        jobs = {v.job for v in victims}
        sizes = Counter(
            j
            for p in snapshot.assigned_pods()
            if (j := job_of_victim.get(p.uid) or self.profile.job_of(p)) in jobs
        )
        allowed = {name: self.pdbs[name].status.disruptions_allowed for v in victims for name in v.pdbs}
        releases = {}
        if release is not None:
            releases[release.key] = ResourceVector(
                tuple(release.amounts.get(r, 0) for r in resources) + (0,) * rooms
            )
        return PreemptionProblem(placement, tuple(victims), dict(sizes), allowed, budgets, releases, blockers)

    def _blockers(
        self,
        placement: PlacementProblem,
        members: Sequence[PodInfo],
        candidates: Sequence[PodInfo],
        snapshot: Snapshot,
    ) -> dict[tuple[str, str], frozenset[str]]:
        """(pod group, node) -> the candidates whose presence alone fails the group's Filters on
        the node, found as kube-scheduler's reprieve does: with every candidate gone, each one
        that pod anti-affinity may involve is put back alone and Filter asked again."""
        by_uid = {m.uid: m for m in members}
        found: dict[tuple[str, str], set[str]] = {}
        table = snapshot.table
        for group in placement.pod_groups:
            member = by_uid[group.member_ids[0]]
            near = [c for c in candidates if may_repel(member, c)]
            if not near:
                continue
            feasible = placement.feasible_nodes.get(group.name, frozenset())
            for victim in near:
                undo = snapshot.simulate_return([victim])
                try:
                    still = {table.names[int(r)] for r in self.profile.feasible_rows(member, snapshot)}
                finally:
                    undo()
                for node in feasible - still:
                    found.setdefault((group.name, node), set()).add(victim.uid)
        return {key: frozenset(uids) for key, uids in found.items()}

    def _pdbs_of(self, pods: Sequence[PodInfo]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        if not self.pdbs:
            return out
        ordered = sorted(self.pdbs.items())
        for pod in pods:
            names = tuple(
                name
                for name, pdb in ordered
                if (pdb.metadata.namespace or "default") == pod.namespace
                and pdb.spec.selector is not None
                and pdb.spec.selector.matches(pod.labels)
            )
            if names:
                out[pod.uid] = names
        return out


def _usable(
    placement: PlacementProblem, blockers: Mapping[tuple[str, str], frozenset[str]], victims: set[str]
) -> tuple[PlacementProblem, dict[tuple[str, str], frozenset[str]]]:
    """A (group, node) whose blockers are not all candidate victims of the problem cannot be used."""
    unusable = {key for key, uids in blockers.items() if not uids <= victims}
    if not unusable:
        return placement, dict(blockers)
    feasible = {
        g: frozenset(n for n in names if (g, n) not in unusable)
        for g, names in placement.feasible_nodes.items()
    }
    kept = {key: uids for key, uids in blockers.items() if key not in unusable}
    return dataclasses.replace(placement, feasible_nodes=feasible), kept
