"""One node's batch and mid resources as the slo-controller's reconcile computes them (10.2, 10.3).

1. Co-location off (the cluster strategy's ``enable`` or the node's not true): every batch/mid resource is
   removed (a reset resource is deleted from the node, never set to 0).
2. The NodeMetric missing, never reported, or older than ``degradeTimeMinutes``: degrade, the
   resources are removed as well.
3. Otherwise batch (``batch``) and mid (``mid``); batch-cpu is scaled by the node's
   ``node.koordinator.sh/cpu-normalization-ratio`` when it is above 1 (mid-cpu is not).

The result is the value of every resource name the controller owns, None for "remove".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction

from apis.extension.colocation import BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY
from apis.extension.qosannotations import ANNOTATION_CPU_NORMALIZATION_RATIO
from apis.quantity import Format, Quantity
from apis.slo.sloconfig.colocation import ColocationStrategy
from operators.logic.noderesource.batch import batch_resources
from operators.logic.noderesource.inputs import NodeInputs
from operators.logic.noderesource.mid import mid_resources

__all__ = ["MANAGED_RESOURCES", "Outcome", "compute", "cpu_normalization_ratio", "normalized_batch_cpu"]

MANAGED_RESOURCES: tuple[str, ...] = (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)


@dataclass(frozen=True)
class Outcome:
    desired: dict[str, Quantity | None]
    reason: str
    """Why: ``disabled``, ``degraded`` or ``calculated``."""


def _removed(reason: str) -> Outcome:
    return Outcome(desired=dict.fromkeys(MANAGED_RESOURCES), reason=reason)


def cpu_normalization_ratio(annotations: dict[str, str] | None) -> Fraction | None:
    """The node's ratio when it is a number above 1, else None (not scaled)."""
    raw = (annotations or {}).get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is None:
        return None
    try:
        ratio = Fraction(raw.strip())
    except (ValueError, ZeroDivisionError):
        return None
    return ratio if ratio > 1 else None


def normalized_batch_cpu(milli: int, ratio: Fraction | None) -> int:
    """``ceil(trunc(milli x 1000 x ratio) / 1000)``: Koordinator scales the quantity in thousandths
    (truncating), and the non-integer quantity is rounded up when written."""
    if ratio is None:
        return milli
    return math.ceil(Fraction(math.trunc(milli * 1000 * ratio), 1000))


def is_degraded(update_time: datetime | None, now: datetime, degrade_time_minutes: int) -> bool:
    return update_time is None or now > update_time + timedelta(minutes=degrade_time_minutes)


def compute(
    inputs: NodeInputs,
    strategy: ColocationStrategy,
    now: datetime,
    annotations: dict[str, str] | None,
    *,
    cluster_enabled: bool = True,
) -> Outcome:
    """``cluster_enabled``: the cluster strategy's ``enable``; a node config cannot turn co-location
    on where the cluster has it off (Koordinator's ``isColocationCfgDisabled``)."""
    if not (cluster_enabled and strategy.enable):
        return _removed("disabled")
    if is_degraded(inputs.metric_update_time, now, strategy.degrade_time_minutes or 15):
        return _removed("degraded")
    batch = batch_resources(inputs, strategy)
    mid = mid_resources(inputs, strategy)
    return Outcome(
        desired={
            BATCH_CPU: Quantity.from_int(
                normalized_batch_cpu(batch.cpu, cpu_normalization_ratio(annotations))
            ),
            BATCH_MEMORY: Quantity.from_int(batch.memory, Format.BINARY_SI),
            MID_CPU: Quantity.from_int(mid.cpu),
            MID_MEMORY: Quantity.from_int(mid.memory, Format.BINARY_SI),
        },
        reason="calculated",
    )
