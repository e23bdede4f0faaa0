"""Preemption and eviction keys (api-reference 2.11).

Koordinator has no separate job-preemption key: gang preemption is ``CoschedulingArgs.enablePreemption``.
Victim eligibility: ``scheduling.koordinator.sh/disable-preemptible: "true"`` excludes a pod from
reservation and gang/job preemption; ``quota.scheduling.koordinator.sh/preemptible: "false"`` (see
:mod:`apis.extension.quota`) excludes it from quota and job preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from apis.base import KoordModel
from apis.errors import InvalidAnnotation, echo
from apis.extension._annotation import lookup, parse_go_int, parse_json
from apis.extension.quota import LABEL_PREEMPTIBLE
from apis.types import PreserveUnknownObject, Time

__all__ = [
    "ANNOTATION_EVICTION_COST",
    "ANNOTATION_SOFT_EVICTION",
    "EVICTION_COST_NEVER",
    "LABEL_DISABLE_PREEMPTIBLE",
    "LABEL_POD_PREEMPTION_POLICY",
    "LABEL_PREEMPTIBLE",
    "PreemptionPolicy",
    "SoftEvictionSpec",
    "get_eviction_cost",
    "get_soft_eviction_spec",
    "is_pod_preemptible",
    "parse_eviction_cost",
    "parse_soft_eviction_spec",
    "pod_preemption_policy",
]

LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
LABEL_POD_PREEMPTION_POLICY = "scheduling.koordinator.sh/preemption-policy"
"""Overrides spec.preemptionPolicy when the PreemptionPolicyTransformer gate is on."""
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"
ANNOTATION_SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"

EVICTION_COST_NEVER = 2**31 - 1
"""An eviction cost of int32 max means the pod is never evicted."""

PreemptionPolicy = Literal["Never", "PreemptLowerPriority"]


def is_pod_preemptible(labels: Mapping[str, str] | None) -> bool:
    """False only for ``disable-preemptible: "true"`` (reservation and gang/job preemption victims)."""
    return lookup(labels, LABEL_DISABLE_PREEMPTIBLE) != "true"


def pod_preemption_policy(labels: Mapping[str, str] | None) -> PreemptionPolicy | None:
    """The label's policy, or None when absent or not one of Never / PreemptLowerPriority."""
    value = lookup(labels, LABEL_POD_PREEMPTION_POLICY)
    if value in ("Never", "PreemptLowerPriority"):
        return value  # type: ignore[return-value]
    return None


def parse_eviction_cost(raw: str) -> int:
    """An int32 string. As in Koordinator, a leading ``+`` or a leading zero (``"008"``) is invalid."""
    if not (raw.startswith("-") or raw == "0" or raw[:1] in ("1", "2", "3", "4", "5", "6", "7", "8", "9")):
        raise InvalidAnnotation(
            ANNOTATION_EVICTION_COST, f"{echo(raw)} is not a valid int32 (no '+' sign or leading zeros)"
        )
    return parse_go_int(ANNOTATION_EVICTION_COST, raw, bits=32)


def get_eviction_cost(annotations: Mapping[str, str] | None) -> int:
    """The eviction cost, 0 when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_EVICTION_COST)
    return 0 if raw is None else parse_eviction_cost(raw)


class SoftEvictionSpec(KoordModel):
    timestamp: Time | None = None
    delete_options: PreserveUnknownObject | None = None
    """metav1.DeleteOptions, kept as a JSON object."""
    initiator: str | None = None
    reason: str | None = None


def parse_soft_eviction_spec(raw: str) -> SoftEvictionSpec:
    return parse_json(ANNOTATION_SOFT_EVICTION, raw, SoftEvictionSpec)


def get_soft_eviction_spec(annotations: Mapping[str, str] | None) -> SoftEvictionSpec | None:
    """None when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_SOFT_EVICTION)
    return None if raw is None else parse_soft_eviction_spec(raw)
