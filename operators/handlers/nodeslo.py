"""A NodeSLO for every node, rendered from ``slo-controller-config`` (Koordinator's slo-controller
nodeslo controller and its ConfigMap event handler).

- Node events (``on.event``: nothing is written to the nodes, no finalizer) render the node's spec
  (``operators.logic.nodeslo``) and create its NodeSLO, named after it and owned by it as the
  NodeMetric is, or update it when the rendered spec differs from the stored one; the node's
  DELETED event deletes it (the owner reference lets the garbage collector do it when
  koord-manager was not running). A NodeSLO deleted or edited while its node exists is written
  again.
- ``koordinator-system/slo-controller-config`` events re-parse the five NodeSLO keys, each on its
  own (``LastGoodKey``): a key that is refused keeps its last good value while the others apply,
  with a log line and a Warning event on the ConfigMap naming the key. When a key in force changes,
  every node is rendered again. A missing key (or ConfigMap) means the defaults; until the
  ConfigMap has been read once (its event, or a read on the first node event) nothing is written.
- An API server that cannot take a write yet is retried a few times, then on the next event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import kopf

from apis.slo.nodeslo import NodeSLO, NodeSLOSpec
from apis.slo.sloconfig.names import (
    KEY_CPU_BURST,
    KEY_HOST_APPLICATION,
    KEY_RESOURCE_QOS,
    KEY_RESOURCE_THRESHOLD,
    KEY_SYSTEM,
    SLO_CONFIG_NAME,
    SLO_CONFIG_NAMESPACE,
)
from apis.slo.sloconfig.nodeslo_config import (
    CPUBurstCfg,
    HostApplicationCfg,
    ResourceQOSCfg,
    ResourceThresholdCfg,
    SystemCfg,
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_qos_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)
from operators.clients import NodeSLOClient
from operators.handlers import errors
from operators.handlers.slo_config_read import FirstConfigRead
from operators.logic.nodeslo import NodeSLOConfig, node_slo_for, normalized_spec, render, skipped_entries
from operators.logic.sloconfig_key import LastGoodKey

__all__ = ["EVENT_REASON", "NodeSLOs", "register"]

EVENT_REASON = "SLOCfgUnmarshalFailed"
"""Koordinator's reason for a refused ``slo-controller-config`` key (``ReasonSLOConfigUnmarshalFailed``)."""
NODE_EVENT_REASON = "InvalidAnnotation"

_ATTEMPTS = 5

Warn = Callable[[Mapping[str, Any], str, str], None]
"""Post a Warning event: (object, reason, message)."""


class _Vanished(Exception):
    """The NodeSLO was deleted between a create that found it and the read that followed."""


def _kopf_warn(body: Mapping[str, Any], reason: str, message: str) -> None:
    raw = body if isinstance(body, kopf.Body) else kopf.Body(cast(kopf.RawBody, dict(body)))
    kopf.warn(raw, reason=reason, message=message)


@dataclass(frozen=True)
class _Node:
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


