"""NodeResourcesFitPlus: Koordinator's per-resource scoring strategy (v1.6).

Where NodeResourcesFit applies one strategy to every scored resource, this plugin lets each resource
pick its own: bin-pack GPUs (``MostAllocated``) while spreading cpu (``LeastAllocated``). As
Koordinator's ``pkg/scheduler/plugins/noderesourcesfitplus`` computes it, for a node:

1. the resources considered are those the pod requests (cpu, memory, ephemeral-storage and scalar
   resources with a positive request) that ``args.resources`` configures;
2. for each, ``requested`` is the node's requested amount plus the pod's (cpu and memory with
   kube-scheduler's non-zero defaults), scored against the node's allocatable with the resource's
   strategy (a node without the resource scores 0 for it, and its weight still counts);
3. the node's score is ``sum(score * weight) // sum(weight)``, and 100 when no configured resource
   is requested.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field

from apis.base import KoordModel
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, PreScorePlugin, ScorePlugin
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.resources import (
    is_accounted,
    least_requested_score,
    most_requested_score,
    scored_request,
)

__all__ = ["NAME", "PLUGIN", "NodeResourcesFitPlus", "NodeResourcesFitPlusArgs", "ResourcesType", "new"]

NAME = "NodeResourcesFitPlus"


class _ScoreState:
    __slots__ = ("names", "requests")

    def __init__(self, names: tuple[str, ...], requests: IntArray) -> None:
        self.names = names
        """Configured resources the pod requests."""
        self.requests = requests
        """The pod's scored request for each of ``names``."""


PRE_SCORE_KEY = StateKey[_ScoreState]("PreScoreNodeResourcesFitPlus")


class ResourcesType(KoordModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["MostAllocated", "LeastAllocated"]
    """How this resource is scored."""
    weight: int = Field(ge=0)
    """Weight of this resource in the node's average."""


class NodeResourcesFitPlusArgs(KoordModel):
    """Koordinator's ``NodeResourcesFitPlusArgs``; there is no default."""

    model_config = ConfigDict(extra="forbid")

    resources: dict[str, ResourcesType] = Field(default_factory=dict)
    """Resource name -> strategy and weight."""


class NodeResourcesFitPlus(PreScorePlugin, ScorePlugin):
    def __init__(self, args: NodeResourcesFitPlusArgs) -> None:
        self._resources = dict(args.resources)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent(0)  # Score only: it never rejects a pod

    def _state(self, pod: PodInfo) -> _ScoreState:
        names = tuple(
            sorted(
                n
                for n, amount in pod.requests.items()
                if amount > 0 and is_accounted(n) and n in self._resources
            )
        )
        return _ScoreState(names, scored_request(pod, names))

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        state.write(PRE_SCORE_KEY, self._state(pod))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scored = state.get(PRE_SCORE_KEY)
        if scored is None:
            scored = self._state(pod)
            state.write(PRE_SCORE_KEY, scored)
        if not scored.names:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        table = snapshot.table
        total = np.zeros(rows.size, dtype=np.int64)
        weight_sum = 0
        for name, pod_request in zip(scored.names, scored.requests, strict=True):
            spec = self._resources[name]
            col = table.column.get(name)
            if col is None:
                allocatable = np.zeros(rows.size, dtype=np.int64)
                requested = np.full(rows.size, pod_request, dtype=np.int64)
            else:
                allocatable = table.allocatable[rows, col]
                requested = table.requested[rows, col] + pod_request
            if spec.type == "MostAllocated":
                per_resource = most_requested_score(requested, allocatable)
            else:
                per_resource = least_requested_score(requested, allocatable)
            total += per_resource * spec.weight
            weight_sum += spec.weight
        if weight_sum == 0:
            return np.full(rows.size, MAX_NODE_SCORE, dtype=np.int64)
        result: IntArray = total // weight_sum
        return result


def new(args: NodeResourcesFitPlusArgs | None, handle: Handle) -> NodeResourcesFitPlus:
    return NodeResourcesFitPlus(args or NodeResourcesFitPlusArgs())


PLUGIN = PluginSpec(NAME, new, NodeResourcesFitPlusArgs)
