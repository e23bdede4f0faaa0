"""GangDefragmentation (ours): free one topology domain for a gang that has waited too long, by
moving a few lower-priority pods out of it, each into a Reservation made first
(docs/descheduler.md, "Gang defragmentation"). A BalancePlugin of ``operators.descheduler.framework``.

Each round: follow the plans already made (abort, or evict once every Reservation is Available
and the gang still needs exactly that), then plan for the gangs waiting without one. Plans live
in the labelled Reservations and the PodGroup's annotation, so a restarted process picks them up.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from apis.client.rbac import PolicyRule
from apis.core import Node, Pod
from apis.errors import InvalidAnnotation
from apis.extension.defrag import (
    ANNOTATION_DEFRAG_PLAN,
    LABEL_DEFRAG_PLAN,
    DefragMove,
    DefragPlan,
    get_defrag_plan,
)
from apis.extension.networktopology import get_network_topology_spec
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from apis.scheduling.reservation import Reservation
from operators.descheduler.defrag import planner
from operators.descheduler.defrag.args import GangDefragmentationArgs
from operators.descheduler.defrag.domains import Domain, domains, gather_layer
from operators.descheduler.defrag.movable import controller_of, movable, workload_budgets
from operators.descheduler.defrag.reservations import reservation_for
from operators.descheduler.defrag.room import free_by_node, live, units
from operators.descheduler.defrag.waiting import blocked_gangs, gang_key, members_by_gang
from operators.descheduler.framework import ClusterObjects, DeschedulerHandle, EvictOptions
from operators.descheduler.lownodeload.nodefit import node_fits, pod_requests_with_slot

__all__ = ["ABORTED", "DONE", "DRY_RUN", "EVICTING", "NAME", "PLANNED", "RBAC", "GangDefragmentation", "new"]

NAME = "GangDefragmentation"
PLANNED = "DefragmentationPlanned"
DRY_RUN = "DefragmentationDryRun"
EVICTING = "DefragmentationEvicting"
ABORTED = "DefragmentationAborted"
DONE = "DefragmentationDone"

RBAC: tuple[PolicyRule, ...] = (
    PolicyRule(
        ("scheduling.sigs.k8s.io",),
        ("podgroups",),
        ("get", "list", "watch", "patch"),
        why="GangDefragmentation finds waiting gangs and describes its plan on their PodGroup.",
    ),
    PolicyRule(
        ("scheduling.koordinator.sh",),
        ("clusternetworktopologies",),
        ("get", "list", "watch"),
        why="GangDefragmentation frees a domain of the gang's MustGather layer.",
    ),
    PolicyRule(
        ("scheduling.koordinator.sh",),
        ("reservations",),
        ("get", "list", "watch", "create", "delete"),
        why="GangDefragmentation reserves every move of a plan before evicting any.",
    ),
    PolicyRule(
        ("",),
        ("pods",),
        ("list",),
        why="GangDefragmentation lists the unbound gang members (spec.nodeName=).",
    ),
    PolicyRule(
        ("", "events.k8s.io"),
        ("events",),
        ("create", "patch"),
        why="GangDefragmentation reports its plans as events on the PodGroup.",
    ),
)
"""Beyond what the descheduler's core needs; moves go through the MigrationController."""

log = logging.getLogger(__name__)


