"""Reservation labels and annotations on pods and reservations (api-reference 2.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import TypeAdapter

from apis.base import KoordModel
from apis.extension._annotation import lookup, parse_go_int, parse_json
from apis.meta import CheckedNodeSelectorTerm, LabelSelector, ObjectReference, Toleration

__all__ = [
    "ANNOTATION_EXACT_MATCH_RESERVATION",
    "ANNOTATION_IS_PRE_ALLOCATION",
    "ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY",
    "ANNOTATION_RESERVATION_AFFINITY",
    "ANNOTATION_RESERVATION_ALLOCATED",
    "ANNOTATION_RESERVATION_CURRENT_OWNER",
    "ANNOTATION_RESERVATION_NAME",
    "ANNOTATION_RESERVATION_NODE",
    "ANNOTATION_RESERVATION_OWNERS",
    "ANNOTATION_RESERVATION_RESIZE_ALLOCATABLE",
    "ANNOTATION_RESERVATION_RESTRICTED_OPTIONS",
    "ANNOTATION_RESERVE_POD",
    "LABEL_POD_OPERATING_MODE",
    "LABEL_POD_PRE_ALLOCATABLE",
    "LABEL_PRE_ALLOCATION_REQUIRED",
    "LABEL_RESERVATION_IGNORED",
    "LABEL_RESERVATION_ORDER",
    "OPERATING_MODE_RESERVATION",
    "OPERATING_MODE_RUNNABLE",
    "ExactMatchReservationSpec",
    "PodOperatingMode",
    "ReservationAffinity",
    "ReservationAffinitySelector",
    "ReservationAllocated",
    "ReservationControllerReference",
    "ReservationOwner",
    "ReservationRestrictedOptions",
    "get_exact_match_reservation",
    "get_reservation_affinity",
    "get_reservation_allocated",
    "get_reservation_current_owner",
    "get_reservation_order",
    "get_reservation_owners",
    "get_reservation_restricted_options",
    "is_reservation_ignored",
    "is_reservation_operating_mode",
    "is_reserve_pod",
    "parse_exact_match_reservation",
    "parse_reservation_affinity",
    "parse_reservation_allocated",
    "parse_reservation_current_owner",
    "parse_reservation_order",
    "parse_reservation_owners",
    "parse_reservation_restricted_options",
]

_PREFIX = "scheduling.koordinator.sh"

ANNOTATION_RESERVATION_AFFINITY = _PREFIX + "/reservation-affinity"
ANNOTATION_EXACT_MATCH_RESERVATION = _PREFIX + "/exact-match-reservation"
LABEL_RESERVATION_IGNORED = _PREFIX + "/reservation-ignored"
"""Pod label ``"true"``: schedule as if no reservations existed; the pod never becomes an owner."""
ANNOTATION_RESERVATION_ALLOCATED = _PREFIX + "/reservation-allocated"
ANNOTATION_RESERVATION_RESTRICTED_OPTIONS = _PREFIX + "/reservation-restricted-options"
LABEL_RESERVATION_ORDER = _PREFIX + "/reservation-order"
"""Reservation label: a lower non-zero order is preferred; 0 ranks by score."""
LABEL_PRE_ALLOCATION_REQUIRED = _PREFIX + "/pre-allocation-required"
LABEL_POD_PRE_ALLOCATABLE = "pod.koordinator.sh/is-pre-allocatable"
"""Pod label ``"true"``: a pre-allocation candidate in ``Cluster`` mode (the key is configurable)."""
ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY = "pod.koordinator.sh/pre-allocatable-priority"
"""Numeric string; higher values are pre-allocated first in ``Cluster`` mode (the key is configurable)."""
LABEL_POD_OPERATING_MODE = _PREFIX + "/operating-mode"
ANNOTATION_RESERVATION_OWNERS = _PREFIX + "/reservation-owners"
ANNOTATION_RESERVATION_CURRENT_OWNER = _PREFIX + "/reservation-current-owner"

# Scheduler-internal annotations of the reserve pod that stands in for a Reservation.
ANNOTATION_RESERVE_POD = _PREFIX + "/reserve-pod"
ANNOTATION_RESERVATION_NAME = _PREFIX + "/reservation-name"
ANNOTATION_RESERVATION_NODE = _PREFIX + "/reservation-node"
ANNOTATION_IS_PRE_ALLOCATION = _PREFIX + "/is-pre-allocation"
ANNOTATION_RESERVATION_RESIZE_ALLOCATABLE = _PREFIX + "/reservation-resize-allocatable"

PodOperatingMode = Literal["Runnable", "Reservation"]
OPERATING_MODE_RUNNABLE: PodOperatingMode = "Runnable"
OPERATING_MODE_RESERVATION: PodOperatingMode = "Reservation"


class ReservationAffinitySelector(KoordModel):
    reservation_selector_terms: list[CheckedNodeSelectorTerm] | None = None
    """NodeSelectorTerms evaluated against reservation labels; terms are ORed. An unknown operator
    is refused, as Koordinator's ``nodeaffinity.NewNodeSelector`` refuses it."""


