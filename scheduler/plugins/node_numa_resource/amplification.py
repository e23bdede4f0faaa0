"""CPU amplification on a node (algorithms 11.3 step 4, 11.5; Koordinator's ``filterAmplifiedCPUs``).

A node whose ``node.koordinator.sh/resource-amplification-ratio`` gives cpu > 1 has its allocatable
cpu amplified by the Node webhook, but a CPU bound to a cpuset cannot be shared: each one counts as
``ceil(1000 x ratio)`` milli-CPU against the node's (amplified) allocatable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from apis.errors import InvalidAnnotation
from apis.extension.amplification import get_resource_amplification_ratios

__all__ = [
    "ERR_INSUFFICIENT_AMPLIFIED_CPU",
    "amplified_cpu_fits",
    "amplify",
    "safe_amplification_ratios",
]

ERR_INSUFFICIENT_AMPLIFIED_CPU = "Insufficient amplified cpu"


def amplify(milli: int, ratio: float) -> int:
    """Koordinator's ``extension.Amplify``: ``ceil(milli x ratio)`` in float64, unchanged for a ratio <= 1."""
    return math.ceil(milli * ratio) if ratio > 1 else milli


def amplified_cpu_fits(
    *,
    pod_milli_cpu: int,
    pod_binds: bool,
    ratio: float,
    node_allocatable: int,
    node_requested: int,
    cpuset_cpus: int,
) -> bool:
    """Whether the pod's cpu fits the node once cpuset CPUs count amplified. ``node_requested`` is
    the milli-CPU the node's pods request (cpuset pods by their plain requests), ``cpuset_cpus``
    the CPUs held by cpusets there."""
    if pod_milli_cpu == 0 or ratio <= 1:
        return True
    if pod_binds:
        pod_milli_cpu = amplify(pod_milli_cpu, ratio)
    held = 1000 * cpuset_cpus
    requested = node_requested
    if held and requested >= held:
        requested = requested - held + amplify(held, ratio)
    return pod_milli_cpu <= node_allocatable - requested


def safe_amplification_ratios(annotations: Mapping[str, str] | None) -> tuple[dict[str, float], str | None]:
    """The node's ratios by resource and, for a malformed annotation, the problem (then no
    amplification: no ratios)."""
    try:
        return dict(get_resource_amplification_ratios(annotations) or {}), None
    except InvalidAnnotation as exc:
        return {}, str(exc)
