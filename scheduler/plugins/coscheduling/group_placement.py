"""Placing a gang group as a whole, off the scheduling cycle.

The first member of a group to reach PreFilter asks for the group's placement. The problem is
built on the cycle (it reads the snapshot: which nodes each class of members passes Filter on,
their free resources and topology paths) and is plain frozen data; the solve (CP-SAT, or the
greedy planner) then runs in a worker thread, so other pods keep being scheduled meanwhile
(CP-SAT releases the GIL). Until it returns, the group's members wait quietly (PENDING: no event).

When the solve returns, on the event loop:

- infeasible: the reason is kept on the group (every member fails with it, and each PodGroup of
  the group gets an event) until something free in the cluster changes;
- a plan: it is checked against the cache as it is now (what was bound during the solve may have
  taken planned room: then the group is planned again), each member is nominated to its node so
  that later pods leave that room alone, and the members are activated to take their places.

Without a running event loop (a plugin driven synchronously in a test) the solve runs inline; so
does the solve of the rest of a group some of whose members are bound already (a scheduler killed
between the bindings, ``Coscheduling.queue_first``): no pod may take its room while it is solved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler import solver
from scheduler.background import BackgroundTasks
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.gangs import Gang, GangGroup
from scheduler.plugins.coscheduling.placement import TopologyError, build_problem, short_of_room
from scheduler.solver.problem import Infeasible, PlacementProblem, Plan, SolveOptions

__all__ = ["GroupPlanner"]

log = logging.getLogger(__name__)

TopologySource = Callable[[], ClusterNetworkTopology | None]
"""The ClusterNetworkTopology named ``default`` now (None: there is none)."""

FailureReporter = Callable[[Gang, str], None]
"""(a gang of the group, the reason): say on the group's PodGroups why it cannot be placed."""


@dataclass(frozen=True, slots=True)
class _Solved:
    result: Plan | Infeasible
    fell_back: bool
    seconds: float


def _solve(problem: PlacementProblem) -> _Solved:
    """Runs in a worker thread: touches nothing but the frozen problem."""
    fell_back = False

    def fallback(_: object) -> None:
        nonlocal fell_back
        fell_back = True

    started = time.perf_counter()
    result = solver.solve(problem, on_fallback=fallback)
    return _Solved(result, fell_back, time.perf_counter() - started)


