"""The node status mutation that amplifies ``cpu`` and ``memory`` allocatable (Koordinator's node
webhook plugin ``resourceamplification``, algorithms.md 10.4 step 5, with the v1.6 fix).

On an UPDATE of ``nodes/status``:

1. No ``resource-amplification-ratio`` annotation (or an empty one): the ``raw-allocatable``
   annotation is removed; nothing else changes.
2. The raw allocatable is the incoming cpu/memory allocatable when there is no ``raw-allocatable``
   yet or when the incoming cpu/memory differ from the old object's (kubelet reported new values,
   e.g. after its reservation changed): it is saved into ``raw-allocatable``. Otherwise (an update
   that only carried the amplified values along) it is the saved ``raw-allocatable``. Before v1.6,
   Koordinator lost the saved values at this step and amplified nothing.
3. ``cpu`` and ``memory`` with a ratio above 1 become ``trunc(raw milli-value x ratio)``; capacity
   and every other resource are left as they come.

Nothing here refuses the update (kubelet's status must go through): a malformed annotation or
quantity leaves what it concerns unamplified, with a warning for the client and the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.errors import InvalidValue
from apis.extension.amplification import (
    format_raw_allocatable,
    get_raw_allocatable,
    get_resource_amplification_ratios,
    multiply_milli,
)
from apis.extension.qosannotations import (
    ANNOTATION_NODE_RAW_ALLOCATABLE,
    ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO,
)
from apis.quantity import Quantity

__all__ = ["AMPLIFIED_RESOURCES", "StatusMutation", "amplify_status"]

AMPLIFIED_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True)
class StatusMutation:
    annotations: dict[str, str | None] = field(default_factory=dict)
    """Annotations to set; None removes one."""
    allocatable: dict[str, str] = field(default_factory=dict)
    """``status.allocatable`` entries to set."""
    warnings: list[str] = field(default_factory=list)


def _supported(allocatable: Mapping[str, Any] | None) -> tuple[dict[str, Quantity], list[str]]:
    quantities: dict[str, Quantity] = {}
    problems = []
    for name in AMPLIFIED_RESOURCES:
        if allocatable is None or name not in allocatable:
            continue
        try:
            quantities[name] = Quantity.parse(allocatable[name])
        except InvalidValue as exc:
            problems.append(f"status.allocatable.{name}: {exc}")
    return quantities, problems


def amplify_status(
    annotations: Mapping[str, str] | None,
    allocatable: Mapping[str, Any] | None,
    old_allocatable: Mapping[str, Any] | None,
) -> StatusMutation:
    """What the webhook changes in a node whose incoming ``metadata.annotations`` and
    ``status.allocatable`` are given, ``old_allocatable`` being the stored object's."""
    annotations = annotations or {}
    if not annotations.get(ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO):
        if ANNOTATION_NODE_RAW_ALLOCATABLE in annotations:
            return StatusMutation(annotations={ANNOTATION_NODE_RAW_ALLOCATABLE: None})
        return StatusMutation()
    if allocatable is None:
        return StatusMutation()
    incoming, warnings = _supported(allocatable)
    old, _ = _supported(old_allocatable)
    mutation = StatusMutation(warnings=warnings)
    if ANNOTATION_NODE_RAW_ALLOCATABLE not in annotations or incoming != old:
        raw = incoming
        if raw:
            mutation.annotations[ANNOTATION_NODE_RAW_ALLOCATABLE] = format_raw_allocatable(raw)
    else:
        try:
            raw = get_raw_allocatable(annotations) or {}
        except InvalidValue as exc:
            warnings.append(f"allocatable not amplified: {exc}")
            return mutation
    try:
        ratios = get_resource_amplification_ratios(annotations) or {}
    except InvalidValue as exc:
        warnings.append(f"allocatable not amplified: {exc}")
        return mutation
    for name in AMPLIFIED_RESOURCES:
        ratio = ratios.get(name)
        if ratio is None or not ratio > 1 or name not in raw:
            continue
        try:
            mutation.allocatable[name] = str(multiply_milli(raw[name], ratio))
        except InvalidValue as exc:
            warnings.append(f"allocatable {name} not amplified: {exc}")
    return mutation
