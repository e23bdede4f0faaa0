"""ElasticQuota: admit a pod only while its quota's runtime covers it (algorithms.md 4.5).

The plugin is an adapter: ``quotas.QuotaIndex`` holds the quota and profile objects and maps pods to
quotas, ``ledger.Ledger`` sums what each quota's pods ask for and use, ``forest.compute_forest``
turns both into every quota's figures (``scheduler.quota``: pure math), and ``writer.FiguresWriter``
writes the figures back onto the objects. Per pod:

1. PreFilter maps the pod to its quota and refreshes the figures (cached until a quota, a pod or
   a node changes).
2. It rejects the pod (Unschedulable, so that preemption may help) unless ``used + request <=
   runtime`` on every resource of the quota's max (``max`` instead of runtime when
   ``enableRuntimeQuota`` is false). A gang member brings its whole job: the request is the sum of
   the pending members charged to that quota of its gang, or of every gang of its gang group
   (``gang.scheduling.koordinator.sh/groups``, as Coscheduling resolves it), so a job never
   half-fills its quota.
3. A non-preemptible pod (label ``quota.scheduling.koordinator.sh/preemptible: "false"``) also needs
   ``non-preemptible used + request <= min`` on every resource of min.
4. With ``enableCheckParentQuota``, step 2 is repeated for every ancestor below the tree's root.
5. The quota hook plugins' ``check_pod`` may still refuse it (``hooks``).
6. A pod of a profile's tree may only go to that tree's nodes (PreFilterResult node names).
7. Reserve counts the pod as used at once; Unreserve takes it back.
8. PostFilter: quota preemption, the pod's own quota's lower-priority pods evicted on one node so
   that both the node and the quota hold it (``preempt``).

Quota hook plugins (``ElasticQuotaArgs.hookPlugins``) see every quota list and change (and may
replace the quota the plugin uses) and every change of a pod on a node (``hooks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from apis.core import Pod
from apis.duration import parse_go_duration_ns
from apis.extension import gang as gang_ext
from apis.extension import quota as quota_ext
from apis.extension.reservation import is_reserve_pod
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota as ElasticQuotaObject
from apis.scheduling.reservation import Reservation
from scheduler.backend.base import (
    ELASTICQUOTAPROFILES,
    ELASTICQUOTAS,
    PDBS,
    PODS,
    RESERVATIONS,
    EventType,
    WatchEvent,
)
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.eviction import EVICTION_RULES, EvictionRequest
from scheduler.framework.extensions import (
    RESERVATION_CREDIT,
    RESERVATION_TAKEN,
    PreemptionExtension,
    QuotaRelease,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    Diagnosis,
    EnqueueExtensions,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.elastic_quota import hooks, messages
from scheduler.plugins.elastic_quota.args import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.forest import (
    OUTSIDE,
    Forest,
    ForestState,
    NodeView,
    Totals,
    compute_forest,
    compute_totals,
)
from scheduler.plugins.elastic_quota.hooks import QuotaReader
from scheduler.plugins.elastic_quota.ledger import (
    Charge,
    Ledger,
    RequestsOf,
    gang_key,
    pod_requests,
    requests_without_overhead,
)
from scheduler.plugins.elastic_quota.preempt import QuotaPreemption
from scheduler.plugins.elastic_quota.quotas import QuotaIndex
from scheduler.plugins.elastic_quota.revoke import RevokeController
from scheduler.plugins.elastic_quota.writer import FiguresWriter, Payload, payload_of
from scheduler.plugins.helper.reservation import quota_stand_in
from scheduler.quota import Figures, Usage

__all__ = ["NAME", "RBAC", "ElasticQuota", "new"]

NAME = "ElasticQuota"
RBAC = (
    PolicyRule.on(
        ELASTICQUOTAS,
        "list",
        "watch",
        "patch",
        why="Quota trees are watched; runtime, request and used are written back as Koordinator's "
        "scheduler writes them (annotations, and status.used through the main resource).",
    ),
    PolicyRule.watching(ELASTICQUOTAPROFILES, why="Quota profiles (one tree root each)."),
    PolicyRule.watching(RESERVATIONS, why="Reservations charge their quota from their creation."),
    PolicyRule.watching(
        PDBS, why="Quota preemption spares pods whose PodDisruptionBudget allows no disruption."
    ),
    *EVICTION_RULES,
)
_SHRUNK = StateKey[PodInfo]("ElasticQuota/reservationShrunk")
"""The reservation's charge before an owner took room from it at Reserve (Unreserve restores it)."""
FIGURES_WRITE_INTERVAL_SECONDS = 1.0
"""The figures of one quota are patched at most this often."""

