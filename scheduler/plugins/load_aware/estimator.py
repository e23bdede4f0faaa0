"""What a pod will use before its usage is measured (Koordinator's DefaultEstimator, algorithms 7.2),
and how long after placement it is still estimated rather than trusted to the NodeMetric."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.core import Container, Pod
from apis.extension import colocation, loadaware
from apis.extension import priority as priority_ext
from apis.extension import qos as qos_ext
from apis.podqos import computed_kubernetes_qos
from apis.resources import to_int_units
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "Estimator",
    "go_round",
    "is_daemonset_pod",
    "pod_limits",
    "priority_class",
]

DEFAULT_MILLI_CPU_REQUEST = 250
"""Estimated cpu of a pod that requests and limits none (Koordinator's, not kube-scheduler's 100m)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_CPU_NAMES = frozenset({"cpu", colocation.BATCH_CPU})
_MEMORY_NAMES = frozenset({"memory", colocation.BATCH_MEMORY})


def go_round(value: float) -> int:
    """Go's ``math.Round`` (half away from zero), not Python's banker's rounding."""
    floor = math.floor(abs(value))
    rounded = floor + 1 if abs(value) - floor >= 0.5 else floor
    return int(math.copysign(rounded, value))


def priority_class(pod: Pod) -> priority_ext.PriorityClass:
    """Koordinator's ``GetPodPriorityClassWithDefault``: the label or the priority range, else the
    default of the pod's QoS class. Without a QoS label, Guaranteed (LSR) and Burstable (LS) both
    default to koord-prod and BestEffort (BE) to koord-batch, so only BestEffort is told apart."""
    labels = pod.metadata.labels or {}
    klass = priority_ext.priority_class_of(
        pod.spec.priority, labels.get(priority_ext.LABEL_POD_PRIORITY_CLASS)
    )
    if klass != priority_ext.PRIORITY_NONE:
        return klass
    return priority_ext.priority_class_of_qos(qos_ext.qos_class_of(labels, computed_kubernetes_qos(pod.spec)))


def is_daemonset_pod(pod: Pod) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references or ())


def _limits_of(container: Container) -> dict[str, int]:
    if container.resources is None or not container.resources.limits:
        return {}
    return {name: to_int_units(name, q) for name, q in container.resources.limits.items()}


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def pod_limits(pod: Pod) -> dict[str, int]:
    """kube's ``resourcehelper.PodLimits`` in integer units: containers and sidecars summed, raised
    to what each init container needs while it runs, plus the overhead of the limited resources."""
    total: dict[str, int] = {}
    for container in pod.spec.containers:
        _add(total, _limits_of(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod.spec.init_containers or ():
        own = _limits_of(init)
        running = dict(sidecars)
        _add(running if init.restart_policy != "Always" else sidecars, own)
        if init.restart_policy == "Always":
            running = dict(sidecars)
        for name, amount in running.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    _add(total, sidecars)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, q in (pod.spec.overhead or {}).items():
        if name in total:
            total[name] += to_int_units(name, q)
    return total


def _condition_time(pod: Pod, kind: str) -> float | None:
    for condition in pod.status.conditions or ():
        if condition.type == kind and condition.status == "True" and condition.last_transition_time:
            return condition.last_transition_time.timestamp()
    return None


@dataclass(frozen=True, slots=True)
class Estimator:
    """Estimates over the plugin's tracked resources (one vector entry per resource)."""

    args: LoadAwareSchedulingArgs
    resources: Sequence[str]

    def _factors(self, pod: PodInfo) -> dict[str, int]:
        factors = self.args.estimated_scaling_factors
        if not self.args.allow_customize_estimation:
            return factors
        try:
            custom = loadaware.get_custom_estimated_scaling_factors(pod.annotations)
        except ValueError:  # Koordinator ignores a malformed annotation
            custom = None
        return {**factors, **custom} if custom else factors

    def estimate(self, pod: PodInfo, klass: priority_ext.PriorityClass | None = None) -> IntArray:
        """Estimated usage per tracked resource (milli-cpu, bytes, units); ``klass``: the pod's
        priority class when the caller has it already."""
        factors = self._factors(pod)
        if klass is None:
            klass = priority_class(pod.pod)
        limits = pod_limits(pod.pod)
        out = np.zeros(len(self.resources), dtype=np.int64)
        for i, name in enumerate(self.resources):
            factor = factors.get(name)
            if factor is None:
                continue
            real = colocation.translate_resource_name(klass, name) or name
            limit = limits.get(real, 0)
            quantity = max(limit, pod.requests.get(real, 0))
            if quantity == 0:
                out[i] = (
                    DEFAULT_MILLI_CPU_REQUEST
                    if real in _CPU_NAMES
                    else DEFAULT_MEMORY_REQUEST
                    if real in _MEMORY_NAMES
                    else 0
                )
                continue
            estimated = go_round(quantity * factor / 100)
            out[i] = min(estimated, limit) if limit > 0 else estimated
        return out

    def _window(self, pod: PodInfo, own: int | None, annotation: str) -> int | None:
        if self.args.allow_customize_estimation:
            try:
                if annotation == loadaware.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED:
                    custom = loadaware.get_custom_estimated_seconds_after_pod_scheduled(pod.annotations)
                else:
                    custom = loadaware.get_custom_estimated_seconds_after_initialized(pod.annotations)
            except ValueError:
                custom = None
            if custom is not None and custom > 0:
                return custom
        return own if own is not None and own > 0 else None

    def deadline(self, pod: PodInfo, assigned_at: float) -> float | None:
        """Until when the pod is estimated whatever the NodeMetric says: its Initialized time plus
        ``estimatedSecondsAfterInitialized`` once initialized, else its assign time plus
        ``estimatedSecondsAfterPodScheduled``; None: no such window."""
        after_init = self._window(
            pod,
            self.args.estimated_seconds_after_initialized,
            loadaware.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED,
        )
        initialized = _condition_time(pod.pod, "Initialized")
        if after_init is not None and initialized is not None:
            return initialized + after_init
        after_scheduled = self._window(
            pod,
            self.args.estimated_seconds_after_pod_scheduled,
            loadaware.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED,
        )
        return assigned_at + after_scheduled if after_scheduled is not None else None


def assigned_at(pod: PodInfo, now: float) -> float:
    """The PodScheduled condition's time when the pod has one, else ``now`` (just reserved)."""
    scheduled = _condition_time(pod.pod, "PodScheduled")
    return scheduled if scheduled is not None else now
