"""CPU normalization and resource amplification ratios on every node (Koordinator's slo-controller
noderesource plugins ``cpunormalization`` and ``resourceamplification``).

Watch events of Nodes, NodeResourceTopologies (koordlet's ``cpu-basic-info``) and the
``slo-controller-config`` ConfigMap re-decide the affected nodes (all of them for the ConfigMap):
``node.koordinator.sh/cpu-normalization-ratio`` (``operators.logic.cpu_normalization``), then
``node.koordinator.sh/resource-amplification-ratio`` from the ratio just decided
(``operators.logic.resource_amplification``), patched into the node's metadata only when they
change. The Node mutating webhook (``operators.handlers.node_amplification``) applies the latter to
the node's allocatable.

A key of the ConfigMap that does not parse keeps the last good value in force (before any good
value: the nodes are left as they are) and gets a Warning event on the ConfigMap naming the key; a
node whose ratio cannot be decided keeps its annotation and gets a Warning event naming why (the
NodeResourceTopology, the CPU model, the ratio field). Each distinct problem is posted once.
Nothing here depends on ``colocation-config``'s ``enable`` (Koordinator's plugins run only when
co-location is on, algorithms.md 10.8).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from apis.errors import InvalidValue, summary
from apis.extension.amplification import get_cpu_normalization_ratio
from apis.extension.numa import ANNOTATION_CPU_BASIC_INFO, CPUBasicInfo, get_cpu_basic_info
from apis.extension.qosannotations import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO,
    LABEL_CPU_NORMALIZATION_ENABLED,
)
from apis.slo.sloconfig import (
    KEY_CPU_NORMALIZATION,
    KEY_RESOURCE_AMPLIFICATION,
    SLO_CONFIG_NAME,
    SLO_CONFIG_NAMESPACE,
)
from apis.slo.sloconfig.cpu_normalization import (
    CPUNormalizationCfg,
    CPUNormalizationStrategy,
    ResourceAmplificationCfg,
    parse_cpu_normalization_cfg,
    parse_resource_amplification_cfg,
)
from apis.topology import NodeResourceTopology
from operators.clients import CPUNormalizationClient
from operators.handlers import errors
from operators.handlers.slo_config_read import FirstConfigRead
from operators.logic.cpu_normalization import decide_ratio, enabled, needs_update
from operators.logic.resource_amplification import amplification_annotation, amplification_ratios
from operators.logic.sloconfig_key import LastGoodKey

__all__ = ["CPUNormalization", "register"]

log = logging.getLogger(__name__)

_CFG_REASONS = {
    KEY_CPU_NORMALIZATION: "CPUNormalizationCfgUnmarshalFailed",
    KEY_RESOURCE_AMPLIFICATION: "ResourceAmplificationCfgUnmarshalFailed",
}
_NODE_REASON = "CPUNormalizationFailed"


def _ref(body: Mapping[str, Any]) -> kopf.Body:
    """What an event needs to name the object."""
    meta = body.get("metadata") or {}
    raw: Any = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta},
    }
    return kopf.Body(raw)


class CPUNormalization:
    def __init__(self, client: CPUNormalizationClient) -> None:
        self.client = client
        self.normalization: LastGoodKey[CPUNormalizationCfg] = LastGoodKey(
            KEY_CPU_NORMALIZATION, parse_cpu_normalization_cfg, defaults_on_first_error=False
        )
        self.amplification: LastGoodKey[ResourceAmplificationCfg] = LastGoodKey(
            KEY_RESOURCE_AMPLIFICATION, parse_resource_amplification_cfg, defaults_on_first_error=False
        )
        self.config_read = False
        """The ConfigMap (or its absence) has been seen once."""
        self._first_read = FirstConfigRead(client)
        self.nodes: dict[str, dict[str, Any]] = {}
        """Node name -> labels, annotations and the reference events need."""
        self.topologies: dict[str, dict[str, str] | None] = {}
        """Node name -> its NodeResourceTopology's annotations (None: it has none)."""
        self.reported: dict[str, str] = {}
        """Node name -> the problem last posted on it."""
        self.config_reported: dict[str, str] = {}
        """ConfigMap key -> the problem last posted on the ConfigMap."""
        self._lock = asyncio.Lock()

    # --- the ConfigMap ----------------------------------------------------------------------------

    def _apply_config(self, data: Mapping[str, str] | None, cm: Mapping[str, Any] | None) -> bool:
        """Take the ConfigMap's data (None: there is none); ``cm`` is the object to post events on."""
        changed = False
        for key in (self.normalization, self.amplification):
            outcome = key.apply(data)
            changed |= outcome.changed
            if outcome.error is None:
                self.config_reported.pop(key.key, None)
            elif self.config_reported.get(key.key) != outcome.error:
                message = f"{outcome.error}; the last good {key.key} stays in force"
                log.warning("%s/%s: %s", SLO_CONFIG_NAMESPACE, SLO_CONFIG_NAME, message)
                if cm is not None:  # read outside a watch event: its first event posts it
                    self.config_reported[key.key] = outcome.error
                    kopf.warn(_ref(cm), reason=_CFG_REASONS[key.key], message=message)
        self.config_read = True
        return changed

    async def _ensure_config(self, logger: kopf.Logger) -> bool:
        try:
            await self._first_read.ensure(
                lambda: self.config_read,
                lambda cm: self._apply_config(None if cm is None else dict(cm.get("data") or {}), None),
            )
        except errors.API_ERRORS as exc:
            where = f"{SLO_CONFIG_NAMESPACE}/{SLO_CONFIG_NAME}"
            logger.warning(f"{where} not read (retried on the next event): {exc}")
            return False
        return True

    async def on_configmap(self, type: str | None, body: kopf.Body, logger: kopf.Logger, **_: Any) -> None:
        data = None if type == "DELETED" else dict(body.get("data") or {})
        if self._apply_config(data, body) or type is None:
            for name in list(self.nodes):
                await self._reconcile(name, logger)

    # --- nodes and their topologies ---------------------------------------------------------------

    async def on_node(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        if type == "DELETED":
            self.nodes.pop(name, None)
            self.topologies.pop(name, None)
            self.reported.pop(name, None)
            return
        meta = body.get("metadata") or {}
        self.nodes[name] = {
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ref": _ref(body),
        }
        await self._reconcile(name, logger)

    async def on_topology(
        self, type: str | None, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any
    ) -> None:
        annotations = (
            None if type == "DELETED" else dict((body.get("metadata") or {}).get("annotations") or {})
        )
        seen = name in self.topologies
        before = self.topologies.get(name)
        self.topologies[name] = annotations
        # koordlet rewrites its other annotations often: only the basic info (or the object) matters.
        if not seen or (before is None) != (annotations is None) or _info(before) != _info(annotations):
            await self._reconcile(name, logger)

    async def _basic_info(self, name: str) -> tuple[CPUBasicInfo | None, str | None]:
        if name not in self.topologies:
            self.topologies[name] = await self.client.get_nrt_annotations(name)
        annotations = self.topologies[name]
        if annotations is None:
            return None, f"node {name} has no NodeResourceTopology (koordlet reports the CPU info on it)"
        try:
            info = get_cpu_basic_info(annotations)
        except InvalidValue as exc:
            return None, f"NodeResourceTopology {name}: {exc}"
        if info is None:
            return None, f"NodeResourceTopology {name} has no {ANNOTATION_CPU_BASIC_INFO} annotation yet"
        return info, None

    # --- the decision -----------------------------------------------------------------------------

    async def _reconcile(self, name: str, logger: kopf.Logger) -> None:
        async with self._lock:
            node = self.nodes.get(name)
            if node is None or not await self._ensure_config(logger):
                return
            try:
                patch, problems = await self._decide(name, node["labels"], node["annotations"])
            except errors.API_ERRORS as exc:
                logger.warning(f"node {name}: its NodeResourceTopology not read (retried later): {exc}")
                return
            self._report(name, node["ref"], problems)
            if not patch:
                return
            try:
                await self.client.patch_node_annotations(name, patch)
            except errors.API_ERRORS as exc:
                logger.warning(f"node {name}: ratios {patch} not written (retried on its next event): {exc}")
                return
            for key, value in patch.items():
                if value is None:
                    node["annotations"].pop(key, None)
                else:
                    node["annotations"][key] = value
            logger.info(f"node {name}: {patch}")

    async def _decide(
        self, name: str, labels: dict[str, str], annotations: dict[str, str]
    ) -> tuple[dict[str, str | None], list[str]]:
        patch: dict[str, str | None] = {}
        problems: list[str] = []
        in_force = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
        normalization = self.normalization.value
        if normalization is not None:
            strategy = normalization.strategy_for(labels)
            label = labels.get(LABEL_CPU_NORMALIZATION_ENABLED)
            info, info_problem = None, None
            if _needs_info(strategy, label):
                info, info_problem = await self._basic_info(name)
            decision = decide_ratio(strategy, label, info, info_problem)
            if decision.problem is not None:
                problems.append(decision.problem)
            elif needs_update(in_force, decision.value):
                patch[ANNOTATION_CPU_NORMALIZATION_RATIO] = in_force = decision.value
        amplification = self.amplification.value
        if amplification is not None:
            try:
                current = {} if in_force is None else {ANNOTATION_CPU_NORMALIZATION_RATIO: in_force}
                ratio = get_cpu_normalization_ratio(current)
            except InvalidValue as exc:
                problems.append(f"resource amplification left as it is: {exc}")
            else:
                strategy_for_node = amplification.strategy_for(labels)
                wanted = amplification_annotation(amplification_ratios(strategy_for_node, ratio))
                if wanted != annotations.get(ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO):
                    patch[ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO] = wanted
        return patch, problems

    def _report(self, name: str, ref: kopf.Body, problems: list[str]) -> None:
        message = summary(problems)
        if not message:
            self.reported.pop(name, None)
        elif self.reported.get(name) != message:
            self.reported[name] = message
            message += "; the node's ratio annotations are left as they are"
            kopf.warn(ref, reason=_NODE_REASON, message=message)


def _needs_info(strategy: CPUNormalizationStrategy, label: str | None) -> bool:
    try:
        return enabled(strategy, label)
    except InvalidValue:
        return False  # decide_ratio reports the label


def _info(annotations: Mapping[str, str] | None) -> str | None:
    return (annotations or {}).get(ANNOTATION_CPU_BASIC_INFO)


def _is_slo_config(name: str, namespace: str | None, **_: Any) -> bool:
    return name == SLO_CONFIG_NAME and namespace == SLO_CONFIG_NAMESPACE


def register(registry: kopf.OperatorRegistry, client: CPUNormalizationClient) -> CPUNormalization:
    handlers = CPUNormalization(client)
    kopf.on.event("", "v1", "nodes", id="cpu_normalization_nodes", registry=registry)(handlers.on_node)
    info = NodeResourceTopology.crd
    kopf.on.event(
        info.group, info.version, info.plural, id="cpu_normalization_topologies", registry=registry
    )(handlers.on_topology)
    kopf.on.event(
        "", "v1", "configmaps", id="cpu_normalization_config", when=_is_slo_config, registry=registry
    )(handlers.on_configmap)
    return handlers