class NodeSLOs:
    def __init__(self, client: NodeSLOClient, warn: Warn = _kopf_warn) -> None:
        self.client = client
        self.warn = warn
        self.resource_threshold = LastGoodKey[ResourceThresholdCfg](
            KEY_RESOURCE_THRESHOLD, parse_resource_threshold_cfg
        )
        self.resource_qos = LastGoodKey[ResourceQOSCfg](KEY_RESOURCE_QOS, parse_resource_qos_cfg)
        self.cpu_burst = LastGoodKey[CPUBurstCfg](KEY_CPU_BURST, parse_cpu_burst_cfg)
        self.system = LastGoodKey[SystemCfg](KEY_SYSTEM, parse_system_cfg)
        self.host_application = LastGoodKey[HostApplicationCfg](
            KEY_HOST_APPLICATION, parse_host_application_cfg
        )
        self.loaded = False
        self._first_read = FirstConfigRead(client)
        self.reported: dict[str, tuple[str, ...]] = {}
        """Key (or node) -> the problems last reported for it, so an unchanged one is not repeated."""
        self.nodes: dict[str, _Node] = {}
        self.written: dict[str, dict[str, Any]] = {}
        """Node -> the spec its NodeSLO is known to hold (as rendered)."""
        self._locks: dict[str, asyncio.Lock] = {}

    def config(self) -> NodeSLOConfig:
        """The keys in force (the defaults for a key not read yet)."""
        defaults = NodeSLOConfig()
        return NodeSLOConfig(
            resource_threshold=self.resource_threshold.value or defaults.resource_threshold,
            resource_qos=self.resource_qos.value or defaults.resource_qos,
            cpu_burst=self.cpu_burst.value or defaults.cpu_burst,
            system=self.system.value or defaults.system,
            host_application=self.host_application.value or defaults.host_application,
        )

    def _report(
        self,
        subject: str,
        problems: tuple[str, ...],
        body: Mapping[str, Any] | None,
        reason: str,
        logger: kopf.Logger,
    ) -> None:
        if self.reported.get(subject, ()) == problems:
            return
        self.reported[subject] = problems
        for problem in problems:
            logger.warning(problem)
            if body is not None:
                self.warn(body, reason, problem)

    def apply_config_map(self, config_map: Mapping[str, Any] | None, logger: kopf.Logger) -> bool:
        """Take the ConfigMap (None: it does not exist); whether any key in force changed."""
        data = dict(config_map.get("data") or {}) if config_map is not None else None
        changed = not self.loaded
        self.loaded = True
        keys = (
            self.resource_threshold,
            self.resource_qos,
            self.cpu_burst,
            self.system,
            self.host_application,
        )
        for key in keys:
            outcome = key.apply(data)
            changed |= outcome.changed
            problems: tuple[str, ...] = ()
            if outcome.error is not None:
                problems = (
                    f"slo-controller-config {outcome.error} (the last good {key.key} stays in force)",
                )
            self._report(key.key, problems, config_map, EVENT_REASON, logger)
            if outcome.changed:
                skipped = tuple(skipped_entries(self.config(), key.key))
                self._report(f"{key.key} selectors", skipped, config_map, EVENT_REASON, logger)
        return changed

    async def _ensure_loaded(self, logger: kopf.Logger) -> None:
        with errors.api_errors(f"read the ConfigMap {SLO_CONFIG_NAMESPACE}/{SLO_CONFIG_NAME}"):
            await self._first_read.ensure(
                lambda: self.loaded, lambda found: self.apply_config_map(found, logger)
            )

    async def _write(self, name: str, node: _Node, spec: NodeSLOSpec, logger: kopf.Logger) -> None:
        existing = await self.client.get(name)
        if existing is None:
            if await self.client.create(node_slo_for(name, node.uid, spec)):
                logger.info(f"created NodeSLO {name}")
                return
            existing = await self.client.get(name)
            if existing is None:
                raise _Vanished(f"NodeSLO {name} was deleted while being created")
        wire = spec.to_wire()
        if normalized_spec(existing.get("spec")) != wire:
            await self.client.replace({**existing, "spec": wire})
            logger.info(f"updated NodeSLO {name} to the rendered spec")

    async def sync(self, name: str, logger: kopf.Logger) -> None:
        """Make the node's NodeSLO hold its rendered spec (nothing is written when it already does)."""
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            node = self.nodes.get(name)
            if node is None:
                return
            spec = render(self.config(), node.labels, node.annotations).spec
            wire = spec.to_wire()
            if self.written.get(name) == wire:
                return
            for attempt in range(_ATTEMPTS):
                try:
                    await self._write(name, node, spec, logger)
                except (*errors.API_ERRORS, _Vanished) as exc:
                    if attempt == _ATTEMPTS - 1:
                        logger.warning(f"NodeSLO {name} not written (retried on the next event): {exc}")
                        return
                    await asyncio.sleep(errors.RETRY_DELAY_SECONDS)
                    continue
                self.written[name] = wire
                return

    async def on_config_map(self, type: str | None, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        if self.apply_config_map(None if type == "DELETED" else body, logger):
            await asyncio.gather(*(self.sync(name, logger) for name in list(self.nodes)))

    async def on_node(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if type == "DELETED":
            self.nodes.pop(name, None)
            self.written.pop(name, None)
            self._locks.pop(name, None)
            self.reported.pop(f"node {name}", None)
            try:
                if await self.client.delete(name):
                    logger.info(f"deleted NodeSLO {name} with its node")
            except errors.API_ERRORS as exc:
                logger.warning(f"NodeSLO {name} not deleted (its owner reference still lets it go): {exc}")
            return
        metadata = body.get("metadata") or {}
        node = _Node(
            uid=str(metadata.get("uid") or ""),
            labels=dict(metadata.get("labels") or {}),
            annotations=dict(metadata.get("annotations") or {}),
        )
        # Known before the ConfigMap is read: if that read fails, the ConfigMap's event renders it.
        self.nodes[name] = node
        await self._ensure_loaded(logger)
        problems = render(self.config(), node.labels, node.annotations).problems
        self._report(f"node {name}", problems, body, NODE_EVENT_REASON, logger)
        await self.sync(name, logger)

    async def on_node_slo(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if name not in self.nodes:
            return
        if type == "DELETED" or normalized_spec(body.get("spec")) != self.written.get(name):
            self.written.pop(name, None)
            await self.sync(name, logger)


def _is_slo_config(name: str | None, namespace: str | None, **_: Any) -> bool:
    return name == SLO_CONFIG_NAME and namespace == SLO_CONFIG_NAMESPACE


def register(registry: kopf.OperatorRegistry, client: NodeSLOClient) -> NodeSLOs:
    handlers = NodeSLOs(client)
    kopf.on.event("", "v1", "configmaps", id="nodeslo_config", when=_is_slo_config, registry=registry)(
        handlers.on_config_map
    )
    kopf.on.event("", "v1", "nodes", id="nodeslo_per_node", registry=registry)(handlers.on_node)
    info = NodeSLO.crd
    kopf.on.event(info.group, info.version, info.plural, id="nodeslo_rewrite", registry=registry)(
        handlers.on_node_slo
    )
    return handlers
