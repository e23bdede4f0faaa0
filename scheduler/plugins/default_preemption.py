"""DefaultPreemption: kube-scheduler's pod-level preemption at PostFilter (``helper.preemption``).

A pod that fits no node evicts the pods of lower priority on the one node where that costs least
by kube-scheduler's rules, and is nominated there. "Fits" is the profile's whole PreFilter and
Filter with the victims gone, so a PreFilter that rejected the pod for a reason evictions on a
node do not change (its quota, a gang's placement) makes that node no candidate: nothing is
evicted for nothing.

A pod labelled ``scheduling.koordinator.sh/disable-preemptible: "true"`` or
``quota.scheduling.koordinator.sh/preemptible: "false"`` is never a victim, as in job-level
preemption: beyond Koordinator, whose DefaultPreemption is kube-scheduler's and reads neither label,
so that a label that says "do not preempt me" holds whichever preemption runs.

Two kinds of pod are left to the plugins that preempt for them as a whole: a reserve pod
(``ReservationArgs.enablePreemption``) and a gang member (Coscheduling's job-level preemption,
``CoschedulingArgs.enablePreemption``): evicting room for one member of a gang that does not fit
as a whole frees room no one takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from apis.client.backend import PDBS
from apis.client.eviction import EVICTION_RULES
from apis.client.rbac import PolicyRule
from apis.extension import preemption as preemption_ext
from apis.extension import quota as quota_ext
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.dry_run import PodVictims
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis, PostFilterPlugin, PostFilterResult
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.preemption import Evaluator, PdbIndex, num_candidates

__all__ = ["NAME", "PLUGIN", "RBAC", "DefaultPreemption", "DefaultPreemptionArgs", "new"]

NAME = "DefaultPreemption"
RBAC = (
    PolicyRule.watching(PDBS, why="Preemption spares pods whose PodDisruptionBudget allows no disruption."),
    *EVICTION_RULES,
)


class DefaultPreemptionArgs(BaseModel):
    """kube-scheduler's ``DefaultPreemptionArgs``, with its defaults."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    min_candidate_nodes_percentage: int = Field(default=10, ge=0, le=100)
    """The share of the nodes (percent) dry-run for victims before one is chosen."""
    min_candidate_nodes_absolute: int = Field(default=100, ge=0)
    """At least this many nodes are dry-run (all of a smaller cluster)."""

    @model_validator(mode="after")
    def _not_both_zero(self) -> DefaultPreemptionArgs:
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ValueError("minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero")
        return self


class DefaultPreemption(PostFilterPlugin):
    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.evaluator = Evaluator(NAME, handle, self, PdbIndex(handle))

    @property
    def name(self) -> str:
        return NAME

    # ---- the Evaluator's rules ---------------------------------------------------------------

    def can_preempt(self, preemptor: PodInfo, victim: PodInfo) -> bool:
        return (
            victim.priority < preemptor.priority
            and preemption_ext.is_pod_preemptible(victim.labels)
            and quota_ext.is_preemptible(victim.labels)
        )

    def fits(self, preemptor: PodInfo, snapshot: Snapshot, node: str, victims: Sequence[PodInfo]) -> bool:
        row = snapshot.table.row.get(node)
        if row is None:
            return False
        rows = np.array([row], dtype=np.int64)
        return bool(self.handle.profile.feasible_rows(preemptor, snapshot, rows).size)

    def candidates_to_find(self, nodes: int) -> int:
        return num_candidates(
            nodes, self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute
        )

    # ---- PostFilter --------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> PostFilterResult:
        if not self.preempts_for(pod):
            return PostFilterResult(Status.unschedulable())
        return await self.evaluator.preempt(pod, snapshot, diagnosis)

    # ---- the what-if's dry run (``PodPreemptionDryRun``) ----------------------------------------

    def preempts_for(self, pod: PodInfo) -> bool:
        return not is_reserve_pod(pod.annotations) and self.handle.profile.job_of(pod) == pod.uid

    def choose_pod_victims(self, pod: PodInfo, snapshot: Snapshot, diagnosis: Diagnosis) -> PodVictims | str:
        choice = self.evaluator.choose(pod, snapshot, diagnosis)
        return choice if isinstance(choice, str) else PodVictims(choice.node, choice.victims)


def new(args: DefaultPreemptionArgs | None, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args or DefaultPreemptionArgs(), handle)


PLUGIN = PluginSpec(NAME, new, DefaultPreemptionArgs, RBAC)
