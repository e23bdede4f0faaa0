"""NodeName: a pod that names its node in ``spec.nodeName`` fits only that node.

Such pods normally bypass the scheduler altogether; one that reaches it (a nodeName set together
with this schedulerName) is checked here, as kube-scheduler does. Preemption cannot help.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, FilterPlugin, FilterResult
from scheduler.framework.registry import PluginSpec

__all__ = ["ERR_REASON", "NAME", "PLUGIN", "NodeName", "new"]

NAME = "NodeName"

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin):
    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's name."""
        return RowInputs.NODE

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        wanted = pod.node_name
        if not wanted:
            return FilterResult.all_feasible(rows.size)
        row = snapshot.table.row.get(wanted, -1)
        feasible = rows == row
        rejected = ~feasible
        return FilterResult(
            feasible=np.asarray(feasible, dtype=np.bool_),
            rejections=[(ERR_REASON, rejected)],
            unresolvable=rejected,
        )


def new(args: None, handle: Handle) -> NodeName:
    return NodeName()


PLUGIN = PluginSpec(NAME, new)
