"""A node's resource amplification ratios (Koordinator's slo-controller resourceamplification plugin,
algorithms.md 10.4 step 4).

``ratios`` = the strategy's ``resourceAmplificationRatio`` when its ``enable`` is true, else none;
then the CPU ratio becomes ``(the configured cpu ratio, or 1) x (the CPU normalization ratio)`` and
is kept only when above 1. No ratio at all: the annotation is removed.

Unlike Koordinator, the CPU normalization ratio is the one this reconcile puts on the node, not the
one the node carried before it (Koordinator amplifies one reconcile behind, algorithms.md 10.8).
Ratios below 1 never get here: the config refuses them (``apis.slo.sloconfig.cpu_normalization``).
"""

from __future__ import annotations

from apis.extension.amplification import format_amplification_ratios
from apis.slo.sloconfig.cpu_normalization import ResourceAmplificationStrategy

__all__ = ["amplification_annotation", "amplification_ratios"]


def amplification_ratios(
    strategy: ResourceAmplificationStrategy, cpu_normalization_ratio: float | None
) -> dict[str, float]:
    """Resource name -> ratio for a node whose CPU normalization ratio is ``cpu_normalization_ratio``
    (None: the node has none)."""
    ratios = dict(strategy.resource_amplification_ratio or {}) if strategy.enable else {}
    configured = ratios.get("cpu", 0.0)
    cpu = configured if configured > 0 else 1.0
    if cpu_normalization_ratio is not None and cpu_normalization_ratio > 0:
        cpu *= cpu_normalization_ratio  # float64, as Koordinator multiplies
    if cpu > 1:
        ratios["cpu"] = cpu
    return ratios


def amplification_annotation(ratios: dict[str, float]) -> str | None:
    """The annotation value; None (remove it) when there is nothing to amplify."""
    return format_amplification_ratios(ratios) if ratios else None