class ReservationAffinity(KoordModel):
    name: str | None = None
    """When set, only that reservation matches and every other field is ignored."""
    required_during_scheduling_ignored_during_execution: ReservationAffinitySelector | None = None
    reservation_selector: dict[str, str] | None = None
    """Exact label match on the reservation."""
    tolerations: list[Toleration] | None = None
    """Tolerates ``Reservation.spec.taints``. An unknown operator or effect is accepted, as
    Koordinator accepts it (that toleration tolerates nothing); ``apis.meta.unknown_toleration_values``
    names it for a warning."""


class ExactMatchReservationSpec(KoordModel):
    resource_names: list[str] | None = None


class ReservationAllocated(KoordModel):
    name: str | None = None
    uid: str | None = None


class ReservationRestrictedOptions(KoordModel):
    resources: list[str] | None = None
    """Resources capped at the reserved amount; empty means every reserved resource."""


class ReservationControllerReference(KoordModel):
    """metav1.OwnerReference plus a ``namespace`` to match controllers in other namespaces."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None
    namespace: str | None = None


class ReservationOwner(KoordModel):
    """One owner matcher; the fields set within one item are ANDed, items are ORed."""

    object: ObjectReference | None = None
    controller: ReservationControllerReference | None = None
    label_selector: LabelSelector | None = None


def parse_reservation_affinity(raw: str) -> ReservationAffinity:
    """The affinity JSON; an empty string is an empty affinity (the pod must still use a reservation)."""
    if raw == "":
        return ReservationAffinity()
    return parse_json(ANNOTATION_RESERVATION_AFFINITY, raw, ReservationAffinity)


def get_reservation_affinity(annotations: Mapping[str, str] | None) -> ReservationAffinity | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_RESERVATION_AFFINITY)
    return None if raw is None else parse_reservation_affinity(raw)


def parse_exact_match_reservation(raw: str) -> ExactMatchReservationSpec:
    return parse_json(ANNOTATION_EXACT_MATCH_RESERVATION, raw, ExactMatchReservationSpec)


def get_exact_match_reservation(annotations: Mapping[str, str] | None) -> ExactMatchReservationSpec | None:
    """None when absent or empty."""
    raw = lookup(annotations, ANNOTATION_EXACT_MATCH_RESERVATION)
    return parse_exact_match_reservation(raw) if raw else None


def is_reservation_ignored(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_RESERVATION_IGNORED) == "true"


def parse_reservation_allocated(raw: str) -> ReservationAllocated:
    return parse_json(ANNOTATION_RESERVATION_ALLOCATED, raw, ReservationAllocated)


def get_reservation_allocated(annotations: Mapping[str, str] | None) -> ReservationAllocated | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_RESERVATION_ALLOCATED)
    return None if raw is None else parse_reservation_allocated(raw)


def parse_reservation_restricted_options(raw: str) -> ReservationRestrictedOptions:
    if raw == "":
        return ReservationRestrictedOptions()
    return parse_json(ANNOTATION_RESERVATION_RESTRICTED_OPTIONS, raw, ReservationRestrictedOptions)


def get_reservation_restricted_options(annotations: Mapping[str, str] | None) -> ReservationRestrictedOptions:
    """Empty options when absent or empty."""
    raw = lookup(annotations, ANNOTATION_RESERVATION_RESTRICTED_OPTIONS)
    return parse_reservation_restricted_options(raw or "")


def parse_reservation_order(raw: str) -> int:
    """The reservation-order label: a decimal int64."""
    return parse_go_int(LABEL_RESERVATION_ORDER, raw, bits=64)


def get_reservation_order(labels: Mapping[str, str] | None) -> int | None:
    """None when the label is absent or empty."""
    raw = lookup(labels, LABEL_RESERVATION_ORDER)
    return parse_reservation_order(raw) if raw else None


def is_reserve_pod(annotations: Mapping[str, str] | None) -> bool:
    """The pod is the scheduler's stand-in for a Reservation (never a real pod)."""
    return lookup(annotations, ANNOTATION_RESERVE_POD) == "true"


def is_reservation_operating_mode(labels: Mapping[str, str] | None) -> bool:
    """The pod acts as a reservation unit (``operating-mode: Reservation``)."""
    return lookup(labels, LABEL_POD_OPERATING_MODE) == OPERATING_MODE_RESERVATION


_OWNERS: TypeAdapter[list[ReservationOwner]] = TypeAdapter(list[ReservationOwner])


def parse_reservation_owners(raw: str) -> list[ReservationOwner]:
    return parse_json(ANNOTATION_RESERVATION_OWNERS, raw, _OWNERS)


def get_reservation_owners(annotations: Mapping[str, str] | None) -> list[ReservationOwner] | None:
    """None when absent or empty."""
    raw = lookup(annotations, ANNOTATION_RESERVATION_OWNERS)
    return parse_reservation_owners(raw) if raw else None


def parse_reservation_current_owner(raw: str) -> ObjectReference:
    return parse_json(ANNOTATION_RESERVATION_CURRENT_OWNER, raw, ObjectReference)


def get_reservation_current_owner(annotations: Mapping[str, str] | None) -> ObjectReference | None:
    """None when absent or empty."""
    raw = lookup(annotations, ANNOTATION_RESERVATION_CURRENT_OWNER)
    return parse_reservation_current_owner(raw) if raw else None
