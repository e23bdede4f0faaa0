"""Write the NodeResourceTopology of every node the load file gives a ``topology``, from one process.

Each round reads the nodes (for their labels, annotations and UID) and every bound pod once, and
writes each node's NRT as a real koordlet would from that host: zones, annotations, pools (the
pods' resource-status cpusets included) and the kubelet's topology policy. KWOK nodes have no
cgroups, so no cpuset is applied.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from apis.core import Pod
from koordlet.simulate.model import LoadFile
from koordlet.simulate.topology_spec import NodeTopologySpec
from koordlet.topology.host import HostTopology
from koordlet.topology.reporter import (
    DEFAULT_INTERVAL_SECONDS,
    RETRYABLE,
    Complaints,
    TopologyAPI,
    report_node,
)

__all__ = ["TopologySimulation"]

log = logging.getLogger("koordlet.simulate")


class TopologySimulation:
    def __init__(self, load: LoadFile, interval_seconds: float | None) -> None:
        self.specs = load.topologies()
        self.interval_seconds = interval_seconds or DEFAULT_INTERVAL_SECONDS
        # per node: a node's complaints are pruned to that node's pods
        self.complaints: dict[str, Complaints] = defaultdict(Complaints)
        self._hosts: dict[str, HostTopology] = {}

    async def _report(self, api: TopologyAPI, name: str, spec: NodeTopologySpec, pods: list[Pod]) -> None:
        node = await api.get_node(name)
        if node is None:
            return  # not (yet) a node of this cluster
        host = self._hosts.get(name) or self._hosts.setdefault(name, spec.host())
        kubelet = spec.kubelet
        await report_node(
            api,
            node,
            host,
            pods,
            self.complaints[name],
            cpu_manager=kubelet.cpu_manager(host.cpus),
            topology_policy=kubelet.nrt_topology_policy(),
        )

    async def report_once(self, api: TopologyAPI) -> None:
        by_node: dict[str, list[Pod]] = defaultdict(list)
        for pod in await api.list_pods("spec.nodeName!="):
            by_node[pod.spec.node_name or ""].append(pod)
        await asyncio.gather(
            *(self._report(api, name, spec, by_node.get(name, [])) for name, spec in self.specs.items())
        )

    async def run(self, api: TopologyAPI) -> None:
        while True:
            try:
                await self.report_once(api)
            except RETRYABLE as exc:
                log.warning("simulated topology report failed, retrying: %s", exc)
            await asyncio.sleep(self.interval_seconds)