class _Round:
    """What one round reads, once."""

    def __init__(
        self,
        nodes: Sequence[Node],
        handle: DeschedulerHandle,
        pod_groups: Sequence[PodGroup],
        unbound: Sequence[Pod],
        reservations: Sequence[Reservation],
        topology: ClusterNetworkTopology | None,
    ) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.metadata.name or "")
        self.pods = {
            n.metadata.name or "": [p for p in handle.pods_on_node(n.metadata.name or "") if live(p)]
            for n in self.nodes
        }
        self.pod_groups = {gang_key(pg): pg for pg in pod_groups}
        self.pending = members_by_gang([p for p in unbound if live(p)])
        self.bound = {
            k: len(v) for k, v in members_by_gang([p for ps in self.pods.values() for p in ps]).items()
        }
        self.reservations = {r.metadata.name or "": r for r in reservations}
        self.topology = topology
        self.free = free_by_node(self.nodes, lambda n: self.pods.get(n, ()), reservations)

    def pod(self, uid: str, node: str) -> Pod | None:
        return next((p for p in self.pods.get(node, ()) if p.metadata.uid == uid), None)

    def members(self, key: str) -> list[planner.Member]:
        return [
            planner.Member(
                f"{p.metadata.namespace}/{p.metadata.name}",
                units(pod_requests_with_slot(p)),
                frozenset(n.metadata.name or "" for n in self.nodes if node_fits(p, n, {})),
            )
            for p in sorted(self.pending.get(key, ()), key=lambda p: p.metadata.name or "")
        ]

    def domains_of(self, pg: PodGroup) -> list[Domain] | None:
        try:
            spec = get_network_topology_spec(pg.metadata.annotations)
        except InvalidAnnotation:  # the scheduler reports it
            return None
        layer = gather_layer(spec, self.topology)
        return None if layer is None else domains(self.nodes, self.topology, layer)


