"""NodeResourceTopology events: each node's NUMA zones, CPU topology and kubelet policies, with
what cannot be used of them reported once per problem."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from apis.client.backend import ObjectRef, ResourceType, WatchEvent, each
from apis.topology import NodeResourceTopology
from scheduler.plugins.node_numa_resource.store import NUMAStore
from scheduler.plugins.node_numa_resource.topology_options import topology_options
from scheduler.plugins.node_numa_resource.warning_events import WarningEvents

__all__ = ["NRTS", "NRTHandler"]

log = logging.getLogger(__name__)

NRTS = ResourceType.of(NodeResourceTopology)


class NRTHandler:
    def __init__(self, store: NUMAStore, events: WarningEvents) -> None:
        self.store = store
        self._events = events
        self._reported: dict[str, tuple[str, ...]] = {}
        """NRT name -> the problems last reported on it."""

    def on_event(self, event: WatchEvent[NodeResourceTopology]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, nrts: Sequence[NodeResourceTopology]) -> None:
        present = {nrt.metadata.name or "" for nrt in nrts}
        for node in list(self.store.options):
            if node not in present:
                self.store.remove_options(node)
        each(nrts, self._upsert)

    def _upsert(self, nrt: NodeResourceTopology) -> None:
        node = nrt.metadata.name or ""
        options = topology_options(nrt)
        self.store.set_options(node, options)
        if options.problems and self._reported.get(node) != options.problems:
            self._reported[node] = options.problems
            message = "; ".join(options.problems)
            log.warning("NodeResourceTopology %s: %s", node, message)
            regarding = ObjectRef(
                api_version=NRTS.api_version, kind=NRTS.kind, name=node, uid=nrt.metadata.uid
            )
            self._events.warn(regarding, message)

    def _delete(self, nrt: NodeResourceTopology) -> None:
        self.store.remove_options(nrt.metadata.name or "")
