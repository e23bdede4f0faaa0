"""ElasticQuota's PostFilter: quota preemption, as Koordinator's ``elasticquota/preempt.go``.

kube-scheduler's preemption (``helper.preemption``) over every node, with the victims and the fit
of the quota (algorithms.md 4.7):

1. Victims: pods of the preemptor's own quota, of strictly lower priority, not non-preemptible
   (``quota.scheduling.koordinator.sh/preemptible: "false"``), and never pods of the default quota
   (``disableDefaultQuotaPreemption``, Koordinator's default).
2. Fit: the profile's PreFilter and Filter on the node with the victims gone, the quota's own
   PreFilter check aside (the pod is "admitting" while its quota is being freed), and then the
   quota check itself with the victims' use removed and the runtimes recomputed. A pod put back at
   the reprieve stays only if both still hold, so the victims free the node and the quota at once.

Preemption never crosses quotas: what other quotas borrowed comes back through reclaim
(Coscheduling's job-level preemption, ``PreemptionExtension``) and the revoke controller. A pod of
no quota, a reserve pod and a gang member (left to Coscheduling's job-level preemption, which
frees a whole job's quota) are not preempted for here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np

from apis.extension import quota as quota_ext
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis, PostFilterResult
from scheduler.framework.status import Status
from scheduler.plugins.helper.preemption import Evaluator, PdbIndex

__all__ = ["QuotaPreemption", "QuotaView"]


class QuotaView(Protocol):
    """What quota preemption reads of the ElasticQuota plugin."""

    def quota_of(self, pod: PodInfo) -> str | None: ...

    def admitting(self, uids: Collection[str]) -> AbstractContextManager[None]: ...

    def fits_after_removal(self, pods: Sequence[PodInfo], victims: Sequence[PodInfo]) -> bool: ...


class QuotaPreemption:
    def __init__(self, name: str, quotas: QuotaView, handle: Handle, *, spare_default_quota: bool) -> None:
        self.quotas = quotas
        self.handle = handle
        self.spare_default_quota = spare_default_quota
        self.evaluator = Evaluator(name, handle, self, PdbIndex(handle))

    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        if not quota_ext.is_preemptible(victim.labels) or victim.priority >= preemptor.priority:
            return False
        theirs = self.quotas.quota_of(victim)
        if self.spare_default_quota and theirs == quota_ext.DEFAULT_QUOTA_NAME:
            return False
        return theirs is not None and theirs == self.quotas.quota_of(preemptor)

    def fits(self, preemptor: PodInfo, snapshot: Snapshot, node: str, victims: Sequence[PodInfo]) -> bool:
        row = snapshot.table.row.get(node)
        if row is None:
            return False
        with self.quotas.admitting({preemptor.uid}):
            rows = self.handle.profile.feasible_rows(preemptor, snapshot, np.array([row], dtype=np.int64))
        return bool(rows.size) and self.quotas.fits_after_removal([preemptor], victims)

    def candidates_to_find(self, nodes: int) -> int:
        return nodes  # Koordinator's GetOffsetAndNumCandidates: every node

    async def post_filter(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PostFilterResult:
        mine = self.quotas.quota_of(pod)
        if (
            mine is None
            or (self.spare_default_quota and mine == quota_ext.DEFAULT_QUOTA_NAME)  # no victim possible
            or is_reserve_pod(pod.annotations)
            or self.handle.profile.job_of(pod) != pod.uid
        ):
            return PostFilterResult(Status.unschedulable())
        return await self.evaluator.preempt(pod, snapshot, diagnosis)