log = logging.getLogger(__name__)


def _masked_sum(pods: Iterable[PodInfo], names: Iterable[str], requests_of: RequestsOf) -> dict[str, int]:
    keys = list(names)
    total = dict.fromkeys(keys, 0)
    for pod in pods:
        requests = requests_of(pod)
        for name in keys:
            total[name] += requests.get(name, 0)
    return total


class ElasticQuota(PreFilterPlugin, PostFilterPlugin, ReservePlugin, EnqueueExtensions, PreemptionExtension):
    """Hierarchical elastic quota at PreFilter, PostFilter (quota preemption) and Reserve.

    The API job-level preemption (quota reclaim) uses, all pure reads of the current state:

    - ``quota_of(pod) -> str | None``: the quota the pod charges to (None: no quota, which only
      ``DisableDefaultQuota`` gives; otherwise pods that match nothing go to
      ``koordinator-default-quota``).
    - ``quota_figures() -> Mapping[str, Figures]``: every quota's min, max, runtime, used, request
      (and the rest of ``scheduler.quota.Figures``) per resource, in integer units (milli-CPU,
      bytes, counts), masked to the resources of the quota's max.
    - ``fits_after_removal(pods, victims) -> bool``: would every pod of ``pods`` pass this plugin's
      quota checks at once if ``victims`` were gone (their use and request removed and the
      runtimes recomputed)?
    - ``is_borrowing(pod) -> bool``: the pod's quota uses more than its min on some resource.

    Quota reclaim (``extensions.PreemptionExtension``, used by job-level preemption): a pod whose
    job stays within its quota's runtime may evict pods of any priority from the other quotas of
    its tree that use more than ``max(min, runtime)`` (``reclaimable``; their runtime already
    counts the claim, so a lender claiming its min back always qualifies), never non-preemptible
    ones, and only as much as those quotas hold above ``max(min, runtime)`` (``eviction_budget``).
    """

    def __init__(self, args: ElasticQuotaArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.index = QuotaIndex(
            namespace=args.quota_group_namespace,
            default_max=args.default_quota_group_max,
            system_max=args.system_quota_group_max,
            disable_default_quota=handle.features.disable_default_quota,
        )
        requests_of = (
            requests_without_overhead if handle.features.elastic_quota_ignore_pod_overhead else pod_requests
        )
        self.ledger = Ledger(handle.scheduler_name, requests_of)
        self._mapping_version = self.index.mapping_version
        self._nodes: tuple[int, list[NodeView]] | None = None
        self._forest: tuple[tuple[int, int, int, int], Forest] | None = None
        self._state: tuple[tuple[int, int], ForestState] | None = None
        """The kept trees, valid for one (quota index version, snapshot generation)."""
        self._totals: tuple[tuple[int, int], Totals] | None = None
        self._admitting: frozenset[str] = frozenset()
        self.writer = FiguresWriter(
            self._write,
            self._payloads,
            interval=FIGURES_WRITE_INTERVAL_SECONDS,
            version=lambda: (
                self.index.version,
                self.index.spec_version,
                self.ledger.version,
                self.handle.snapshot().generation,
            ),
        )
        self.revoke: RevokeController | None = None
        if args.monitor_all_quotas and args.enable_runtime_quota:
            self.revoke = RevokeController(
                self.quota_figures,
                self._running_pods,
                self._revoke,
                delay_seconds=parse_go_duration_ns(args.delay_evict_time) / 1e9,
                interval_seconds=max(parse_go_duration_ns(args.revoke_pod_interval) / 1e9, 0.01),
                clock=handle.clock,
                requests_of=requests_of,
            )
        self.preemption = QuotaPreemption(
            NAME, self, handle, spare_default_quota=args.disable_default_quota_preemption
        )
        reader = QuotaReader(figures=lambda name: self.quota_figures().get(name), children=self._children)
        self.hooks = hooks.build([(c.key, c.factory_key, c.factory_args) for c in args.hook_plugins], reader)
        handle.subscribe(ELASTICQUOTAS, self._on_quota_event)
        handle.subscribe(ELASTICQUOTAPROFILES, self._on_profile_event)
        handle.subscribe(PODS, self._on_pod_event)
        handle.subscribe(RESERVATIONS, self._on_reservation_event)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        """Quota freed (a pod gone), quotas or profiles changed, or capacity added."""
        return (
            ClusterEvent.POD_DELETE
            | ClusterEvent.CUSTOM_RESOURCE
            | ClusterEvent.NODE_ADD
            | ClusterEvent.NODE_UPDATE
        )

    # ---- informers ---------------------------------------------------------------------------

    def _on_quota_event(self, event: WatchEvent[ElasticQuotaObject]) -> None:
        event.dispatch(self._replace_quotas, self._on_quota, self._on_quota_deleted)
        if self.index.mapping_version != self._mapping_version:
            self._mapping_version = self.index.mapping_version
            self.ledger.remap(self._quota_name)
        self.writer.changed()

    def _replace_quotas(self, quotas: Sequence[ElasticQuotaObject]) -> None:
        self.index.replace_quotas(self.hooks.replace_quotas(quotas))

    def _on_quota(self, quota: ElasticQuotaObject) -> None:
        self.index.on_quota(self.hooks.on_quota(quota))

    def _on_quota_deleted(self, quota: ElasticQuotaObject) -> None:
        self.hooks.on_quota_deleted(quota)
        self.index.on_quota_deleted(quota)

    def _children(self, name: str) -> list[str]:
        return sorted(q for q, info in self.index.quotas.items() if info.spec.parent == name and q != name)

    def _on_profile_event(self, event: WatchEvent[ElasticQuotaProfile]) -> None:
        event.dispatch(self.index.replace_profiles, self.index.on_profile, self.index.on_profile_deleted)
        self.writer.changed()

    def _start_revoke(self) -> None:
        if self.revoke is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a synchronous test): ``revoke.tick`` is called by hand
        self.revoke.start()

    def _running_pods(self, quota: str) -> list[PodInfo]:
        return [
            c.pod
            for c in self.ledger.charges_of(quota)
            if c.assigned and not c.reserved and not is_reserve_pod(c.pod.annotations)
        ]

    async def _revoke(self, pod: PodInfo, quota: str) -> None:
        """Evict one pod of an overused quota (Eviction API: a PodDisruptionBudget may refuse)."""
        going = await self.handle.eviction.evict(
            EvictionRequest(
                pod=pod,
                reason="QuotaRevoked",
                event_type="Warning",
                action="Evicting",
                message=(
                    f"quota {quota} used more than its runtime for longer than "
                    f"{self.args.delay_evict_time}: evicted to give the quota back"
                ),
            )
        )
        if going:
            log.info(
                "revoked %s: quota %s used more than its runtime for longer than %s",
                pod.key,
                quota,
                self.args.delay_evict_time,
            )

    def _on_pod_event(self, event: WatchEvent[Pod]) -> None:
        self._start_revoke()
        if event.type is EventType.REPLACED:
            infos = [PodInfo.of(p) for p in event.objects]
            present = {p.uid for p in infos}
            for uid in self.ledger.uids():
                charge = self.ledger.charge(uid)
                if charge is None or is_reserve_pod(charge.pod.annotations):
                    continue  # a reservation's charge: kept by the reservation watch
                if uid not in present and not charge.reserved:
                    self.ledger.remove(uid)
                    self._pod_hooks(charge, None)
            for info in infos:
                old = self.ledger.charge(info.uid)
                self.ledger.on_pod(info, self._quota_name(info))
                self._pod_hooks(old, self.ledger.charge(info.uid))
        elif event.obj is not None:
            if is_reserve_pod(event.obj.metadata.annotations):
                return  # a reservation's stand-in: charged by the reservation watch
            info = PodInfo.of(event.obj)
            old = self.ledger.charge(info.uid)
            if event.type is EventType.DELETED:
                self.ledger.remove(info.uid)
            else:
                self.ledger.on_pod(info, self._quota_name(info))
            self._pod_hooks(old, self.ledger.charge(info.uid))
        self.writer.changed()

    def _on_reservation_event(self, event: WatchEvent[Reservation]) -> None:
        """A reservation charges its quota from its creation (a request while Pending, used once
        placed) for the room its owners have not taken (``helper.reservation.quota_stand_in``)."""
        if event.type is EventType.REPLACED:
            present = {r.metadata.uid or "" for r in event.objects}
            for uid in self.ledger.uids():
                charge = self.ledger.charge(uid)
                if charge is not None and is_reserve_pod(charge.pod.annotations) and uid not in present:
                    self.ledger.remove(uid)
            for reservation in event.objects:
                self._charge_reservation(reservation)
        elif event.obj is not None:
            if event.type is EventType.DELETED:
                self.ledger.remove(event.obj.metadata.uid or "")
            else:
                self._charge_reservation(event.obj)
        self.writer.changed()

    def _charge_reservation(self, reservation: Reservation) -> None:
        stand_in = quota_stand_in(reservation)
        if stand_in is None:
            self.ledger.remove(reservation.metadata.uid or "")
            return
        old = self.ledger.charge(stand_in.uid)
        if old is not None and old.reserved and not stand_in.node_name:
            return  # our Reserve placed it; the watch has not seen it Available yet
        self.ledger.on_pod(stand_in, self._quota_name(stand_in))

    def _pod_hooks(self, old: Charge | None, new: Charge | None) -> None:
        """The pod-update hook, for a pod on a node before or after (as Koordinator's, which
        follows the quotas' used)."""
        if not self.hooks.hooks:
            return
        before = old.pod if old is not None and old.assigned else None
        after = new.pod if new is not None and new.assigned else None
        if before is not None or after is not None:
            quota = new.quota if new is not None and after is not None else old.quota if old else ""
            self.hooks.on_pod_updated(quota, before, after)

    # ---- figures -----------------------------------------------------------------------------

    def _node_views(self, snapshot: Snapshot) -> list[NodeView]:
        if self._nodes is not None and self._nodes[0] == snapshot.generation:
            return self._nodes[1]
        table = snapshot.table
        views = []
        for row in snapshot.candidate_rows().tolist():
            values = table.allocatable[row]
            allocatable = {name: int(values[col]) for name, col in table.column.items() if values[col]}
            views.append(NodeView(table.names[row], snapshot.node_at(row).labels, allocatable))
        self._nodes = (snapshot.generation, views)
        return views

    def _current(self, snapshot: Snapshot) -> Forest:
        """The figures now: rebuilt after a quota is added, removed or moved, or a profile or node
        changes; after pod changes and changes of quotas' min, max, shared weight or lending,
        refreshed along the changed quotas' paths to their roots (``ForestState``)."""
        key = (self.index.version, self.index.spec_version, self.ledger.version, snapshot.generation)
        if self._forest is not None and self._forest[0] == key:
            return self._forest[1]
        changed = self.ledger.drain_changed()
        respecced, self.index.respecced = self.index.respecced, set()
        if self._state is not None and self._state[0] == (self.index.version, snapshot.generation):
            specs = {q: self.index.quotas[q].spec for q in respecced if q in self.index.quotas}
            usage = {q: self.ledger.usage_of(q) for q in changed | respecced}
            forest = self._state[1].update(changed, usage, specs)
        else:
            state = ForestState(
                self.index,
                self.ledger.usage(),
                self._totals_for(snapshot),
                scale_min=self.args.enable_min_quota_scale,
                guarantee=self.handle.features.elastic_quota_guarantee_usage,
            )
            self._state = ((self.index.version, snapshot.generation), state)
            forest = state.forest
        self._forest = (key, forest)
        return forest

    def _totals_for(self, snapshot: Snapshot) -> Totals:
        key = (self.index.version, snapshot.generation)
        if self._totals is None or self._totals[0] != key:
            self._totals = (key, compute_totals(self.index, self._node_views(snapshot)))
        return self._totals[1]

    def _compute(self, usage: Mapping[str, Usage], snapshot: Snapshot) -> Forest:
        """The figures from scratch over ``usage`` (what-if computations of preemption)."""
        return compute_forest(
            self.index,
            usage,
            self._totals_for(snapshot),
            scale_min=self.args.enable_min_quota_scale,
            guarantee=self.handle.features.elastic_quota_guarantee_usage,
        )

    # ---- filtering ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        quota = self._quota_name(pod)
        if not quota:
            return PreFilterResult(Status.success())  # no quota (DisableDefaultQuota): nothing to check
        if pod.uid in self._admitting and state.planning:
            # Preemption is planning this job with its quota freed by the victims it will choose.
            forest = self._current(snapshot)
            return PreFilterResult(node_names=forest.tree_nodes.get(forest.tree_of.get(quota, "")))
        pod = self._credited(state, pod)
        outside = self._outside_figures(quota)
        if outside is not None:
            problem = self._check_figures(outside, self._admitted_with(pod, quota), parents=())
            if problem is None:
                problem = self.hooks.check_pod(quota, pod)
            return PreFilterResult(Status.unschedulable(problem) if problem else Status.success())
        forest = self._current(snapshot)
        problem = self._check(forest, quota, self._admitted_with(pod, quota))
        if problem is None:
            problem = self.hooks.check_pod(quota, pod)
        if problem is not None:
            return PreFilterResult(Status.unschedulable(problem))
        nodes = forest.tree_nodes.get(forest.tree_of.get(quota, ""))
        return PreFilterResult(node_names=nodes)

    @staticmethod
    def _credited(state: CycleState, pod: PodInfo, credit: Mapping[str, int] | None = None) -> PodInfo:
        """``pod`` asking its quota only for what no reservation it may use already charges."""
        credit = state.get(RESERVATION_CREDIT) if credit is None else credit
        if not credit:
            return pod
        requests = {k: v - credit.get(k, 0) for k, v in pod.requests.items()}
        return dataclasses.replace(pod, requests={k: v for k, v in requests.items() if v > 0})

    def _admitted_with(self, pod: PodInfo, quota: str) -> list[PodInfo]:
        """The pods admitted together with ``pod``: the pending members of its job (its gang, or
        every gang of its gang group, as the profile's ``JobResolver`` names them) charged to its
        quota, or itself."""
        gang = gang_key(pod)
        if gang is None:
            return [pod]
        job = self.handle.profile.job_of(pod)
        gangs = gang_ext.gang_group_members(job) if job != pod.uid else [gang]
        members = [m for g in gangs for m in self.ledger.pending_gang_members(quota, g)]
        if all(m.uid != pod.uid for m in members):
            members.append(pod)
        return members

    def _outside_figures(self, quota: str) -> Figures | None:
        """The figures of the system or default quota under the default root, which stay outside
        the sharing (their runtime is their max): read from the ledger alone, so that the pods of
        clusters without quotas of their own never wait for a tree computation."""
        info = self.index.quotas.get(quota)
        if quota not in OUTSIDE or info is None or info.spec.parent != quota_ext.ROOT_QUOTA_NAME:
            return None
        spec, usage = info.spec, self.ledger.usage_of(quota)
        keys = list(spec.max)
        return Figures(
            name=spec.name,
            parent=spec.parent,
            min=dict(spec.min),
            max=dict(spec.max),
            auto_scale_min=dict(spec.min),
            shared_weight=dict(spec.shared_weight),
            child_request={k: usage.request.get(k, 0) for k in keys},
            request={k: min(usage.request.get(k, 0), spec.max[k]) for k in keys},
            used={k: usage.used.get(k, 0) for k in keys},
            non_preemptible_request={k: usage.non_preemptible_request.get(k, 0) for k in keys},
            non_preemptible_used={k: usage.non_preemptible_used.get(k, 0) for k in keys},
            runtime=dict(spec.max),
        )

    def _check(self, forest: Forest, quota: str, pods: Sequence[PodInfo]) -> str | None:
        """Why ``pods`` (all charged to ``quota``) cannot be admitted together; None if they can."""
        figures = forest.figures.get(quota)
        if figures is None:
            return f"quota {quota} is not part of any quota tree"
        parents: list[Figures] = []
        if self.args.enable_check_parent_quota:
            root = forest.tree_of.get(quota)
            parent = forest.figures.get(figures.parent)
            while parent is not None and parent.name != root:
                parents.append(parent)
                parent = forest.figures.get(parent.parent)
        return self._check_figures(figures, pods, parents=parents)

    def _check_figures(
        self, figures: Figures, pods: Sequence[PodInfo], *, parents: Sequence[Figures]
    ) -> str | None:
        what = self._what(pods)
        limits, limit_name = (
            (figures.runtime, "runtime") if self.args.enable_runtime_quota else (figures.max, "max")
        )
        problem = messages.insufficient(
            figures.name,
            figures.used,
            _masked_sum(pods, limits, self.ledger.requests_of),
            limits,
            limit_name,
            what,
        )
        if problem is not None:
            return problem
        keep_out = [p for p in pods if not quota_ext.is_preemptible(p.labels)]
        if keep_out:
            problem = messages.insufficient_non_preemptible(
                figures.name,
                figures.non_preemptible_used,
                _masked_sum(keep_out, figures.min, self.ledger.requests_of),
                figures.min,
                what,
            )
            if problem is not None:
                return problem
        topology = [figures.name]
        for parent in parents:
            topology.insert(0, parent.name)
            limits, limit_name = (
                (parent.runtime, "runtime") if self.args.enable_runtime_quota else (parent.max, "max")
            )
            problem = messages.insufficient_parent(
                topology,
                parent.used,
                _masked_sum(pods, limits, self.ledger.requests_of),
                limits,
                limit_name,
                what,
            )
            if problem is not None:
                return problem
        return None

    @staticmethod
    def _what(pods: Sequence[PodInfo]) -> str:
        gangs = {g for p in pods if (g := gang_key(p)) is not None}
        if not gangs:
            return ""
        if len(gangs) == 1:
            return f" of gang {next(iter(gangs))} ({len(pods)} pending members)"
        return f" of gang group {gang_ext.gang_group_id(gangs)} ({len(pods)} pending members)"

    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        return await self.preemption.post_filter(pod, snapshot, diagnosis)

    # ---- reserve -----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        quota = self._quota_name(pod)
        if quota:
            problem = self._reserve_from_reservation(state, pod, quota)
            if problem is not None:
                return Status.unschedulable(problem)
            self.ledger.reserve(pod, quota)
            self.hooks.on_pod_updated(quota, None, pod)
        self.writer.changed()
        return Status.success()

    def _reserve_from_reservation(self, state: CycleState, pod: PodInfo, quota: str) -> str | None:
        """An owner takes room its reservation already charges: that charge shrinks by what it
        took. A pod admitted with a reservation's credit that took none is checked in full."""
        taken = state.get(RESERVATION_TAKEN)
        if taken is not None:
            uid, amounts = taken
            charge = self.ledger.charge(uid)
            if charge is not None:
                requests = {k: max(0, v - amounts.get(k, 0)) for k, v in charge.pod.requests.items()}
                before = self.ledger.replace_requests(uid, requests)
                if before is not None:
                    state.write(_SHRUNK, before)
            return None
        if not state.get(RESERVATION_CREDIT) or gang_key(pod) is not None:
            return None
        outside = self._outside_figures(quota)
        if outside is not None:
            return self._check_figures(outside, [pod], parents=())
        return self._check(self._current(self.handle.snapshot()), quota, [pod])

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        shrunk = state.get(_SHRUNK)
        if shrunk is not None:
            self.ledger.restore(shrunk)
        quota = self._quota_name(pod)
        if quota:
            old = self.ledger.charge(pod.uid)
            self.ledger.unreserve(pod, quota)
            if old is not None and old.reserved:
                self.hooks.on_pod_updated(quota, pod, None)
        self.writer.changed()

    # ---- figures on the objects --------------------------------------------------------------

    def _payloads(self) -> list[tuple[Payload, Mapping[str, str]]]:
        forest = self._current(self.handle.snapshot())
        out = []
        for name, info in sorted(self.index.quotas.items()):
            figures = forest.figures.get(name)
            if info.exists and figures is not None:
                guarantee = self.handle.features.elastic_quota_guarantee_usage
                out.append((payload_of(figures, info.namespace, guarantee=guarantee), info.observed))
        return out

    async def _write(self, payload: Payload) -> None:
        await self.handle.backend.patch_custom(
            ELASTICQUOTAS, payload.namespace, payload.name, payload.patch()
        )

    async def close(self) -> None:
        """Stop the figures writer and the revoke controller (the app calls this at shutdown)."""
        await self.writer.close()
        if self.revoke is not None:
            await self.revoke.close()

    async def flush_figures(self) -> int:
        """Write the figures now (tests; the background writer does it within a second otherwise)."""
        return await self.writer.flush()

    # ---- API for preemption / quota reclaim ---------------------------------------------------

    def _quota_name(self, pod: PodInfo) -> str:
        return self.index.quota_for(pod.namespace, pod.labels)

    def quota_of(self, pod: PodInfo) -> str | None:
        """The quota ``pod`` charges to (see the class docstring)."""
        return self._quota_name(pod) or None

    def quota_figures(self) -> Mapping[str, Figures]:
        """Every quota's figures now, by quota name."""
        return self._current(self.handle.snapshot()).figures

    def is_borrowing(self, pod: PodInfo) -> bool:
        """The pod's quota uses more than its min on some resource of its max."""
        figures = self.quota_figures().get(self._quota_name(pod))
        if figures is None:
            return False
        return any(used > figures.min.get(name, 0) for name, used in figures.used.items())

    def reclaimable(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        """``victim``'s quota uses more than it is entitled to now (above both its min and its
        runtime, which counts the claim), and ``preemptor``'s job stays within its own runtime."""
        if not quota_ext.is_preemptible(victim.labels):
            return False
        forest = self._current(self.handle.snapshot())
        mine, theirs = self._quota_name(preemptor), self._quota_name(victim)
        claimant, holder = forest.figures.get(mine), forest.figures.get(theirs)
        if mine == theirs or claimant is None or holder is None:
            return False
        if forest.tree_of.get(mine) != forest.tree_of.get(theirs) or theirs in OUTSIDE:
            return False
        request = _masked_sum(self._admitted_with(preemptor, mine), claimant.runtime, self.ledger.requests_of)
        if any(claimant.used.get(r, 0) + request[r] > limit for r, limit in claimant.runtime.items()):
            return False
        return any(
            used > max(holder.min.get(r, 0), holder.runtime.get(r, 0)) for r, used in holder.used.items()
        )

    def eviction_budget(self, victim: PodInfo) -> tuple[str, Mapping[str, int]] | None:
        """What ``victim``'s quota holds above ``max(min, runtime)``, per resource of its max."""
        theirs = self._quota_name(victim)
        figures = self.quota_figures().get(theirs)
        if figures is None:
            return None
        keep = {r: max(figures.min.get(r, 0), figures.runtime.get(r, 0)) for r in figures.max}
        return f"quota:{theirs}", {r: max(0, figures.used.get(r, 0) - keep[r]) for r in figures.max}

    def quota_release(self, preemptor: PodInfo, members: Sequence[PodInfo]) -> QuotaRelease | None:
        """What lower-priority pods of the job's own quota must free for its quota check to pass
        (Koordinator's ElasticQuota preemption, as a job): None when the non-preemptible limit or a
        parent is what fails, since evicting preemptible pods of the quota cannot change those."""
        quota = self._quota_name(preemptor)
        figures = self._outside_figures(quota) or self.quota_figures().get(quota)
        if figures is None:
            return None
        pods = [p for p in members if self._quota_name(p) == quota] or [preemptor]
        keep_out = [p for p in pods if not quota_ext.is_preemptible(p.labels)]
        if keep_out:
            np_request = _masked_sum(keep_out, figures.min, self.ledger.requests_of)
            if any(
                figures.non_preemptible_used.get(r, 0) + np_request[r] > m for r, m in figures.min.items()
            ):
                return None
        limits = figures.runtime if self.args.enable_runtime_quota else figures.max
        request = _masked_sum(pods, limits, self.ledger.requests_of)
        need = {r: figures.used.get(r, 0) + request[r] - limit for r, limit in limits.items()}
        need = {r: amount for r, amount in need.items() if amount > 0}
        if not need:
            return None
        return QuotaRelease(
            key=f"quota:{quota}",
            amounts=need,
            holds=lambda pod: self._quota_name(pod) == quota,
            fits_after=self.fits_after_removal,
        )

    @contextlib.contextmanager
    def admitting(self, uids: Collection[str]) -> Iterator[None]:
        """Planning cycles admit these pods while preemption works out what frees their quota."""
        self._admitting = frozenset(uids)
        try:
            yield
        finally:
            self._admitting = frozenset()

    def fits_after_removal(self, pods: Sequence[PodInfo], victims: Sequence[PodInfo]) -> bool:
        """Would ``pods`` pass the quota checks together (each quota's share at once) if ``victims``
        were gone? Runtimes are recomputed without the victims' requests."""
        pods = [p for p in pods if self._quota_name(p)]  # pods of no quota pass
        quotas = {p.uid: self._quota_name(p) for p in pods}
        usage = self.ledger.usage_without((v.uid for v in victims), ((p, quotas[p.uid]) for p in pods))
        forest = self._compute(usage, self.handle.snapshot())
        by_quota: dict[str, list[PodInfo]] = {}
        for pod in pods:
            by_quota.setdefault(quotas[pod.uid], []).append(pod)
        return all(self._check(forest, quota, members) is None for quota, members in by_quota.items())


def new(args: ElasticQuotaArgs | None, handle: Handle) -> ElasticQuota:
    return ElasticQuota(args or ElasticQuotaArgs(), handle)
