"""Write the NodeResourceTopology of every node the load file gives a ``topology``, from one process.

Each round reads the nodes (for their labels, annotations and UID), every bound pod and the NRTs
from koordlet's watched states (a round runs when a node or pod changes, and at least every
``interval``), and writes each node's NRT as a real koordlet would from that host: zones,
annotations, pools (the pods' resource-status cpusets included) and the kubelet's topology policy.
KWOK nodes have no cgroups, so no cpuset is applied.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from koordlet.simulate.model import LoadFile
from koordlet.simulate.topology_spec import NodeTopologySpec
from koordlet.states.store import States
from koordlet.topology.host import HostTopology
from koordlet.topology.reporter import (
    DEFAULT_INTERVAL_SECONDS,
    Complaints,
    TopologyAPI,
    report_node,
    report_on_changes,
)

__all__ = ["TopologySimulation"]


class TopologySimulation:
    def __init__(self, load: LoadFile, interval_seconds: float | None) -> None:
        self.specs = load.topologies()
        self.interval_seconds = interval_seconds or DEFAULT_INTERVAL_SECONDS
        # per node: a node's complaints are pruned to that node's pods
        self.complaints: dict[str, Complaints] = defaultdict(Complaints)
        self._hosts: dict[str, HostTopology] = {}

    async def _report(self, api: TopologyAPI, states: States, name: str, spec: NodeTopologySpec) -> None:
        node = states.node(name)
        if node is None:
            return  # not (yet) a node of this cluster
        host = self._hosts.get(name) or self._hosts.setdefault(name, spec.host())
        kubelet = spec.kubelet
        await report_node(
            api,
            node,
            host,
            states.pods(name),
            self.complaints[name],
            existing=states.topology(name),
            cpu_manager=kubelet.cpu_manager(host.cpus),
            topology_policy=kubelet.nrt_topology_policy(),
        )

    async def report_once(self, api: TopologyAPI, states: States) -> None:
        await asyncio.gather(*(self._report(api, states, name, spec) for name, spec in self.specs.items()))

    async def run(self, api: TopologyAPI, states: States) -> None:
        await report_on_changes(self.report_once, api, states, self.interval_seconds, "simulated topology")