@dataclass
class GroupPlanner:
    handle: Handle
    options: SolveOptions
    aware_network_topology: bool
    """Honour the gangs' network-topology-spec (``CoschedulingArgs.awareNetworkTopology``)."""
    topology: TopologySource
    report: FailureReporter
    _solving: dict[str, int] = field(default_factory=dict)
    """Group id -> the cache version its problem was built at, while its solve runs."""
    _background: BackgroundTasks = field(default_factory=BackgroundTasks)

    def solving(self, group_id: str) -> bool:
        return group_id in self._solving

    def plan(
        self,
        gang: Gang,
        group: GangGroup,
        pending_members: Callable[[], Sequence[PodInfo]],
        snapshot: Snapshot,
        *,
        inline: bool = False,
    ) -> Status | None:
        """None when ``group.plan`` names a node for every pending member; otherwise PENDING while
        the group's solve runs, or why the group cannot be placed. ``pending_members`` is only
        called when a new plan is needed (it sorts the whole group). ``inline``: solve on the
        cycle, so that no pod scheduled meanwhile takes the group's room (the rest of a part-bound
        group, whose bound members wait for it)."""
        if group.failure is not None and group.failure_version == snapshot.version:
            return Status.unschedulable(group.failure)
        if group.id in self._solving:
            return Status.pending(f"gang group {group.id}: its placement is being computed")
        members = pending_members()
        if not members:
            return None
        spec = gang.topology_spec if self.aware_network_topology else None
        topology = self.topology() if spec is not None else None
        if spec is not None and topology is None:
            return Status.unresolvable(
                f"gang {gang.id} asks for network topology, "
                "but there is no ClusterNetworkTopology named default"
            )
        profile = self.handle.profile
        uids = {m.uid for m in members}
        restore = snapshot.lift_nominations(lambda n: n.pod.uid in uids)  # the group's own room
        profile.restore_reserved(members, snapshot)  # and reserved for them (till the cycle's end)
        try:
            problem = build_problem(
                group.id,
                members,
                snapshot,
                lambda member: profile.feasible_rows(member, snapshot),
                topology=topology,
                spec=spec,
                options=self.options,
                score_rows=lambda member, rows: profile.score_rows(member, snapshot, rows),
                spread=profile.gang_spread(members, snapshot),
                member_rooms=lambda member, nodes, limit: profile.member_room(member, snapshot, nodes, limit),
            )
        except TopologyError as exc:
            return Status.unresolvable(f"gang {gang.id}: {exc}")
        finally:
            restore()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._adopt(gang, group, members, _solve(problem), snapshot.version)
        if inline:
            # Adopted, the plan nominates the members (this snapshot predates that) and activates
            # them: this member takes its place in its next cycle, as after a solve off the cycle.
            failure = self._adopt(gang, group, members, _solve(problem), snapshot.version)
            return failure or Status.pending(f"gang group {group.id}: placed, its members are next in line")
        self._solving[group.id] = snapshot.version
        self._background.spawn(self._solve_off_cycle(gang, group, members, problem))
        return Status.pending(f"gang group {group.id}: its placement is being computed")

    def solves_in_flight(self) -> int:
        """Placements being solved off the cycle now."""
        return len(self._background)

    async def _solve_off_cycle(
        self, gang: Gang, group: GangGroup, members: Sequence[PodInfo], problem: PlacementProblem
    ) -> None:
        try:
            solved = await asyncio.to_thread(_solve, problem)
        except Exception:
            log.exception("placing gang group %s failed", group.id)
            solved = _Solved(
                Infeasible("INVALID", f"gang group {group.id}: the placement failed"), False, 0.0
            )
        finally:
            version = self._solving.pop(group.id, -1)
        if self._adopt(gang, group, members, solved, version) is not None:
            # Infeasible or stale: the members retry now (an adopted plan activates them itself).
            self.handle.activate({m.uid for m in members})

    def _adopt(
        self, gang: Gang, group: GangGroup, members: Sequence[PodInfo], solved: _Solved, version: int
    ) -> Status | None:
        result = solved.result
        status = result.status if isinstance(result, Plan) else "INFEASIBLE"
        gap = result.gap if isinstance(result, Plan) else None
        self.handle.solver_metrics.solved(
            self.options.strategy, status, solved.seconds, solved.fell_back, gap
        )
        if isinstance(result, Infeasible):
            group.failure, group.failure_version = result.message, version
            self.report(gang, result.message)
            return Status.unschedulable(result.message)
        assignment = dict(result.assignment)
        self.drop(group)
        stale = self._stale_nodes(members, assignment)
        if stale:
            log.info(
                "the plan of gang group %s went stale during its solve (%s): planning again", group.id, stale
            )
            return Status.pending(f"gang group {group.id}: its placement is being computed again")
        group.plan = assignment
        group.failure = None
        by_uid = {m.uid: m for m in members}
        for uid, node in assignment.items():
            member = by_uid.get(uid)
            if member is not None:
                self.handle.nominator.nominate(member, node)
        self.handle.activate(set(assignment))  # the members are next in line
        return None

    def _stale_nodes(self, members: Sequence[PodInfo], assignment: dict[str, str]) -> list[str]:
        """Planned nodes that no longer have room for the members planned on them (the room held
        for the members themselves, by an earlier plan or a preemption, counts as theirs)."""
        snapshot = self.handle.snapshot()
        uids = {m.uid for m in members}
        restore = snapshot.lift_nominations(lambda n: n.pod.uid in uids)
        try:
            profile = self.handle.profile
            profile.restore_reserved(members, snapshot)
            short = self._short_nodes(snapshot, members, assignment)
            rooms = short_of_room(
                members,
                assignment,
                lambda member, nodes, limit: profile.member_room(member, snapshot, nodes, limit),
            )
            return sorted({*short, *rooms})
        finally:
            snapshot.close()
            restore()

    @staticmethod
    def _short_nodes(snapshot: Snapshot, members: Sequence[PodInfo], assignment: dict[str, str]) -> list[str]:
        table = snapshot.table
        by_uid = {m.uid: m for m in members}
        need: dict[str, dict[str, int]] = {}
        for uid, node in assignment.items():
            member = by_uid.get(uid)
            if member is None:
                continue
            total = need.setdefault(node, {})
            for resource, amount in member.requests.items():
                total[resource] = total.get(resource, 0) + amount
        stale = []
        for node, total in sorted(need.items()):
            row = table.row.get(node)
            if row is None:
                stale.append(node)
                continue
            resources = sorted(total)
            cols = np.array([table.column_of(r) for r in resources], dtype=np.int64)
            free = table.free(np.array([row], dtype=np.int64), cols)[0]
            if any(int(f) < total[r] for f, r in zip(free.tolist(), resources, strict=True)):
                stale.append(node)
        return stale

    def drop(self, group: GangGroup, uids: Collection[str] | None = None) -> None:
        """Forget the plan of ``uids`` (every member: None) and the room held for them."""
        for uid in list(group.plan) if uids is None else list(uids):
            if group.plan.pop(uid, None) is not None:
                self.handle.nominator.clear_nomination(uid)