class GangDefragmentation:
    """One instance per profile; its plans (by gang key) live across rounds."""

    name = NAME

    def __init__(
        self,
        args: GangDefragmentationArgs,
        handle: DeschedulerHandle,
        client: ClusterObjects,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.args = args
        self.handle = handle
        self.client = client
        self._clock = clock
        self.plans: dict[str, DefragPlan] = {}
        self._loaded = False
        self._dry_run_reported: dict[str, tuple[str, ...]] = {}
        self._since: dict[str, datetime] = {}
        """Per blocked gang, the earliest time it was seen unschedulable (waiting.py)."""

    async def balance(self, nodes: Sequence[Node]) -> None:
        now = self._clock()
        reservations = await self.client.reservations(LABEL_DEFRAG_PLAN)
        current = _Round(
            nodes,
            self.handle,
            await self.client.pod_groups(),
            await self.client.unbound_pods(),
            reservations,
            await self.client.topology(),
        )
        if not self._loaded:
            await self._rebuild(current)
            self._loaded = True
        for key in sorted(self.plans):
            await self._follow(self.plans[key], current, now)
        threshold = timedelta(seconds=self.args.wait_threshold_seconds)
        blocked = blocked_gangs(
            list(current.pod_groups.values()), current.pending, current.bound, self._since
        )
        self._since = {gang.key: gang.since for gang in blocked}
        for gang in blocked:
            if gang.waited(now, threshold) and gang.key not in self.plans:
                await self._plan(gang.pod_group, gang.priority, current, now)

    # ---- restart -----------------------------------------------------------------------------

    async def _rebuild(self, current: _Round) -> None:
        """Plans from the PodGroups' annotations, else from the labelled Reservations; a
        Reservation of no known plan whose gang is gone is deleted."""
        for key, pg in current.pod_groups.items():
            found = get_defrag_plan(pg.metadata.annotations)
            if found is not None:
                self.plans[key] = found
        known = {p.id for p in self.plans.values()}
        for name, reservation in sorted(current.reservations.items()):
            found = get_defrag_plan(reservation.metadata.annotations)
            if found is None or found.id in known:
                continue
            if found.gang in current.pod_groups and found.gang not in self.plans:
                self.plans[found.gang] = found
                known.add(found.id)
            elif reservation.status is None or reservation.status.phase != "Succeeded":
                log.info(
                    "deleting reservation %s of defragmentation plan %s: its gang is gone", name, found.id
                )
                await self.client.delete_reservation(name)

    # ---- following a plan --------------------------------------------------------------------

    async def _end(self, plan: DefragPlan, current: _Round, reason: str, message: str, delete: bool) -> None:
        del self.plans[plan.gang]
        if delete:
            for move in plan.moves:
                await self.client.delete_reservation(move.reservation)
        pg = current.pod_groups.get(plan.gang)
        log.info("defragmentation plan %s for %s: %s", plan.id, plan.gang, message)
        if pg is None:
            return
        namespace, name = plan.gang.split("/", 1)
        await self.client.annotate_pod_group(namespace, name, {ANNOTATION_DEFRAG_PLAN: None})
        type_ = "Normal" if reason == DONE else "Warning"
        await self.client.pod_group_event(pg, reason, f"defragmentation plan {plan.id}: {message}", type_)

    async def _follow(self, plan: DefragPlan, current: _Round, now: datetime) -> None:
        reserving = plan.phase == "Reserving"
        pg = current.pod_groups.get(plan.gang)
        if pg is None:
            await self._end(plan, current, ABORTED, "the PodGroup is gone", delete=reserving)
            return
        min_member = (pg.spec.min_member or 0) if pg.spec else 0
        if current.bound.get(plan.gang, 0) >= min_member:
            if reserving:
                await self._end(
                    plan, current, ABORTED, "the gang no longer needs it: it is bound", delete=True
                )
            else:
                await self._end(plan, current, DONE, "the gang is bound", delete=False)
            return
        if (now - plan.created).total_seconds() > self.args.plan_timeout_seconds:
            await self._end(
                plan, current, ABORTED, f"timed out after {self.args.plan_timeout}", delete=reserving
            )
            return
        if not reserving:
            return  # the moves were asked for; the MigrationController carries them out
        for move in plan.moves:
            reservation = current.reservations.get(move.reservation)
            phase = reservation.status.phase if reservation and reservation.status else None
            if reservation is None or phase in ("Failed", "Succeeded"):
                what = "is gone" if reservation is None else f"is {phase}"
                await self._end(plan, current, ABORTED, f"reservation {move.reservation} {what}", delete=True)
                return
        if any(
            (r := current.reservations[m.reservation]).status is None or r.status.phase != "Available"
            for m in plan.moves
        ):
            return  # wait for the scheduler to place them all
        await self._carry_out(plan, current)

    async def _carry_out(self, plan: DefragPlan, current: _Round) -> None:
        members = current.members(plan.gang)
        pg = current.pod_groups[plan.gang]
        for domain in current.domains_of(pg) or ():
            if await asyncio.to_thread(planner.domain_holds, members, domain, current.free):
                await self._end(
                    plan,
                    current,
                    ABORTED,
                    f"the gang fits in {domain.layer} {domain.name} without moves",
                    delete=True,
                )
                return
        after = {n: dict(room) for n, room in current.free.items()}
        pods: list[tuple[DefragMove, Pod]] = []
        for move in plan.moves:
            pod = current.pod(move.uid, move.node)
            if pod is None:
                continue  # already gone: its room is free
            pods.append((move, pod))
            for r, q in units(pod_requests_with_slot(pod)).items():
                after[move.node][r] = after[move.node].get(r, 0) + q
        domain = Domain(plan.layer, plan.domain, tuple(plan.nodes))
        if not await asyncio.to_thread(planner.domain_holds, members, domain, after):
            message = f"the gang would not fit in {plan.layer} {plan.domain} even after the moves"
            await self._end(plan, current, ABORTED, message, delete=True)
            return
        evictor = self.handle.evictor
        refused = [
            m.name for m, pod in pods if not evictor.filter(pod) or not evictor.pre_eviction_filter(pod)
        ]
        if refused:
            await self._end(
                plan, current, ABORTED, f"the evictor refuses to move {', '.join(refused)}", delete=True
            )
            return
        reason = f"gang defragmentation plan {plan.id}: frees {plan.layer} {plan.domain} for gang {plan.gang}"
        asked = []
        for move, pod in pods:
            if await evictor.evict(
                pod, EvictOptions(plugin_name=NAME, reason=reason, reservation=move.reservation)
            ):
                asked.append(move.name)
        evicting = plan.model_copy(update={"phase": "Evicting"})
        self.plans[plan.gang] = evicting
        namespace, name = plan.gang.split("/", 1)
        await self.client.annotate_pod_group(
            namespace, name, {ANNOTATION_DEFRAG_PLAN: evicting.model_dump_json(by_alias=True)}
        )
        message = (
            f"every move is reserved; asked to move {len(asked)} of {len(pods)} pod(s): {', '.join(asked)}"
        )
        type_ = "Normal" if len(asked) == len(pods) else "Warning"
        await self.client.pod_group_event(pg, EVICTING, f"defragmentation plan {plan.id}: {message}", type_)

    # ---- planning ----------------------------------------------------------------------------

    def _problem(self, gang_priority: int, key: str, current: _Round) -> planner.PlanProblem:
        candidates = []
        all_pods = [p for ps in current.pods.values() for p in ps]
        for node, pods in current.pods.items():
            for pod in pods:
                if not movable(pod, gang_priority, self.args, self.handle.evictor.filter):
                    continue
                owner = controller_of(pod)
                candidates.append(
                    planner.Candidate(
                        f"{pod.metadata.namespace}/{pod.metadata.name}",
                        node,
                        units(pod_requests_with_slot(pod)),
                        pod.spec.priority or 0,
                        owner.uid if owner else None,
                        frozenset(
                            n.metadata.name or ""
                            for n in current.nodes
                            if n.metadata.name != node and node_fits(pod, n, {})
                        ),
                    )
                )
        unbound = [p for ps in current.pending.values() for p in ps]
        return planner.PlanProblem(
            free=current.free,
            candidates=candidates,
            members=current.members(key),
            budgets=workload_budgets([*all_pods, *unbound], self.args),
            max_moves=self.args.max_pods_to_move,
        )

    async def _plan(self, pg: PodGroup, gang_priority: int, current: _Round, now: datetime) -> None:
        key = gang_key(pg)
        found_domains = current.domains_of(pg)
        if not found_domains:
            log.info("gang %s: no topology domain to free", key)
            return
        problem = self._problem(gang_priority, key, current)
        found = await asyncio.to_thread(
            planner.plan, problem, found_domains, self.args.solver_time_limit_seconds
        )
        if found is None or not found.moves:
            log.info(
                "gang %s: %s",
                key,
                "no plan within the limits" if found is None else "a domain holds it already",
            )
            return
        plan_id = hashlib.sha256(f"{pg.metadata.uid or key}/{now.isoformat()}".encode()).hexdigest()[:10]
        moves = []
        pods: list[Pod] = []
        for i, c in enumerate(found.moves):
            namespace, name = c.key.split("/", 1)
            pod = next(
                p
                for p in current.pods[c.node]
                if p.metadata.namespace == namespace and p.metadata.name == name
            )
            pods.append(pod)
            moves.append(
                DefragMove(
                    namespace=namespace,
                    name=name,
                    uid=pod.metadata.uid or "",
                    node=c.node,
                    priority=c.priority,
                    reservation=f"defrag-{plan_id}-{i}",
                )
            )
        plan = DefragPlan(
            id=plan_id,
            gang=key,
            layer=found.domain.layer,
            domain=found.domain.name,
            nodes=list(found.domain.nodes),
            moves=moves,
            created=now,
        )
        if self.args.dry_run:
            signature = (plan.domain, *(m.uid for m in moves))
            if self._dry_run_reported.get(key) != signature:
                self._dry_run_reported[key] = signature
                await self.client.pod_group_event(pg, DRY_RUN, f"dry run: {plan.describe()}")
            return
        created: list[str] = []
        for move, pod in zip(moves, pods, strict=True):
            if not await self.client.create_reservation(
                reservation_for(pod, move, plan, self.args.plan_timeout_seconds)
            ):
                for name in created:
                    await self.client.delete_reservation(name)
                log.warning(
                    "gang %s: reservation %s already exists; plan %s dropped", key, move.reservation, plan_id
                )
                return
            created.append(move.reservation)
        self.plans[key] = plan
        namespace, name = key.split("/", 1)
        await self.client.annotate_pod_group(
            namespace, name, {ANNOTATION_DEFRAG_PLAN: plan.model_dump_json(by_alias=True)}
        )
        await self.client.pod_group_event(pg, PLANNED, plan.describe())


def new(args: GangDefragmentationArgs, handle: DeschedulerHandle) -> GangDefragmentation:
    """The factory the descheduler's registry calls: the API through the handle's ``objects``."""
    return GangDefragmentation(args, handle, handle.objects)
