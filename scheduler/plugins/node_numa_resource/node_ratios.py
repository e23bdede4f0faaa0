"""Each node's amplification ratios (``node.koordinator.sh/resource-amplification-ratio``), a
malformed annotation counting as none with one warning (log line and event on the Node) per problem."""

from __future__ import annotations

import logging

from apis.client.backend import ObjectRef
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.node_numa_resource.amplification import safe_amplification_ratios
from scheduler.plugins.node_numa_resource.warning_events import WarningEvents

__all__ = ["NodeRatios"]

log = logging.getLogger(__name__)


class NodeRatios:
    def __init__(self, events: WarningEvents) -> None:
        self._events = events
        self._reported: dict[str, str] = {}
        """Node -> the amplification-ratio problem last reported on it."""

    def of(self, snapshot: Snapshot, node: str) -> dict[str, float]:
        """The node's amplification ratios by resource."""
        info = snapshot.node(node)
        obj = info.node if info is not None else None
        if obj is None:
            return {}
        ratios, problem = safe_amplification_ratios(obj.metadata.annotations)
        if problem is None:
            self._reported.pop(node, None)
        elif self._reported.get(node) != problem:
            self._reported[node] = problem
            message = f"cpu amplification ignored: {problem}"
            log.warning("node %s: %s", node, message)
            self._events.warn(
                ObjectRef(api_version="v1", kind="Node", name=node, uid=obj.metadata.uid), message
            )
        return ratios

    def cpu(self, snapshot: Snapshot, node: str) -> float:
        """The node's cpu amplification ratio (1 when none)."""
        return self.of(snapshot, node).get("cpu", 1.0)
