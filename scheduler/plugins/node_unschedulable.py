"""NodeUnschedulable: nodes cordoned with ``spec.unschedulable`` take no new pods.

A pod that tolerates the taint ``node.kubernetes.io/unschedulable:NoSchedule`` tolerates the cordon too
(DaemonSet pods do), as in kube-scheduler. The unschedulable rows come from the same per-generation
index as TaintToleration's, so a cycle does no per-node work.
"""

from __future__ import annotations

from apis.meta import Taint
from apis.tolerations import tolerations_tolerate
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, FilterPlugin, FilterResult
from scheduler.framework.registry import PluginSpec
from scheduler.plugins.helper.taints import node_index

__all__ = ["ERR_REASON_UNSCHEDULABLE", "NAME", "PLUGIN", "NodeUnschedulable", "new"]

NAME = "NodeUnschedulable"

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

TAINT_NODE_UNSCHEDULABLE = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


class NodeUnschedulable(FilterPlugin):
    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's spec.unschedulable and taints."""
        return RowInputs.NODE

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        index = node_index(snapshot)
        cordoned = index.unschedulable[rows]
        if not cordoned.any() or tolerations_tolerate(
            pod.pod.spec.tolerations or [], TAINT_NODE_UNSCHEDULABLE
        ):
            return FilterResult.all_feasible(rows.size)
        return FilterResult(
            feasible=~cordoned, rejections=[(ERR_REASON_UNSCHEDULABLE, cordoned)], unresolvable=cordoned
        )


def new(args: None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


PLUGIN = PluginSpec(NAME, new)
