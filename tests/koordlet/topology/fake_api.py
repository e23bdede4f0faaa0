"""An in-memory stand-in for the API calls topology reporting makes."""

from __future__ import annotations

from kubernetes_asyncio import client

from apis.core import Node, Pod
from apis.topology import NodeResourceTopology


class FakeTopologyAPI:
    def __init__(self, nodes: list[Node], pods: list[Pod] | None = None) -> None:
        self.nodes = {n.metadata.name: n for n in nodes}
        self.pods = list(pods or [])
        self.topologies: dict[str, NodeResourceTopology] = {}
        self.writes: list[tuple[str, str]] = []
        self.events: list[dict[str, str | None]] = []
        self.conflict_on_create = False

    async def get_node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    async def list_pods(self, field_selector: str) -> list[Pod]:
        key, op, value = (
            field_selector.partition("!=") if "!=" in field_selector else field_selector.partition("=")
        )
        assert key == "spec.nodeName"
        if op == "!=":
            return [p for p in self.pods if (p.spec.node_name or "") != value]
        return [p for p in self.pods if p.spec.node_name == value]

    async def get_topology(self, name: str) -> NodeResourceTopology | None:
        found = self.topologies.get(name)
        return NodeResourceTopology.model_validate(found.to_wire()) if found else None

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
