"""Which reservations a pod may allocate from (algorithms.md 5.3), over plain objects.

Owners: the items of ``spec.owners`` are ORed, the fields set within one item ANDed; an item
with no field matches every pod and an empty list matches none. Reservation affinity (the pod's
``reservation-affinity`` annotation): a name picks that reservation alone (then only the exact
match is checked); otherwise an unschedulable reservation needs a toleration of
``node.kubernetes.io/unschedulable:NoSchedule``, every NoSchedule/NoExecute taint of the
reservation must be tolerated, and the selector and terms are read against the reservation's
labels over its node's labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.extension.reservation import (
    ExactMatchReservationSpec,
    ReservationAffinity,
    ReservationOwner,
)
from apis.meta import NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration
from apis.nodeselector import go_int
from apis.tolerations import NO_EXECUTE, NO_SCHEDULE, tolerations_tolerate
from scheduler.cache.pod_info import PodInfo

__all__ = [
    "UNSCHEDULABLE_TAINT",
    "affinity_admits",
    "exact_match",
    "owner_matches",
    "owners_match",
    "terms_match",
]

UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect=NO_SCHEDULE)
"""What an unschedulable reservation is treated as carrying (as a cordoned node)."""


def owner_matches(owner: ReservationOwner, pod: PodInfo) -> bool:
    meta = pod.pod.metadata
    if owner.object is not None:
        ref = owner.object
        if ref.uid and ref.uid != meta.uid:
            return False
        if ref.name and ref.name != meta.name:
            return False
        if ref.namespace and ref.namespace != pod.namespace:
            return False
    if owner.controller is not None:
        ctrl = owner.controller
        if ctrl.namespace and ctrl.namespace != pod.namespace:
            return False
        if not any(
            (not ctrl.uid or ref.uid == ctrl.uid)
            and (not ctrl.name or ref.name == ctrl.name)
            and (not ctrl.kind or ref.kind == ctrl.kind)
            and (not ctrl.api_version or ref.api_version == ctrl.api_version)
            for ref in meta.owner_references or ()
        ):
            return False
    return owner.label_selector is None or owner.label_selector.matches(pod.labels)


def owners_match(owners: Sequence[ReservationOwner], pod: PodInfo) -> bool:
    return any(owner_matches(owner, pod) for owner in owners)


def _requirement_holds(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    values = req.values or []
    if req.operator == "In":
        return labels.get(req.key) in values
    if req.operator == "NotIn":
        return labels.get(req.key) not in values
    if req.operator == "Exists":
        return req.key in labels
    if req.operator == "DoesNotExist":
        return req.key not in labels
    if req.operator in ("Gt", "Lt") and len(values) == 1 and req.key in labels:
        wanted, actual = go_int(values[0]), go_int(labels[req.key])
        if wanted is None or actual is None:
            return False
        return actual > wanted if req.operator == "Gt" else actual < wanted
    return False


def terms_match(terms: Sequence[NodeSelectorTerm], labels: Mapping[str, str]) -> bool:
    """NodeSelectorTerms read against ``labels``: the terms are ORed, a term's requirements ANDed;
    an empty term matches nothing (as in node affinity); matchFields are not supported on
    reservations and match nothing."""
    for term in terms:
        exprs = term.match_expressions or []
        if not exprs or term.match_fields:
            continue
        if all(_requirement_holds(req, labels) for req in exprs):
            return True
    return False


def affinity_admits(
    affinity: ReservationAffinity,
    *,
    name: str,
    labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    unschedulable: bool,
    taints: Sequence[Taint],
) -> bool:
    """Whether the pod's reservation affinity admits this reservation (exact match aside)."""
    if affinity.name:
        return affinity.name == name
    tolerations: Sequence[Toleration] = affinity.tolerations or ()
    if unschedulable and not tolerations_tolerate(tolerations, UNSCHEDULABLE_TAINT):
        return False
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerations_tolerate(tolerations, taint):
            return False
    merged = {**node_labels, **labels}
    for key, value in (affinity.reservation_selector or {}).items():
        if merged.get(key) != value:
            return False
    required = affinity.required_during_scheduling_ignored_during_execution
    if required is not None and required.reservation_selector_terms is not None:
        return terms_match(required.reservation_selector_terms, merged)
    return True


def exact_match(
    spec: ExactMatchReservationSpec | None, requests: Mapping[str, int], allocatable: Mapping[str, int]
) -> bool:
    """Every named resource is requested exactly as reserved (both absent counts as equal)."""
    if spec is None:
        return True
    for resource in spec.resource_names or ():
        if requests.get(resource, 0) != allocatable.get(resource, 0):
            return False
    return True
