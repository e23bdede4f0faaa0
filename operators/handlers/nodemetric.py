"""A NodeMetric for every node, removed with the node (Koordinator's slo-controller nodemetric controller).

Node watch events (``on.event``: nothing is written to the nodes, no finalizer) create the node's
NodeMetric with the default collect policy (``operators.logic.nodemetric``) the first time
koord-manager sees the node, and delete it on the node's DELETED event; the NodeMetric's owner
reference to its node lets the garbage collector remove it as well when koord-manager was not
running. A NodeMetric deleted while its node exists is created again, as the slo-controller does.
An API server that cannot take the write yet is retried a few times, then on the node's next event.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from apis.slo.nodemetric import NodeMetric
from operators.clients import NodeMetricClient
from operators.handlers import errors
from operators.logic.nodemetric import node_metric_for

__all__ = ["NodeMetrics", "register"]

_ATTEMPTS = 5


class NodeMetrics:
    def __init__(self, client: NodeMetricClient) -> None:
        self.client = client
        self.nodes: dict[str, str] = {}
        """Node name -> UID of every node seen and not deleted."""
        self.ensured: set[str] = set()
        """Nodes whose NodeMetric was created (or found) since koord-manager started."""

    async def _create(self, name: str, uid: str, logger: kopf.Logger) -> None:
        for attempt in range(_ATTEMPTS):
            try:
                created = await self.client.create(node_metric_for(name, uid))
            except errors.API_ERRORS as exc:
                if attempt == _ATTEMPTS - 1:
                    logger.warning(f"NodeMetric {name} not created (retried on the node's next event): {exc}")
                    return
                await asyncio.sleep(errors.RETRY_DELAY_SECONDS)
                continue
            self.ensured.add(name)
            if created:
                logger.info(f"created NodeMetric {name}")
            return

    async def on_node(self, type: str | None, name: str, uid: str, logger: kopf.Logger, **_: Any) -> None:
        if type == "DELETED":
            self.nodes.pop(name, None)
            self.ensured.discard(name)
            try:
                if await self.client.delete(name):
                    logger.info(f"deleted NodeMetric {name} with its node")
            except errors.API_ERRORS as exc:
                logger.warning(f"NodeMetric {name} not deleted (its owner reference still lets it go): {exc}")
            return
        self.nodes[name] = uid
        if name not in self.ensured:
            await self._create(name, uid, logger)

    async def on_node_metric(self, type: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
        if type != "DELETED" or name not in self.nodes:
            return
        self.ensured.discard(name)
        await self._create(name, self.nodes[name], logger)


def register(registry: kopf.OperatorRegistry, client: NodeMetricClient) -> NodeMetrics:
    handlers = NodeMetrics(client)
    kopf.on.event("", "v1", "nodes", id="nodemetric_per_node", registry=registry)(handlers.on_node)
    info = NodeMetric.crd
    kopf.on.event(info.group, info.version, info.plural, id="nodemetric_recreate", registry=registry)(
        handlers.on_node_metric
    )
    return handlers
