"""A NodeMetric for every node, removed with the node (Koordinator's slo-controller nodemetric controller).

Node watch events (``on.event``: nothing is written to the nodes, no finalizer) create the node's
NodeMetric the first time koord-manager sees the node, and delete it on the node's DELETED event;
the NodeMetric's owner reference to its node lets the garbage collector remove it as well when
koord-manager was not running. A NodeMetric deleted while its node exists is created again, as the
slo-controller does.

Its ``spec.metricCollectPolicy`` follows the node's colocation strategy of ``slo-controller-config``
(``operators.logic.nodemetric``): the ConfigMap's ``colocation-config`` key is watched, and when the
policy it gives a node differs from the one its NodeMetric holds (a changed key, a node relabelled
into another ``nodeConfigs`` entry, a spec edited by hand) the spec is merge-patched back. The
ConfigMap is read once before the first node is handled, so that a NodeMetric is created with its
policy and one a previous koord-manager wrote from a since-deleted ConfigMap goes back to the
defaults. A key that is refused keeps the last good one in force; refused before any good value (or
the ConfigMap unreadable), a new NodeMetric gets the defaults and an existing one is left as it is
(koord-manager's node resource controller posts the Warning event on the ConfigMap). An API server
that cannot take a write yet is retried a few times, then on the node's next event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from pydantic import ValidationError

from apis.slo.nodemetric import NodeMetric, NodeMetricCollectPolicy
from apis.slo.sloconfig import KEY_COLOCATION, SLO_CONFIG_NAME, SLO_CONFIG_NAMESPACE
from apis.slo.sloconfig.colocation import ParsedColocation, parse_colocation_config
from operators.clients import NodeMetricClient
from operators.handlers import errors
from operators.handlers.slo_config_read import FirstConfigRead
from operators.logic.nodemetric import collect_policy_for, node_metric_for
from operators.logic.sloconfig_key import LastGoodKey

__all__ = ["NodeMetrics", "register"]

_ATTEMPTS = 5


@dataclass(frozen=True)
class _Node:
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


def _meta(body: kopf.Body | None, key: str) -> dict[str, str]:
    if body is None:
        return {}
    return dict(body.get("metadata", {}).get(key) or {})


class NodeMetrics:
    def __init__(self, client: NodeMetricClient) -> None:
        self.client = client
        self.nodes: dict[str, _Node] = {}
        """Every node seen and not deleted."""
        self.ensured: set[str] = set()
        """Nodes whose NodeMetric was created (or found) since koord-manager started."""
        self.specs: dict[str, NodeMetricCollectPolicy | None] = {}
        """Node name -> the collect policy its NodeMetric holds, as last seen or written."""
        self.config: LastGoodKey[ParsedColocation] = LastGoodKey(
            KEY_COLOCATION, parse_colocation_config, defaults_on_first_error=False
        )
        self.config_read = False
        """The ConfigMap was read or its watch event came (a refused key is not read again)."""
        self._first_read = FirstConfigRead(client)

    def _policy(self, name: str) -> NodeMetricCollectPolicy:
        node = self.nodes[name]
        return collect_policy_for(self.config.value, node.labels, node.annotations)

    async def _create(self, name: str, logger: kopf.Logger) -> None:
        policy = self._policy(name)
        for attempt in range(_ATTEMPTS):
            try:
                created = await self.client.create(node_metric_for(name, self.nodes[name].uid, policy))
            except errors.API_ERRORS as exc:
                if attempt == _ATTEMPTS - 1:
                    logger.warning(f"NodeMetric {name} not created (retried on the node's next event): {exc}")
                    return
                await asyncio.sleep(errors.RETRY_DELAY_SECONDS)
                continue
            self.ensured.add(name)
            if created:
                self.specs[name] = policy
                logger.info(f"created NodeMetric {name}")
            return

    async def _sync(self, name: str, logger: kopf.Logger) -> None:
        """Patch the NodeMetric's collect policy when it is not the one the config gives the node."""
        if not self.config.loaded or name not in self.ensured or name not in self.nodes:
            return
        policy = self._policy(name)
        if name in self.specs and self.specs[name] == policy:
            return
        patch = {
            "spec": {"metricCollectPolicy": policy.model_dump(by_alias=True, exclude_none=True, mode="json")}
        }
        try:
            await self.client.patch(name, patch)
        except errors.API_ERRORS as exc:
            logger.warning(f"NodeMetric {name} collect policy not updated (retried on the next event): {exc}")
            self.specs.pop(name, None)
            return
        self.specs[name] = policy
        logger.info(f"NodeMetric {name}: collect policy from {KEY_COLOCATION}")

    async def _ensure_config(self, logger: kopf.Logger) -> None:
        try:
            await self._first_read.ensure(
                lambda: self.config_read,
                lambda found: self._apply_config(None if found is None else found.get("data"), logger),
            )
        except errors.API_ERRORS as exc:
            where = f"{SLO_CONFIG_NAMESPACE}/{SLO_CONFIG_NAME}"
            logger.warning(f"{where} not read (its watch event will bring it): {exc}")

    def _apply_config(self, data: Mapping[str, str] | None, logger: kopf.Logger) -> bool:
        self.config_read = True
        outcome = self.config.apply(data)
        if outcome.error is not None:
            logger.warning(
                f"{SLO_CONFIG_NAMESPACE}/{SLO_CONFIG_NAME} key {outcome.error} "
                "(NodeMetrics keep the collect policy of the last good colocation-config)"
            )
        return outcome.changed

    async def on_node(
        self,
        type: str | None,
        name: str,
        uid: str,
        logger: kopf.Logger,
        body: kopf.Body | None = None,
        **_: Any,
    ) -> None:
        if type == "DELETED":
            self.nodes.pop(name, None)
            self.ensured.discard(name)
            self.specs.pop(name, None)
            try:
                if await self.client.delete(name):
                    logger.info(f"deleted NodeMetric {name} with its node")
            except errors.API_ERRORS as exc:
                logger.warning(f"NodeMetric {name} not deleted (its owner reference still lets it go): {exc}")
            return
        seen = _Node(uid, _meta(body, "labels"), _meta(body, "annotations"))
        unchanged = self.nodes.get(name) == seen
        self.nodes[name] = seen
        await self._ensure_config(logger)
        if name not in self.ensured:
            await self._create(name, logger)
        elif unchanged and name in self.specs:
            return  # a heartbeat: its policy is written (config changes come through on_config)
        await self._sync(name, logger)

    async def on_node_metric(
        self, type: str | None, name: str, logger: kopf.Logger, body: kopf.Body | None = None, **_: Any
    ) -> None:
        if name not in self.nodes:
            return
        if type == "DELETED":
            self.ensured.discard(name)
            self.specs.pop(name, None)
            await self._create(name, logger)
            return
        if body is not None:
            # Only the spec: koordlet rewrites the status every report, and it is not read here.
            raw = (body.get("spec") or {}).get("metricCollectPolicy")
            try:
                self.specs[name] = None if raw is None else NodeMetricCollectPolicy.model_validate(raw)
            except ValidationError as exc:
                logger.warning(
                    f"NodeMetric {name} does not parse, its collect policy is written again: {exc}"
                )
                self.specs.pop(name, None)
        await self._sync(name, logger)

    async def on_config(self, type: str | None, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        if self._apply_config(None if type == "DELETED" else body.get("data"), logger):
            for name in sorted(self.nodes):
                await self._sync(name, logger)


def _is_slo_config(name: str | None, namespace: str | None, **_: Any) -> bool:
    return name == SLO_CONFIG_NAME and namespace == SLO_CONFIG_NAMESPACE


def register(registry: kopf.OperatorRegistry, client: NodeMetricClient) -> NodeMetrics:
    handlers = NodeMetrics(client)
    kopf.on.event("", "v1", "nodes", id="nodemetric_per_node", registry=registry)(handlers.on_node)
    info = NodeMetric.crd
    kopf.on.event(info.group, info.version, info.plural, id="nodemetric_recreate", registry=registry)(
        handlers.on_node_metric
    )
    kopf.on.event("", "v1", "configmaps", id="nodemetric_config", when=_is_slo_config, registry=registry)(
        handlers.on_config
    )
    return handlers
