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

This module holds the extension points and the API preemption uses; the informers' handlers are in
``handlers/``, the kept figures in figures.py, the checks in checks.py, the revoke controller's
evictions in revoking.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence

from apis.client.backend import ELASTICQUOTAPROFILES, ELASTICQUOTAS, PDBS, PODS, RESERVATIONS
from apis.client.eviction import EVICTION_RULES
from apis.client.rbac import PolicyRule
from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import (
    RESERVATION_CREDIT,
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
from scheduler.framework.status import Status
from scheduler.plugins.elastic_quota import hooks
from scheduler.plugins.elastic_quota.admission import admitted_with
from scheduler.plugins.elastic_quota.args import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.checks import (
    QuotaChecks,
    masked_sum,
    outside_figures,
    outside_spec,
    spec_figures,
)
from scheduler.plugins.elastic_quota.figures import FiguresCache, payloads
from scheduler.plugins.elastic_quota.forest import OUTSIDE, Forest, ForestState
from scheduler.plugins.elastic_quota.handlers.pods import PodHandler
from scheduler.plugins.elastic_quota.handlers.quotas import QuotaHandler
from scheduler.plugins.elastic_quota.handlers.reservations import ReservationHandler
from scheduler.plugins.elastic_quota.hooks import QuotaReader
from scheduler.plugins.elastic_quota.ledger import Ledger, gang_key, pod_requests, requests_without_overhead
from scheduler.plugins.elastic_quota.preempt import QuotaPreemption
from scheduler.plugins.elastic_quota.quotas import QuotaIndex
from scheduler.plugins.elastic_quota.reclaim import (
    above_entitlement,
    amounts_above_entitlement,
    release_needed,
    within_runtime,
)
from scheduler.plugins.elastic_quota.reservation_credit import (
    credited,
    restore_reservation_charge,
    shrink_reservation_charge,
)
from scheduler.plugins.elastic_quota.revoking import QuotaRevoker
from scheduler.plugins.elastic_quota.writer import FiguresWriter, Payload
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
FIGURES_WRITE_INTERVAL_SECONDS = 1.0
"""The figures of one quota are patched at most this often."""


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
        self.figures = FiguresCache(
            self.index,
            self.ledger,
            scale_min=args.enable_min_quota_scale,
            guarantee=handle.features.elastic_quota_guarantee_usage,
        )
        self.checks = QuotaChecks(args, self.ledger)
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
        self.revoker = QuotaRevoker(args, handle, self.ledger, self.quota_figures, requests_of)
        self.revoke = self.revoker.controller
        self.preemption = QuotaPreemption(
            NAME, self, handle, spare_default_quota=args.disable_default_quota_preemption
        )
        reader = QuotaReader(figures=lambda name: self.quota_figures().get(name), children=self._children)
        self.hooks = hooks.build([(c.key, c.factory_key, c.factory_args) for c in args.hook_plugins], reader)
        quotas = QuotaHandler(self.index, self.ledger, self.hooks, self.writer, self._quota_name)
        self._on_pod_event = PodHandler(
            self.ledger, self.hooks, self.writer, self._quota_name, self.revoker.start
        ).on_event
        handle.subscribe(ELASTICQUOTAS, quotas.on_quota_event)
        handle.subscribe(ELASTICQUOTAPROFILES, quotas.on_profile_event)
        handle.subscribe(PODS, self._on_pod_event)
        handle.subscribe(
            RESERVATIONS, ReservationHandler(self.ledger, self.writer, self._quota_name).on_event
        )

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

    def _children(self, name: str) -> list[str]:
        return sorted(q for q, info in self.index.quotas.items() if info.spec.parent == name and q != name)

    # ---- figures -----------------------------------------------------------------------------

    def _compute(self, usage: Mapping[str, Usage], snapshot: Snapshot) -> Forest:
        """The figures from scratch over ``usage`` (what-if computations of preemption)."""
        return self.figures.compute(usage, snapshot)

    @property
    def _state(self) -> tuple[tuple[int, int], ForestState] | None:
        return self.figures.state

    # ---- filtering ---------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        quota = self._quota_name(pod)
        if not quota:
            return PreFilterResult(Status.success())  # no quota (DisableDefaultQuota): nothing to check
        if pod.uid in self._admitting and state.planning:
            # Preemption is planning this job with its quota freed by the victims it will choose.
            forest = self.figures.current(snapshot)
            return PreFilterResult(node_names=forest.tree_nodes.get(forest.tree_of.get(quota, "")))
        pod = credited(pod, state.get(RESERVATION_CREDIT))
        spec = outside_spec(self.index, quota)
        if spec is not None:
            pods = admitted_with(self.handle, self.ledger, pod, quota)
            problem = None
            if not self.checks.fits_outside(quota, spec, pods):
                figures = spec_figures(spec, self.ledger.usage_of(quota))
                problem = self.checks.check_figures(figures, pods, parents=())
            if problem is None:
                problem = self.hooks.check_pod(quota, pod)
            return PreFilterResult(Status.unschedulable(problem) if problem else Status.success())
        forest = self.figures.current(snapshot)
        problem = self.checks.check(forest, quota, admitted_with(self.handle, self.ledger, pod, quota))
        if problem is None:
            problem = self.hooks.check_pod(quota, pod)
        if problem is not None:
            return PreFilterResult(Status.unschedulable(problem))
        nodes = forest.tree_nodes.get(forest.tree_of.get(quota, ""))
        return PreFilterResult(node_names=nodes)

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
        if shrink_reservation_charge(state, self.ledger):
            return None
        if not state.get(RESERVATION_CREDIT) or gang_key(pod) is not None:
            return None
        outside = outside_figures(self.index, self.ledger, quota)
        if outside is not None:
            return self.checks.check_figures(outside, [pod], parents=())
        return self.checks.check(self.figures.current(self.handle.snapshot()), quota, [pod])

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        restore_reservation_charge(state, self.ledger)
        quota = self._quota_name(pod)
        if quota:
            old = self.ledger.charge(pod.uid)
            self.ledger.unreserve(pod, quota)
            if old is not None and old.reserved:
                self.hooks.on_pod_updated(quota, pod, None)
        self.writer.changed()

    # ---- figures on the objects --------------------------------------------------------------

    def _payloads(self) -> list[tuple[Payload, Mapping[str, str]]]:
        forest = self.figures.current(self.handle.snapshot())
        guarantee = self.handle.features.elastic_quota_guarantee_usage
        return payloads(forest.figures, self.index.quotas, guarantee=guarantee)

    async def _write(self, payload: Payload) -> None:
        await self.handle.backend.patch_custom(
            ELASTICQUOTAS, payload.namespace, payload.name, payload.patch()
        )

    async def close(self) -> None:
        """Stop the figures writer and the revoke controller (the app calls this at shutdown)."""
        await self.writer.close()
        await self.revoker.close()

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
        return self.figures.current(self.handle.snapshot()).figures

    def quota_namespace(self, name: str) -> str | None:
        """The namespace of the ElasticQuota named ``name``; None for a built-in or unknown quota."""
        info = self.index.quotas.get(name)
        return info.namespace if info is not None and info.exists else None

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
        forest = self.figures.current(self.handle.snapshot())
        mine, theirs = self._quota_name(preemptor), self._quota_name(victim)
        claimant, holder = forest.figures.get(mine), forest.figures.get(theirs)
        if mine == theirs or claimant is None or holder is None:
            return False
        if forest.tree_of.get(mine) != forest.tree_of.get(theirs) or theirs in OUTSIDE:
            return False
        request = masked_sum(
            admitted_with(self.handle, self.ledger, preemptor, mine),
            claimant.runtime,
            self.ledger.requests_of,
        )
        return within_runtime(claimant, request) and above_entitlement(holder)

    def eviction_budget(self, victim: PodInfo) -> tuple[str, Mapping[str, int]] | None:
        """What ``victim``'s quota holds above ``max(min, runtime)``, per resource of its max."""
        theirs = self._quota_name(victim)
        figures = self.quota_figures().get(theirs)
        if figures is None:
            return None
        return f"quota:{theirs}", amounts_above_entitlement(figures)

    def quota_release(self, preemptor: PodInfo, members: Sequence[PodInfo]) -> QuotaRelease | None:
        """What lower-priority pods of the job's own quota must free for its quota check to pass
        (Koordinator's ElasticQuota preemption, as a job): None when the non-preemptible limit or a
        parent is what fails, since evicting preemptible pods of the quota cannot change those."""
        quota = self._quota_name(preemptor)
        figures = outside_figures(self.index, self.ledger, quota) or self.quota_figures().get(quota)
        if figures is None:
            return None
        pods = [p for p in members if self._quota_name(p) == quota] or [preemptor]
        need = release_needed(figures, pods, self.checks.limits(figures)[0], self.ledger.requests_of)
        if need is None:
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
        return all(self.checks.check(forest, quota, members) is None for quota, members in by_quota.items())


def new(args: ElasticQuotaArgs | None, handle: Handle) -> ElasticQuota:
    return ElasticQuota(args or ElasticQuotaArgs(), handle)
