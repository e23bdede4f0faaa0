"""Whether a pod could be scheduled on a target node (the descheduler's ``NodeFit``,
``pkg/descheduler/node/node.go``): its node selector and required node affinity, the node's
NoSchedule/NoExecute taints, its requests against what the node's pods leave free, and the node
being schedulable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.core import Node, Pod
from apis.podrequests import pod_requests
from apis.quantity import Quantity
from apis.resources import ResourceList, add, fits, subtract
from scheduler.plugins.helper.node_selector import OBJECT_NAME_FIELD, CompiledTerm, compile_term, go_int
from scheduler.plugins.helper.taints import NO_EXECUTE, NO_SCHEDULE, tolerations_tolerate

__all__ = ["node_fits", "pod_requests_with_slot", "requested_on"]

_ONE = Quantity.from_int(1)


def _term_matches(term: CompiledTerm, name: str, labels: Mapping[str, str]) -> bool:
    if term.error is not None:
        return False
    for req in term.requirements:
        if req.field:
            value: str | None = name if req.key == OBJECT_NAME_FIELD else ""
        else:
            value = labels.get(req.key)
        if req.operator == "In":
            ok = value is not None and value in req.values
        elif req.operator == "NotIn":
            ok = value is None or value not in req.values
        elif req.operator == "Exists":
            ok = value is not None
        elif req.operator == "DoesNotExist":
            ok = value is None
        else:  # Gt / Lt
            number = go_int(value) if value is not None else None
            assert req.number is not None
            ok = number is not None and (number > req.number if req.operator == "Gt" else number < req.number)
        if not ok:
            return False
    return True


def _affinity_matches(pod: Pod, node: Node) -> bool:
    labels = node.metadata.labels or {}
    for key, value in (pod.spec.node_selector or {}).items():
        if labels.get(key) != value:
            return False
    affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    if required is None:
        return True
    name = node.metadata.name or ""
    for i, term in enumerate(required.node_selector_terms):
        compiled = compile_term(term, f"nodeSelectorTerms[{i}]")
        if compiled is not None and _term_matches(compiled, name, labels):
            return True
    return False


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
    if not _affinity_matches(pod, node) or not _tolerates(pod, node):
        return False
    allocatable = dict(node.status.allocatable or {})
    request = pod_requests_with_slot(pod)
    if "pods" not in allocatable:  # a node that does not say how many pods it takes
        del request["pods"]
    return fits(request, subtract(allocatable, requested))
