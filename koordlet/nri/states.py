"""What the NRI plugin reads from koordlet's watched states: the pod (for its Kubernetes QoS class
and its containers' batch resources), the node's cpuset pools from the NodeResourceTopology koordlet
writes, the node's effective NodeSLO and its CPU-normalization ratio."""

from __future__ import annotations

import logging

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.amplification import get_cpu_normalization_ratio
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.slo import effective_spec
from koordlet.states.store import States
from koordlet.topology.cpuset_rule import CPUSetRule

__all__ = ["StatesPodSource"]

log = logging.getLogger("koordlet.nri")


class StatesPodSource:
    def __init__(self, states: States, node_name: str) -> None:
        self.states = states
        self.node_name = node_name

    def watched_pod(self, uid: str) -> Pod | None:
        return next((pod for pod in self.states.pods(self.node_name) if pod.metadata.uid == uid), None)

    def cpuset_rule(self) -> CPUSetRule:
        """The pools of the node's NodeResourceTopology; none before it is written (a pod bound to
        CPUs needs none), or when its annotations do not parse (the reporter says so)."""
        topology = self.states.topology(self.node_name)
        if topology is None:
            return CPUSetRule()
        try:
            return CPUSetRule.from_annotations(topology.metadata.annotations)
        except (InvalidAnnotation, ValueError):
            return CPUSetRule()

    def node_slo_spec(self) -> NodeSLOSpec:
        """The NodeSLO merged over the defaults, as the reconcile reads it each round."""
        slo = self.states.node_slo(self.node_name)
        return effective_spec(slo.spec if slo else None)

    def cpu_normalization_ratio(self) -> float | None:
        """None when absent or malformed (the reconcile reports a malformed ratio)."""
        node = self.states.node(self.node_name)
        if node is None:
            return None
        try:
            return get_cpu_normalization_ratio(node.metadata.annotations)
        except InvalidAnnotation:
            return None
