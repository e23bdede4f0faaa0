"""The Reservation that holds a moved pod's new place, outside the domain being freed (what the
MigrationController builds for ReservationFirst, made before any pod of the plan is evicted)."""

from __future__ import annotations

from typing import Any

from apis.core import Pod
from apis.duration import format_go_duration
from apis.extension.defrag import ANNOTATION_DEFRAG_PLAN, LABEL_DEFRAG_PLAN, DefragMove, DefragPlan
from apis.extension.reservation import LABEL_RESERVATION_ORDER
from apis.meta import ObjectMeta, ObjectReference
from apis.scheduling.reservation import (
    Reservation,
    ReservationControllerReference,
    ReservationOwner,
    ReservationSpec,
)
from operators.descheduler.defrag.movable import controller_of

__all__ = ["CREATED_BY", "reservation_for"]

CREATED_BY = {"app.kubernetes.io/created-by": "koord-descheduler"}


def _template(pod: Pod, excluded: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = pod.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec.pop("nodeName", None)
    # The API server allows a metadata.name field requirement one value only: one per node.
    not_in = [{"key": "metadata.name", "operator": "NotIn", "values": [name]} for name in excluded]
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:  # terms are ORed: each one must keep the pod out of the domain
        term["matchFields"] = [*(term.get("matchFields") or []), *not_in]
    required["nodeSelectorTerms"] = terms
    metadata = {"labels": dict(pod.metadata.labels or {})}
    return {"metadata": metadata, "spec": spec}


def _owner(pod: Pod) -> ReservationOwner:
    owner = controller_of(pod)
    if owner is None:  # a bare pod (evictBarePods): only itself, it has no replacement
        return ReservationOwner(
            object=ObjectReference(
                api_version="v1",
                kind="Pod",
                namespace=pod.metadata.namespace,
                name=pod.metadata.name,
                uid=pod.metadata.uid,
            )
        )
    return ReservationOwner(
        controller=ReservationControllerReference(
            api_version=owner.api_version,
            kind=owner.kind,
            name=owner.name,
            uid=owner.uid,
            controller=True,
            namespace=pod.metadata.namespace,
        )
    )


def _order(plan: DefragPlan, move: DefragMove) -> str:
    """The plan's creation in milliseconds, then the move's place: lowest first."""
    return str(int(plan.created.timestamp() * 1000) * 1000 + plan.moves.index(move))


def reservation_for(pod: Pod, move: DefragMove, plan: DefragPlan, ttl_seconds: float) -> Reservation:
    return Reservation(
        api_version=f"{Reservation.crd.group}/{Reservation.crd.version}",
        kind=Reservation.crd.kind,
        metadata=ObjectMeta(
            name=move.reservation,
            # In the plan's order: every reservation of a plan matches every replacement of the
            # workload (its owner is the controller), so the first replacement must take the first
            # move's, not the one still waiting for a later move's eviction.
            labels={**CREATED_BY, LABEL_DEFRAG_PLAN: plan.id, LABEL_RESERVATION_ORDER: _order(plan, move)},
            annotations={ANNOTATION_DEFRAG_PLAN: plan.model_dump_json(by_alias=True)},
        ),
        spec=ReservationSpec(
            template=_template(pod, list(plan.nodes)),
            owners=[_owner(pod)],
            ttl=format_go_duration(int(ttl_seconds * 1e9)),
            allocate_once=True,
        ),
    )
