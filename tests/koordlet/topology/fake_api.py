"""An in-memory stand-in for the API server topology reporting writes to, and the watched states it
reads (:meth:`FakeTopologyAPI.states`: the nodes, pods and NRTs as the informers would hold them)."""

from __future__ import annotations

from kubernetes_asyncio import client

from apis.core import Node, Pod
from apis.slo.nodeslo import NodeSLO
from apis.topology import NodeResourceTopology
from koordlet.states.resources import Kind
from koordlet.states.store import States


class FakeTopologyAPI:
    def __init__(self, nodes: list[Node], pods: list[Pod] | None = None) -> None:
        self.nodes = {n.metadata.name: n for n in nodes}
        self.pods = list(pods or [])
        self.topologies: dict[str, NodeResourceTopology] = {}
        self.writes: list[tuple[str, str]] = []
        self.events: list[dict[str, str | None]] = []
        self.conflict_on_create = False
        self.node_slos: list[NodeSLO] = []

    def states(self) -> States:
        states = States()
        states.replace(Kind.NODE, list(self.nodes.values()))
        states.replace(Kind.POD, [p for p in self.pods if p.spec.node_name])
        states.replace(
            Kind.TOPOLOGY,
            [NodeResourceTopology.model_validate(t.to_wire()) for t in self.topologies.values()],
        )
        states.replace(Kind.NODE_SLO, self.node_slos)
        return states

    async def create_topology(self, topology: NodeResourceTopology) -> None:
        name = topology.metadata.name or ""
        if self.conflict_on_create or name in self.topologies:
            raise client.ApiException(status=409, reason="AlreadyExists")
        self.topologies[name] = NodeResourceTopology.model_validate(topology.to_wire())
        self.writes.append(("create", name))

    async def update_topology(self, topology: NodeResourceTopology) -> None:
        name = topology.metadata.name or ""
        self.topologies[name] = NodeResourceTopology.model_validate(topology.to_wire())
        self.writes.append(("update", name))

    async def record_event(
        self, *, kind: str, name: str, namespace: str | None, uid: str | None, reason: str, message: str
    ) -> None:
        self.events.append(
            {
                "kind": kind,
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "reason": reason,
                "message": message,
            }
        )
