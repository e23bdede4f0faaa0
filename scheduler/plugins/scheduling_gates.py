"""SchedulingGates: kube-scheduler's PreEnqueue plugin for ``spec.schedulingGates``.

A pod with scheduling gates is not ready to be scheduled; it waits outside the active queue, and
an update that removes its last gate (a pod update event) lets it in.
"""

from __future__ import annotations

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, EnqueueExtensions, PreEnqueuePlugin
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["NAME", "PLUGIN", "SchedulingGates", "new"]

NAME = "SchedulingGates"


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    @property
    def name(self) -> str:
        return NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gates = pod.pod.spec.scheduling_gates
        if not gates:
            return Status.success()
        names = ", ".join(sorted(g.name for g in gates))
        return Status.unresolvable(f"waiting for scheduling gates: [{names}]")

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.POD_UPDATE


def new(args: None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


PLUGIN = PluginSpec(NAME, new)
