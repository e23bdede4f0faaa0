"""What the NRI plugin reads from koordlet's watched states: the pod (for its Kubernetes QoS class)
and the node's cpuset pools from the NodeResourceTopology koordlet writes."""

from __future__ import annotations

import logging

from apis.core import Pod
from apis.errors import InvalidAnnotation
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
