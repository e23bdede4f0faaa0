"""The NodeMetric koord-manager keeps for every node, as Koordinator's slo-controller creates it.

Named after the node and owned by it, so that the garbage collector removes it with the node even
if koord-manager missed the deletion. Its collect policy is the node's colocation strategy of
``slo-controller-config`` (``metricAggregateDurationSeconds``, ``metricReportIntervalSeconds``,
``metricAggregatePolicy``, ``metricMemoryCollectPolicy``: the cluster strategy, a matching
``nodeConfigs`` entry, the node's colocation-strategy annotation), with Koordinator's defaults
(report every 60 s, aggregate over 300 s, windows 5m/10m/30m, ``usageWithoutPageCache``) for what
it leaves out, as the slo-controller's ``getNodeMetricSpec`` writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast, get_args

from apis.meta import ObjectMeta, OwnerReference
from apis.slo.nodemetric import (
    MemoryCollectPolicy,
    NodeMetric,
    NodeMetricCollectPolicy,
    NodeMetricSpec,
    default_collect_policy,
)
from apis.slo.sloconfig.colocation import ParsedColocation, node_colocation_strategy

__all__ = ["collect_policy_for", "node_metric_for"]

_MEMORY_POLICIES: frozenset[str] = frozenset(get_args(MemoryCollectPolicy))


def collect_policy_for(
    config: ParsedColocation | None,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
) -> NodeMetricCollectPolicy:
    """The collect policy of a node under ``config`` (None: the defaults).

    A memory collect policy koordlet does not know is left to koordlet's default rather than
    written into a NodeMetric the CRD would refuse.
    """
    default = default_collect_policy()
    if config is None:
        return default
    strategy = node_colocation_strategy(config, labels, annotations).strategy
    memory: MemoryCollectPolicy | None = default.node_memory_collect_policy
    if strategy.metric_memory_collect_policy in _MEMORY_POLICIES:
        memory = cast(MemoryCollectPolicy, strategy.metric_memory_collect_policy)
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=strategy.metric_aggregate_duration_seconds
        or default.aggregate_duration_seconds,
        report_interval_seconds=strategy.metric_report_interval_seconds or default.report_interval_seconds,
        node_aggregate_policy=strategy.metric_aggregate_policy or default.node_aggregate_policy,
        node_memory_collect_policy=memory,
    )


def node_metric_for(
    node_name: str, node_uid: str, policy: NodeMetricCollectPolicy | None = None
) -> NodeMetric:
    return NodeMetric(
        api_version=NodeMetric.crd.api_version,
        kind=NodeMetric.crd.kind,
        metadata=ObjectMeta(
            name=node_name,
            owner_references=[OwnerReference(api_version="v1", kind="Node", name=node_name, uid=node_uid)],
        ),
        spec=NodeMetricSpec(metric_collect_policy=policy or default_collect_policy()),
    )
