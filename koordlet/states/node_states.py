"""The states of one node (a real koordlet) and of every node (simulation mode), each kind watched once.

:class:`NodeStates` watches its Node, NodeSLO, NodeMetric and NodeResourceTopology by name
(``metadata.name=NODE``) and its pods by ``spec.nodeName=NODE``: five watches per koordlet, where
each of its loops used to poll. :class:`ClusterStates` (``koordlet --simulate``) watches every object
of those kinds and every bound pod (``spec.nodeName!=``) once, pods indexed by node.
"""

from __future__ import annotations

import asyncio

from koordlet.states.informer import Informer
from koordlet.states.resources import RESOURCES, Kind, ListWatchAPI
from koordlet.states.store import States

__all__ = ["ClusterStates", "NodeStates", "WatchedStates"]


class WatchedStates(States):
    """States kept by one informer per kind; :meth:`run` runs them until cancelled."""

    def __init__(self, api: ListWatchAPI, selectors: dict[Kind, str | None]) -> None:
        super().__init__()
        self.informers = {
            kind: Informer(api, RESOURCES[kind], self, field_selector=selector)
            for kind, selector in selectors.items()
        }

    async def run(self) -> None:
        await asyncio.gather(*(informer.run() for informer in self.informers.values()))


class NodeStates(WatchedStates):
    def __init__(self, api: ListWatchAPI, node_name: str) -> None:
        by_name = f"metadata.name={node_name}"
        super().__init__(
            api,
            {
                Kind.NODE: by_name,
                Kind.POD: f"spec.nodeName={node_name}",
                Kind.NODE_SLO: by_name,
                Kind.NODE_METRIC: by_name,
                Kind.TOPOLOGY: by_name,
            },
        )
        self.node_name = node_name


class ClusterStates(WatchedStates):
    def __init__(self, api: ListWatchAPI) -> None:
        super().__init__(api, {kind: "spec.nodeName!=" if kind is Kind.POD else None for kind in Kind})
