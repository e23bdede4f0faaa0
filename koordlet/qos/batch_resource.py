"""The cgroup values of a BE pod on batch resources (Koordinator's ``BatchResource`` runtime hook,
``pkg/koordlet/runtimehooks/hooks/batchresource``, gate ``BatchResource``).

kubelet sees a pod on ``kubernetes.io/batch-cpu`` / ``batch-memory`` only as BestEffort, so it gives
it ``cpu.shares`` 2, no CFS quota and no memory limit; koordlet sets them from the batch resources:

- ``cpu.shares``: kubelet's ``MilliCPUToShares`` of the batch-cpu request (milli-cores; 2 for none),
  the pod's of the sum over its containers;
- CFS quota: ``MilliCPUToQuota`` of the batch-cpu limit, divided by the node's CPU-normalization
  ratio when above 1; the pod's is unlimited once one of its containers has no limit. When BE CPU
  suppression runs with the ``cfsQuota`` policy every quota is unset (-1) instead, since the
  ``besteffort`` cgroup's own quota must not be below its children's;
- memory limit: the batch-memory limit in bytes (-1 for none), the pod's of the sum, unlimited once a
  container has none.

A pod's batch resources are those of its containers that name any (``batch_spec``): from the pod's
spec when it has them, else from the ``node.koordinator.sh/extended-resource-spec`` annotation the
webhook writes, which is all the runtime hands over at creation. The ``koordinator.sh/batch-*``
aliases count as the ``kubernetes.io`` names. Only pods labelled BE get these values.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.core import Pod
from apis.extension._annotation import ResourceList
from apis.extension.colocation import (
    BATCH_CPU,
    BATCH_MEMORY,
    KOORD_BATCH_CPU,
    KOORD_BATCH_MEMORY,
    ExtendedResourceContainerSpec,
    ExtendedResourceSpec,
    get_extended_resource_spec,
)
from apis.extension.qos import QOS_BE, qos_class_from_labels
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.cfs import normalize_quota, quota_of_milli

__all__ = [
    "BatchCgroups",
    "BatchQuotaRule",
    "batch_quota_rule",
    "batch_spec",
    "container_batch_cgroups",
    "is_batch_pod",
    "milli_cpu_to_shares",
    "pod_batch_cgroups",
    "pod_batch_quota",
]

MIN_SHARES = 2
MAX_SHARES = 262144
_SHARES_PER_CPU = 1024


def milli_cpu_to_shares(milli: int) -> int:
    """kubelet's (and Koordinator's) ``MilliCPUToShares``: 2 for no request, at most 262144."""
    if milli <= 0:
        return MIN_SHARES
    return min(max(milli * _SHARES_PER_CPU // 1000, MIN_SHARES), MAX_SHARES)


@dataclass(frozen=True)
class BatchQuotaRule:
    enabled: bool = True
    """False while BE CPU suppression uses the ``cfsQuota`` policy: every BE quota is unset."""
    ratio: float | None = None
    """The node's CPU-normalization ratio (None: not normalized)."""


def batch_quota_rule(
    spec: NodeSLOSpec, gates: KoordletFeatureGates, ratio: float | None = None
) -> BatchQuotaRule:
    strategy = spec.resource_used_threshold_with_be
    suppressed_by_quota = bool(
        gates.be_cpu_suppress
        and strategy is not None
        and strategy.enable
        and strategy.cpu_suppress_policy == "cfsQuota"
    )
    return BatchQuotaRule(enabled=not suppressed_by_quota, ratio=ratio)


@dataclass(frozen=True)
class BatchCgroups:
    cpu_shares: int
    cfs_quota: int
    """v1 units, -1 unlimited."""
    memory_limit: int
    """Bytes, -1 unlimited."""


def is_batch_pod(pod: Pod) -> bool:
    return qos_class_from_labels(pod.metadata.labels) == QOS_BE


def _batch_of(resources: ResourceList | None) -> ResourceList:
    found: ResourceList = {}
    for name, alias in ((BATCH_CPU, KOORD_BATCH_CPU), (BATCH_MEMORY, KOORD_BATCH_MEMORY)):
        quantity = (resources or {}).get(name) or (resources or {}).get(alias)
        if quantity is not None:
            found[name] = quantity
    return found


def batch_spec(pod: Pod) -> ExtendedResourceSpec:
    """The pod's containers that name batch resources, with those resources only: from its spec,
    else from its extended-resource-spec annotation (raises InvalidAnnotation when that does not
    parse)."""
    containers: dict[str, ExtendedResourceContainerSpec] = {}
    for container in pod.spec.containers:
        resources = container.resources
        requests = _batch_of(resources.requests if resources else None)
        limits = _batch_of(resources.limits if resources else None)
        if requests or limits:
            containers[container.name] = ExtendedResourceContainerSpec(requests=requests, limits=limits)
    if containers:
        return ExtendedResourceSpec(containers=containers)
    annotated = get_extended_resource_spec(pod.metadata.annotations)
    return ExtendedResourceSpec(
        containers={
            name: ExtendedResourceContainerSpec(
                requests=_batch_of(entry.requests), limits=_batch_of(entry.limits)
            )
            for name, entry in (annotated.containers or {}).items()
        }
        or None
    )


def _value(resources: ResourceList | None, name: str) -> int:
    """The resource's value (batch-cpu counts milli-cores), -1 when absent."""
    quantity = (resources or {}).get(name)
    return -1 if quantity is None else quantity.value()


def _quota(milli: int, rule: BatchQuotaRule) -> int:
    if not rule.enabled:
        return -1
    return normalize_quota(quota_of_milli(milli), rule.ratio)


def _sum_of_limits(spec: ExtendedResourceSpec, name: str) -> int:
    total = 0
    for container in (spec.containers or {}).values():
        limit = _value(container.limits, name)
        if limit <= 0:  # one unlimited container leaves the pod unlimited
            return -1
        total += limit
    return total


def pod_batch_quota(spec: ExtendedResourceSpec, rule: BatchQuotaRule) -> int:
    return _quota(_sum_of_limits(spec, BATCH_CPU), rule)


def pod_batch_cgroups(spec: ExtendedResourceSpec, rule: BatchQuotaRule) -> BatchCgroups | None:
    """The pod cgroup's values; None when no container names batch resources."""
    if not spec.containers:
        return None
    requested = sum(max(_value(c.requests, BATCH_CPU), 0) for c in spec.containers.values())
    return BatchCgroups(
        cpu_shares=milli_cpu_to_shares(requested),
        cfs_quota=pod_batch_quota(spec, rule),
        memory_limit=_sum_of_limits(spec, BATCH_MEMORY),
    )


def container_batch_cgroups(
    spec: ExtendedResourceSpec, container: str, rule: BatchQuotaRule
) -> BatchCgroups | None:
    """The values of the container named ``container``; None when it names no batch resources."""
    entry = (spec.containers or {}).get(container)
    if entry is None:
        return None
    memory = _value(entry.limits, BATCH_MEMORY)
    return BatchCgroups(
        cpu_shares=milli_cpu_to_shares(_value(entry.requests, BATCH_CPU)),
        cfs_quota=_quota(_value(entry.limits, BATCH_CPU), rule),
        memory_limit=memory if memory > 0 else -1,
    )
