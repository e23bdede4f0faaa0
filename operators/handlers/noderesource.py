"""Batch and mid node resources (Koordinator's slo-controller noderesource controller).

These watches feed one reconcile per node (``operators.logic.noderesource``):

- the ``koordinator-system/slo-controller-config`` ConfigMap: its ``colocation-config`` key is
  parsed (``apis.slo.sloconfig.colocation``) and every node reconciled when it changes; a key that
  is refused leaves the last good config in force and is reported as a Warning event on the
  ConfigMap and a log line naming the key. Until a first good config is read nothing is written,
  so a broken ConfigMap at start leaves the nodes as a previous koord-manager left them;
- Node events (labels, annotations, capacity or allocatable changed);
- NodeMetric events (koordlet's report, every ``reportIntervalSeconds``);
- NodeResourceTopology events that change a zone's cpu or memory (not those that only change the
  batch resources this controller writes there);
- Pod events: Kopf indexes the pods by node name (``noderesource_pods``: what the formulas read of
  each Running or Pending pod, ``inputs.pod_entry``), as Koordinator reads them from its informer
  cache; a pod event that changes what its node's index holds (a pod added or gone, its phase out of
  Running/Pending, its requests, priority, QoS or NUMA binding changed) reconciles the node once
  ``debounce_seconds`` later, however many events came meanwhile.

A reconcile reads the node's pods from that index (no API call), computes the four resources and,
when the damping allows (``damping.need_sync``), merge-patches them into the node's
``status.capacity`` and ``status.allocatable``; a removed resource is deleted (null in the patch).
An API error is logged and retried on the node's next event. A node annotation that does not parse
(reservation, colocation-strategy) is skipped and reported once as a Warning event on the node.

When the node has a NodeResourceTopology whose NUMA zones carry cpu or memory, the batch resources
are also computed per zone (``numa``) and written into the zones (``zone_sync``) with a PUT carrying
the resourceVersion last seen: koordlet writes the same object, so on a conflict the NRT is read
again, the zones recomputed against it and the write retried. A pod whose resource-status does not
parse counts on every zone and is reported once as a Warning event on the pod.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import kopf
from pydantic import ValidationError

from apis.core import Node, Pod
from apis.errors import summary
from apis.quantity import Quantity
from apis.slo.nodemetric import NodeMetric
from apis.slo.sloconfig import KEY_COLOCATION, SLO_CONFIG_NAME, SLO_CONFIG_NAMESPACE
from apis.slo.sloconfig.colocation import (
    ColocationStrategy,
    ParsedColocation,
    node_colocation_strategy,
    parse_colocation_config,
)
from apis.topology import NodeResourceTopology, Zone
from operators.handlers import errors
from operators.logic.noderesource.damping import need_sync
from operators.logic.noderesource.inputs import NodeInputs, PodEntry, inputs_from_entries, pod_entry
from operators.logic.noderesource.node_resources import MANAGED_RESOURCES, Outcome, compute
from operators.logic.noderesource.numa import ZONE_RESOURCES, zone_outcome
from operators.logic.noderesource.zone_sync import merged_zones, zones_need_sync
from operators.logic.sloconfig_key import LastGoodKey

__all__ = ["INVALID_CONFIG_REASON", "NodeResourceController", "PodsByNode", "pods_by_node", "register"]

INVALID_CONFIG_REASON = "InvalidColocationConfig"
INVALID_NODE_REASON = "InvalidColocationAnnotation"
INVALID_POD_REASON = "InvalidResourceStatus"
_CONFLICT_RETRIES = 3
POD_DEBOUNCE_SECONDS = 1.0

PodsByNode = Mapping[str, Collection[PodEntry]]
"""The ``noderesource_pods`` index (Kopf passes it to every handler by that name)."""

Topology = tuple[dict[str, Any], NodeResourceTopology]
"""The NRT as read (written back whole, zones replaced, so that no field is lost) and as parsed."""


class NodeResourceAPI(Protocol):
    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None: ...

    async def get_topology(self, name: str) -> dict[str, Any] | None:
        """The node's NodeResourceTopology as the API server sends it; None when there is none."""
        ...

    async def replace_topology(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """PUT the NRT ``body`` (with the resourceVersion it was read at): the object written, or None
        when it changed since (409 Conflict)."""
        ...


def _parsed_topology(raw: dict[str, Any] | None, logger: kopf.Logger) -> Topology | None:
    if raw is None:
        return None
    try:
        return raw, NodeResourceTopology.model_validate(raw)
    except ValidationError as exc:
        name = (raw.get("metadata") or {}).get("name")
        logger.warning(f"NodeResourceTopology {name} does not parse, its zones get no batch resources: {exc}")
        return None


def _zone_inputs(nrt: NodeResourceTopology) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """What an NRT event may change that the zones' batch resources depend on: the zones and their
    resources, less the batch resources written here."""

    def resources(zone: Zone) -> list[tuple[str, str]]:
        return [(r.name, str(r.allocatable)) for r in zone.resources or () if r.name not in ZONE_RESOURCES]

    return [(zone.name, zone.type, resources(zone)) for zone in nrt.zones]


def pods_by_node(body: kopf.Body, logger: kopf.Logger, **_: Any) -> dict[str, PodEntry]:
    """Index: node name -> what the formulas read of each of its Running or Pending pods."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") not in ("Running", "Pending"):
        return {}  # the cheap check first: finished and unbound pods are not parsed
    try:
        entry = pod_entry(Pod.model_validate(dict(body)))
    except ValidationError as exc:
        logger.warning(f"pod does not parse, not counted in its node's batch/mid resources: {exc}")
        return {}
    return {spec["nodeName"]: entry} if entry is not None else {}


def _pod_ref(entry: PodEntry) -> kopf.Body:
    """What an event needs to name the pod."""
    namespace, _, name = entry.key.partition("/")
    meta = {"name": name, "namespace": namespace, "uid": entry.uid}
    raw: Any = {"apiVersion": "v1", "kind": "Pod", "metadata": {k: v for k, v in meta.items() if v}}
    return kopf.Body(raw)


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
    def __init__(
        self,
        client: NodeResourceAPI,
        clock: Callable[[], float] = time.time,
        debounce_seconds: float = POD_DEBOUNCE_SECONDS,
    ) -> None:
        self.client = client
        self.clock = clock
        self.debounce_seconds = debounce_seconds
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
        self.topologies: dict[str, Topology] = {}
        self.topology_last_write: dict[str, float] = {}
        """Node name -> when this process last wrote its NRT's zones (their own damping timer)."""
        self.pod_reported: dict[str, dict[str, str]] = {}
        """Node name -> pod key -> the resource-status problem already reported on the pod."""
        self._locks: dict[str, asyncio.Lock] = {}
        self.pods_seen: dict[str, frozenset[PodEntry]] = {}
        """Node name -> the pods its last reconcile counted (a pod event that leaves them as they
        were needs no reconcile)."""
        self.pending: dict[str, asyncio.Task[None]] = {}
        """Node name -> its debounced reconcile after pod events."""

    # --- watches -----------------------------------------------------------------------------------

    async def on_config(
        self, type: str | None, body: kopf.Body, logger: kopf.Logger, noderesource_pods: PodsByNode, **_: Any
    ) -> None:
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
                await self.reconcile(name, logger, noderesource_pods)

    async def on_node(
        self,
        type: str | None,
        name: str,
        body: kopf.Body,
        logger: kopf.Logger,
        noderesource_pods: PodsByNode,
        **_: Any,
    ) -> None:
        if type == "DELETED":
            for table in (self.nodes, self.bodies, self.last_write, self.reported, self._locks):
                table.pop(name, None)
            self.pod_reported.pop(name, None)
            self.pods_seen.pop(name, None)
            task = self.pending.pop(name, None)
            if task is not None:
                task.cancel()
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
            await self.reconcile(name, logger, noderesource_pods)

    async def on_node_metric(
        self,
        type: str | None,
        name: str,
        body: kopf.Body,
        logger: kopf.Logger,
        noderesource_pods: PodsByNode,
        **_: Any,
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
        await self.reconcile(name, logger, noderesource_pods)

    async def on_topology(
        self,
        type: str | None,
        name: str,
        body: kopf.Body,
        logger: kopf.Logger,
        noderesource_pods: PodsByNode,
        **_: Any,
    ) -> None:
        old = self.topologies.pop(name, None)
        if type == "DELETED":
            self.topology_last_write.pop(name, None)
            return
        parsed = _parsed_topology(dict(body), logger)
        if parsed is None:
            return
        self.topologies[name] = parsed
        if old is None or _zone_inputs(old[1]) != _zone_inputs(parsed[1]):
            await self.reconcile(name, logger, noderesource_pods)

    async def on_pod(
        self, body: kopf.Body, logger: kopf.Logger, noderesource_pods: PodsByNode, **_: Any
    ) -> None:
        """After Kopf updated the index with the event: reconcile the pod's node (debounced) when what
        the index holds for it differs from what its last reconcile counted."""
        name = (body.get("spec") or {}).get("nodeName")
        if not name or name not in self.nodes or self.config.value is None or name in self.pending:
            return
        if frozenset(noderesource_pods.get(name, ())) == self.pods_seen.get(name):
            return
        self.pending[name] = asyncio.create_task(self._debounced(name, logger, noderesource_pods))

    async def _debounced(self, name: str, logger: kopf.Logger, pods: PodsByNode) -> None:
        await asyncio.sleep(self.debounce_seconds)
        self.pending.pop(name, None)  # events from now on schedule the next one
        if frozenset(pods.get(name, ())) == self.pods_seen.get(name):
            return  # another event's reconcile counted them meanwhile
        try:
            await self.reconcile(name, logger, pods)
        except Exception:  # a task's error would otherwise be lost; the node's next event retries
            logger.exception(f"node {name}: batch/mid resources not recomputed after its pods changed")

    # --- reconcile ---------------------------------------------------------------------------------

    def _report(self, name: str, problems: list[str], logger: kopf.Logger) -> None:
        text = summary(problems)
        if not text or self.reported.get(name) == text:
            if not text:
                self.reported.pop(name, None)
            return
        self.reported[name] = text
        logger.warning(f"node {name}: {text} (skipped)")
        kopf.warn(self.bodies[name], reason=INVALID_NODE_REASON, message=text)

    async def reconcile(self, name: str, logger: kopf.Logger, pods_by_node: PodsByNode) -> None:
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
            seen = frozenset(pods_by_node.get(name, ()))
            self.pods_seen[name] = seen
            pods = seen if enabled else frozenset()
            inputs = inputs_from_entries(node, sorted(pods, key=lambda p: p.key), self.metrics.get(name))
            self._report(name, [p for p in (chosen.problem, *inputs.problems) if p], logger)
            now = self.clock()
            outcome = compute(
                inputs, strategy, datetime.fromtimestamp(now, UTC), annotations, cluster_enabled=enabled
            )
            await self._write_node(node, outcome, strategy, now, logger)
            await self._sync_topology(name, outcome, inputs, strategy, annotations, now, logger)
            self._report_pods(name, inputs, logger)

    async def _write_node(
        self, node: Node, outcome: Outcome, strategy: ColocationStrategy, now: float, logger: kopf.Logger
    ) -> None:
        name = node.metadata.name or ""
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
            await self.client.patch_node_status(name, {"status": {"capacity": values, "allocatable": values}})
        except errors.API_ERRORS as exc:
            logger.warning(f"node {name} batch/mid resources not written (retried on its next event): {exc}")
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

    async def _sync_topology(
        self,
        name: str,
        outcome: Outcome,
        inputs: NodeInputs,
        strategy: ColocationStrategy,
        annotations: dict[str, str] | None,
        now: float,
        logger: kopf.Logger,
    ) -> None:
        """Write the zones' batch resources into the node's NRT; on a conflict (koordlet wrote it since
        it was read) read it again, recompute against its zones and retry."""
        cached = self.topologies.get(name)
        for _ in range(_CONFLICT_RETRIES):
            if cached is None:
                return
            raw, nrt = cached
            desired = zone_outcome(outcome, inputs, nrt, strategy, annotations)
            if desired is None or not zones_need_sync(
                nrt,
                desired,
                last_write=self.topology_last_write.get(name),
                now=now,
                update_time_threshold_seconds=strategy.update_time_threshold_seconds or 300,
                resource_diff_threshold=strategy.resource_diff_threshold or 0.1,
            ):
                return
            body = {**raw, "zones": [z.to_wire() for z in merged_zones(nrt, desired)]}
            try:
                written = await self.client.replace_topology(body)
                if written is None:
                    cached = _parsed_topology(await self.client.get_topology(name), logger)
                    if cached is None:
                        self.topologies.pop(name, None)
                    else:
                        self.topologies[name] = cached
                    continue
            except errors.API_ERRORS as exc:
                logger.warning(
                    f"NodeResourceTopology {name} batch resources not written "
                    f"(retried on its next event): {exc}"
                )
                return
            self.topology_last_write[name] = now
            parsed = _parsed_topology(written, logger)
            if parsed is not None:
                self.topologies[name] = parsed
            values = {zone: {n: str(q) for n, q in v.items()} for zone, v in desired.items()}
            logger.info(f"NodeResourceTopology {name} zone batch resources ({outcome.reason}): {values}")
            return
        logger.warning(
            f"NodeResourceTopology {name} batch resources not written: it kept changing while being "
            "written (retried on its next event)"
        )

    def _report_pods(self, name: str, inputs: NodeInputs, logger: kopf.Logger) -> None:
        """A pod whose resource-status does not parse counts on every zone; said once on the pod (per
        problem), when its zones matter: the node has an NRT."""
        if name not in self.topologies:
            self.pod_reported.pop(name, None)
            return
        before = self.pod_reported.get(name, {})
        problems = {entry.key: entry.numa_problem for entry in inputs.pods if entry.numa_problem}
        self.pod_reported[name] = problems
        by_key = {entry.key: entry for entry in inputs.pods}
        for key, problem in problems.items():
            if before.get(key) != problem:
                logger.warning(f"pod {key}: {problem} (counted on every NUMA zone of node {name})")
                kopf.warn(_pod_ref(by_key[key]), reason=INVALID_POD_REASON, message=problem)


def _is_slo_config(name: str | None, namespace: str | None, **_: Any) -> bool:
    return name == SLO_CONFIG_NAME and namespace == SLO_CONFIG_NAMESPACE


def register(registry: kopf.OperatorRegistry, client: NodeResourceAPI) -> NodeResourceController:
    controller = NodeResourceController(client)
    # Kopf's handler protocols do not list index kwargs (noderesource_pods).
    on_config: Any = controller.on_config
    on_node: Any = controller.on_node
    on_node_metric: Any = controller.on_node_metric
    on_topology: Any = controller.on_topology
    on_pod: Any = controller.on_pod
    kopf.index("", "v1", "pods", id="noderesource_pods", registry=registry)(pods_by_node)
    kopf.on.event("", "v1", "pods", id="noderesource_pod_events", registry=registry)(on_pod)
    kopf.on.event("", "v1", "configmaps", id="noderesource_config", when=_is_slo_config, registry=registry)(
        on_config
    )
    kopf.on.event("", "v1", "nodes", id="noderesource_nodes", registry=registry)(on_node)
    info = NodeMetric.crd
    kopf.on.event(info.group, info.version, info.plural, id="noderesource_nodemetrics", registry=registry)(
        on_node_metric
    )
    nrt = NodeResourceTopology.crd
    kopf.on.event(nrt.group, nrt.version, nrt.plural, id="noderesource_topologies", registry=registry)(
        on_topology
    )
    return controller
