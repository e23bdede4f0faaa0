"""Batch and mid node resources (Koordinator's slo-controller noderesource controller).

Three watches feed one reconcile per node (``operators.logic.noderesource``):

- the ``koordinator-system/slo-controller-config`` ConfigMap: its ``colocation-config`` key is
  parsed (``apis.slo.sloconfig.colocation``) and every node reconciled when it changes; a key that
  is refused leaves the last good config in force and is reported as a Warning event on the
  ConfigMap and a log line naming the key. Until a first good config is read nothing is written,
  so a broken ConfigMap at start leaves the nodes as a previous koord-manager left them;
- Node events (labels, annotations, capacity or allocatable changed);
- NodeMetric events (koordlet's report, every ``reportIntervalSeconds``).

A reconcile lists the node's pods, computes the four resources and, when the damping allows
(``damping.need_sync``), merge-patches them into the node's ``status.capacity`` and
``status.allocatable``; a removed resource is deleted (null in the patch). An API error is logged
and retried on the node's next event. A node annotation that does not parse (reservation,
colocation-strategy) is skipped and reported once as a Warning event on the node.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import kopf
from pydantic import ValidationError

from apis.core import Node, Pod
from apis.quantity import Quantity
from apis.slo.nodemetric import NodeMetric
from apis.slo.sloconfig import KEY_COLOCATION, SLO_CONFIG_NAME, SLO_CONFIG_NAMESPACE
from apis.slo.sloconfig.colocation import ParsedColocation, node_colocation_strategy, parse_colocation_config
from operators.handlers import errors
from operators.logic.noderesource.damping import need_sync
from operators.logic.noderesource.inputs import node_inputs
from operators.logic.noderesource.node_resources import MANAGED_RESOURCES, compute
from operators.logic.sloconfig_key import LastGoodKey

__all__ = ["INVALID_CONFIG_REASON", "NodeResourceController", "register"]

INVALID_CONFIG_REASON = "InvalidColocationConfig"
INVALID_NODE_REASON = "InvalidColocationAnnotation"


class NodeResourceAPI(Protocol):
    async def pods_on_node(self, node_name: str) -> list[Pod]: ...

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None: ...


def _watched(node: Node) -> tuple[Any, ...]:
    """What a node event may change that the result depends on (heartbeats change none of it)."""
    status = node.status
    return (
        node.metadata.labels,
        node.metadata.annotations,
        status.capacity,
        status.allocatable,
    )


def _same(a: Quantity | None, b: Quantity | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and a == b)


class NodeResourceController:
    def __init__(self, client: NodeResourceAPI, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.clock = clock
        self.config: LastGoodKey[ParsedColocation] = LastGoodKey(
            KEY_COLOCATION, parse_colocation_config, defaults_on_first_error=False
        )
        self.nodes: dict[str, Node] = {}
        self.bodies: dict[str, kopf.Body] = {}
        """Node name -> the identity Kopf needs to post an event on it."""
        self.metrics: dict[str, NodeMetric] = {}
        self.last_write: dict[str, float] = {}
        """Node name -> when this process last wrote its resources (the damping timer)."""
        self.reported: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # --- watches -----------------------------------------------------------------------------------

    async def on_config(self, type: str | None, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        data = None if type == "DELETED" else body.get("data")
        outcome = self.config.apply(data)
        if outcome.error is not None:
            logger.warning(
                f"{SLO_CONFIG_NAMESPACE}/{SLO_CONFIG_NAME} key {outcome.error} "
                "(the last good colocation-config stays in force)"
            )
            kopf.warn(body, reason=INVALID_CONFIG_REASON, message=outcome.error)
        if outcome.changed:
            for name in sorted(self.nodes):
                await self.reconcile(name, logger)

    async def on_node(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if type == "DELETED":
            for table in (self.nodes, self.bodies, self.last_write, self.reported, self._locks):
                table.pop(name, None)
            return
        try:
            node = Node.model_validate(dict(body))
        except ValidationError as exc:
            logger.warning(f"node {name} does not parse, its batch/mid resources are left as they are: {exc}")
            return
        old = self.nodes.get(name)
        self.nodes[name] = node
        self.bodies[name] = body
        if old is None or _watched(old) != _watched(node):
            await self.reconcile(name, logger)

    async def on_node_metric(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if type == "DELETED":
            self.metrics.pop(name, None)
        else:
            try:
                metric = NodeMetric.model_validate(dict(body))
            except ValidationError as exc:
                logger.warning(f"NodeMetric {name} does not parse, taken as missing: {exc}")
                self.metrics.pop(name, None)
            else:
                old = self.metrics.get(name)
                self.metrics[name] = metric
                if old is not None and old.status == metric.status:
                    return
        await self.reconcile(name, logger)

    # --- reconcile ---------------------------------------------------------------------------------

    def _report(self, name: str, problems: list[str], logger: kopf.Logger) -> None:
        text = "; ".join(problems)
        if not text or self.reported.get(name) == text:
            if not text:
                self.reported.pop(name, None)
            return
        self.reported[name] = text
        logger.warning(f"node {name}: {text} (skipped)")
        kopf.warn(self.bodies[name], reason=INVALID_NODE_REASON, message=text)

    async def reconcile(self, name: str, logger: kopf.Logger) -> None:
        config = self.config.value
        if config is None or name not in self.nodes:
            return
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            node = self.nodes.get(name)
            if node is None:
                return
            labels, annotations = node.metadata.labels, node.metadata.annotations
            chosen = node_colocation_strategy(config, labels, annotations)
            strategy = chosen.strategy
            enabled = bool(config.cluster.enable and strategy.enable)
            try:
                pods = await self.client.pods_on_node(name) if enabled else []
            except errors.API_ERRORS as exc:
                logger.warning(f"pods of node {name} not listed (retried on its next event): {exc}")
                return
            inputs = node_inputs(node, pods, self.metrics.get(name))
            self._report(name, [p for p in (chosen.problem, *inputs.problems) if p], logger)
            now = self.clock()
            outcome = compute(
                inputs, strategy, datetime.fromtimestamp(now, UTC), annotations, cluster_enabled=enabled
            )
            capacity = dict(node.status.capacity or {})
            allocatable = dict(node.status.allocatable or {})
            if all(
                _same(capacity.get(n), outcome.desired[n]) and _same(allocatable.get(n), outcome.desired[n])
                for n in MANAGED_RESOURCES
            ):
                return
            if not need_sync(
                MANAGED_RESOURCES,
                allocatable,
                outcome.desired,
                last_write=self.last_write.get(name),
                now=now,
                update_time_threshold_seconds=strategy.update_time_threshold_seconds or 300,
                resource_diff_threshold=strategy.resource_diff_threshold or 0.1,
            ):
                return
            values = {
                n: (str(q) if q is not None else None)
                for n, q in outcome.desired.items()
                if q is not None or n in capacity or n in allocatable
            }
            try:
                await self.client.patch_node_status(
                    name, {"status": {"capacity": values, "allocatable": values}}
                )
            except errors.API_ERRORS as exc:
                logger.warning(
                    f"node {name} batch/mid resources not written (retried on its next event): {exc}"
                )
                return
            self.last_write[name] = now
            for table in (capacity, allocatable):
                for n, q in outcome.desired.items():
                    if q is None:
                        table.pop(n, None)
                    else:
                        table[n] = q
            node.status.capacity, node.status.allocatable = capacity, allocatable
            logger.info(f"node {name} batch/mid resources ({outcome.reason}): {values}")


def _is_slo_config(name: str | None, namespace: str | None, **_: Any) -> bool:
    return name == SLO_CONFIG_NAME and namespace == SLO_CONFIG_NAMESPACE


def register(registry: kopf.OperatorRegistry, client: NodeResourceAPI) -> NodeResourceController:
    controller = NodeResourceController(client)
    kopf.on.event("", "v1", "configmaps", id="noderesource_config", when=_is_slo_config, registry=registry)(
        controller.on_config
    )
    kopf.on.event("", "v1", "nodes", id="noderesource_nodes", registry=registry)(controller.on_node)
    info = NodeMetric.crd
    kopf.on.event(info.group, info.version, info.plural, id="noderesource_nodemetrics", registry=registry)(
        controller.on_node_metric
    )
    return controller
