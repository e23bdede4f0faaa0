"""Scheduler name conventions and the scheduling hint (api-reference 2.12)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.base import KoordModel
from apis.extension._annotation import lookup, parse_json

__all__ = [
    "ANNOTATION_ORIGINAL_SCHEDULER_NAME",
    "ANNOTATION_SCHEDULING_HINT",
    "DEFAULT_SCHEDULER_NAME",
    "DEPRECATED_ANNOTATION_SCHEDULING_HINT",
    "KOORD_SCHEDULER_NAME",
    "LABEL_SANDBOX",
    "LABEL_SANDBOX_TEMPLATE_HASH",
    "LABEL_SCHEDULER_NAME",
    "SchedulingHint",
    "get_scheduling_hint",
    "parse_scheduling_hint",
    "scheduler_name_of",
]

KOORD_SCHEDULER_NAME = "koord-scheduler"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""What an empty ``spec.schedulerName`` (e.g. of a Reservation template) means."""

LABEL_SCHEDULER_NAME = "scheduling.koordinator.sh/scheduler-name"
"""Pod label overriding spec.schedulerName for the scheduler's profile routing."""
ANNOTATION_ORIGINAL_SCHEDULER_NAME = "internal.scheduling.koordinator.sh/original-scheduler-name"
"""The spec.schedulerName kept when the scheduler applies the label override."""
LABEL_SANDBOX = "scheduling.koordinator.sh/sandbox"
LABEL_SANDBOX_TEMPLATE_HASH = "scheduling.koordinator.sh/sandbox-template-hash"

ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
DEPRECATED_ANNOTATION_SCHEDULING_HINT = "scheduling.koordinator.sh/scheduling-hint"
"""Still read as a fallback when the internal key is absent or empty."""


def scheduler_name_of(labels: Mapping[str, str] | None, spec_scheduler_name: str | None) -> str:
    """The label when present (even empty), else spec.schedulerName, else ``default-scheduler``."""
    override = lookup(labels, LABEL_SCHEDULER_NAME)
    if override is not None:
        return override
    return spec_scheduler_name or DEFAULT_SCHEDULER_NAME


class SchedulingHint(KoordModel):
    node_names: list[str] | None = None
    """Nodes the pod is required to be scheduled on."""
    preferred_node_names: list[str] | None = None
    """Ordered nodes to try first."""
    extensions: dict[str, Any] | None = None


def parse_scheduling_hint(raw: str, key: str = ANNOTATION_SCHEDULING_HINT) -> SchedulingHint:
    return parse_json(key, raw, SchedulingHint)


def get_scheduling_hint(annotations: Mapping[str, str] | None) -> SchedulingHint | None:
    """The hint from the internal key, else from the deprecated key; empty values are ignored."""
    for key in (ANNOTATION_SCHEDULING_HINT, DEPRECATED_ANNOTATION_SCHEDULING_HINT):
        raw = lookup(annotations, key)
        if raw:
            return parse_scheduling_hint(raw, key)
    return None
