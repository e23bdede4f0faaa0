"""ScarceResourceAvoidance: keep pods that do not need scarce resources off the nodes that have them.

As Koordinator's ``pkg/scheduler/plugins/scarceresourceavoidance`` scores a node:

1. ``diff``: the resources the node has (allocatable > 0: cpu, memory, ephemeral-storage and scalar
   resources; pods are not counted) that the pod does not request;
2. ``scarce``: those of ``diff`` listed in ``args.resources``;
3. the score is 100 when either is empty, else ``(len(diff) - len(scarce)) * 100 // len(diff)``:
   the larger the share of unrequested resources that are scarce, the lower the score.
"""

from __future__ import annotations

import numpy as np
from pydantic import ConfigDict, Field

from apis.base import KoordModel
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, ScorePlugin
from scheduler.framework.registry import PluginSpec
from scheduler.plugins.helper.resources import is_accounted

__all__ = ["NAME", "PLUGIN", "ScarceResourceAvoidance", "ScarceResourceAvoidanceArgs", "new"]

NAME = "ScarceResourceAvoidance"


class ScarceResourceAvoidanceArgs(KoordModel):
    """Koordinator's ``ScarceResourceAvoidanceArgs``; there is no default."""

    model_config = ConfigDict(extra="forbid")

    resources: list[str] = Field(default_factory=list)
    """The scarce resource names (``nvidia.com/gpu`` ...)."""


class ScarceResourceAvoidance(ScorePlugin):
    def __init__(self, args: ScarceResourceAvoidanceArgs) -> None:
        self._scarce = frozenset(args.resources)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent(0)  # Score only: it never rejects a pod

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        table = snapshot.table
        requested = {n for n, amount in pod.requests.items() if amount > 0}
        diff_cols = [
            col for name, col in table.column.items() if is_accounted(name) and name not in requested
        ]
        if not diff_cols or not self._scarce:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        scarce = np.asarray([table.resources[col] in self._scarce for col in diff_cols], dtype=np.bool_)
        present = table.allocatable[np.ix_(rows, np.asarray(diff_cols, dtype=np.int64))] > 0
        diff = present.sum(axis=1)
        intersect = present[:, scarce].sum(axis=1)
        penalized = (diff > 0) & (intersect > 0)
        result: IntArray = np.where(
            penalized, (diff - intersect) * MAX_NODE_SCORE // np.maximum(diff, 1), MAX_NODE_SCORE
        ).astype(np.int64)
        return result


def new(args: ScarceResourceAvoidanceArgs | None, handle: Handle) -> ScarceResourceAvoidance:
    return ScarceResourceAvoidance(args or ScarceResourceAvoidanceArgs())


PLUGIN = PluginSpec(NAME, new, ScarceResourceAvoidanceArgs)
