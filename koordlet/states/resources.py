"""The kinds koordlet watches and the list/watch calls an informer needs from the API client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel

from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric
from apis.slo.nodeslo import NodeSLO
from apis.topology import NodeResourceTopology

__all__ = ["RESOURCES", "Kind", "ListWatchAPI", "Resource", "resource_path"]


class Kind(StrEnum):
    NODE = "Node"
    POD = "Pod"
    NODE_SLO = "NodeSLO"
    NODE_METRIC = "NodeMetric"
    TOPOLOGY = "NodeResourceTopology"


@dataclass(frozen=True)
class Resource:
    kind: Kind
    group: str
    version: str
    plural: str
    model: type[BaseModel]
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _crd(kind: Kind, model: Any) -> Resource:
    crd = model.crd
    return Resource(kind, crd.group, crd.version, crd.plural, model)


RESOURCES: dict[Kind, Resource] = {
    Kind.NODE: Resource(Kind.NODE, "", "v1", "nodes", Node),
    Kind.POD: Resource(Kind.POD, "", "v1", "pods", Pod, namespaced=True),
    Kind.NODE_SLO: _crd(Kind.NODE_SLO, NodeSLO),
    Kind.NODE_METRIC: _crd(Kind.NODE_METRIC, NodeMetric),
    Kind.TOPOLOGY: _crd(Kind.TOPOLOGY, NodeResourceTopology),
}


def resource_path(resource: Resource) -> str:
    """The collection's path across all namespaces (what koordlet lists and watches)."""
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
    return f"{prefix}/{resource.plural}"


class ListWatchAPI(Protocol):
    """Raw list and watch of one collection (``koordlet.client.KoordletClient`` in koordlet)."""

    async def list_raw(
        self, resource: Resource, field_selector: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        """The items (JSON objects) and the list's resourceVersion."""
        ...

    def watch_raw(
        self, resource: Resource, field_selector: str | None, resource_version: str
    ) -> AsyncIterator[dict[str, Any]]:
        """The watch events (``{"type": ..., "object": ...}``) from ``resource_version``, bookmarks
        allowed, until the server ends the watch; raises ``apis.client.watch.Gone`` on HTTP 410."""
        ...
