"""Whether a pod could be scheduled on a target node (the descheduler's ``NodeFit``,
``pkg/descheduler/node/node.go``): its node selector and required node affinity, the node's
NoSchedule/NoExecute taints, its requests against what the node's pods leave free, and the node
being schedulable.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.core import Node, Pod
from apis.nodeselector import node_affinity_matches
from apis.podrequests import pod_requests
from apis.quantity import Quantity
from apis.resources import ResourceList, add, fits, subtract
from apis.tolerations import NO_EXECUTE, NO_SCHEDULE, tolerations_tolerate

__all__ = ["node_fits", "pod_requests_with_slot", "requested_on"]

_ONE = Quantity.from_int(1)


def _tolerates(pod: Pod, node: Node) -> bool:
    tolerations = pod.spec.tolerations or []
    return all(
        tolerations_tolerate(tolerations, taint)
        for taint in node.spec.taints or ()
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE)
    )


def pod_requests_with_slot(pod: Pod) -> ResourceList:
    """The pod's requests plus the one pod slot it takes (kube's ``pods`` allocatable)."""
    return add(pod_requests(pod.spec), {"pods": _ONE})


def requested_on(pods: Sequence[Pod]) -> ResourceList:
    """What the pods (a node's live pods) request, pod slots included."""
    total: ResourceList = {}
    for pod in pods:
        total = add(total, pod_requests_with_slot(pod))
    return total


def node_fits(pod: Pod, node: Node, requested: ResourceList) -> bool:
    """``requested``: what the node's pods (and pods already planned onto it) request."""
    if node.spec.unschedulable:
        return False
    if not node_affinity_matches(pod, node) or not _tolerates(pod, node):
        return False
    allocatable = dict(node.status.allocatable or {})
    request = pod_requests_with_slot(pod)
    if "pods" not in allocatable:  # a node that does not say how many pods it takes
        del request["pods"]
    return fits(request, subtract(allocatable, requested))
