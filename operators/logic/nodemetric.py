"""The NodeMetric koord-manager keeps for every node, as Koordinator's slo-controller creates it.

Named after the node, with the default collect policy (report every 60 s, aggregate over 300 s,
windows 5m/10m/30m, ``usageWithoutPageCache``) and owned by the node, so that the garbage collector
removes it with the node even if koord-manager missed the deletion.
"""

from __future__ import annotations

from apis.meta import ObjectMeta, OwnerReference
from apis.slo.nodemetric import NodeMetric, NodeMetricSpec, default_collect_policy

__all__ = ["node_metric_for"]


def node_metric_for(node_name: str, node_uid: str) -> NodeMetric:
    return NodeMetric(
        api_version=NodeMetric.crd.api_version,
        kind=NodeMetric.crd.kind,
        metadata=ObjectMeta(
            name=node_name,
            owner_references=[OwnerReference(api_version="v1", kind="Node", name=node_name, uid=node_uid)],
        ),
        spec=NodeMetricSpec(metric_collect_policy=default_collect_policy()),
    )
