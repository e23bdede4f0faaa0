"""NodePorts: a pod fits only nodes where none of its host ports is taken (kube-scheduler's
``pkg/scheduler/framework/plugins/nodeports``).

The pod's host ports are those of its containers and sidecars with a ``hostPort`` (``GetHostPorts``,
computed once in ``PodInfo.host_ports``, hostIP defaulting to ``0.0.0.0`` and protocol to ``TCP``).
PreFilter SKIPs a pod without any, so most pods never reach the Filter. A port conflicts with one in
use on the node when protocol and port are equal and the IPs are equal or either is ``0.0.0.0``
(``HostPortInfo.CheckConflict``). The ports in use are those of the pods assigned (bound or assumed)
to the node and of the pods nominated to it, indexed by (protocol, port) in the cache, so Filter is
one mask over the few rows that hold the pod's ports. Preemption can free a port, so a rejection is
resolvable.
"""

from __future__ import annotations

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowInputs, SkipReads
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
)
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["ERR_REASON", "NAME", "PLUGIN", "NodePorts", "new"]

NAME = "NodePorts"

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


class NodePorts(PreFilterPlugin, FilterPlugin):
    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.SPEC
    """``SkipByClass``: PreFilter's SKIP reads only the pod's spec (its host ports)."""

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the host ports taken on the node."""
        return RowInputs.ACCOUNTING

    def events_to_register(self) -> ClusterEvent:
        # Container ports are immutable, so only a pod going away (or a new node) frees a port.
        return ClusterEvent.NODE_ADD | ClusterEvent.POD_DELETE

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if not pod.host_ports:
            return PreFilterResult(status=Status.skip())
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        if not pod.host_ports:
            return FilterResult.all_feasible(rows.size)
        taken = snapshot.host_port_conflicts(pod.host_ports)[rows]
        return FilterResult(feasible=np.logical_not(taken), rejections=[(ERR_REASON, taken)])


def new(args: None, handle: Handle) -> NodePorts:
    return NodePorts()


PLUGIN = PluginSpec(NAME, new)
