"""The NodeSLO keys of ``slo-controller-config`` (algorithms.md 10.5; Koordinator's
``apis/configuration/slo_controller_config.go`` and ``pkg/slo-controller/nodeslo/resource_strategy.go``).

``resource-threshold-config``, ``resource-qos-config``, ``cpu-burst-config`` and ``system-config``
hold ``{"clusterStrategy": {...}, "nodeStrategies": [{"name", "nodeSelector", ...strategy}]}``;
``host-application-config`` holds ``{"applications": [...], "nodeConfigs": [{"name",
"nodeSelector", "applications"}]}``. Parsing a key returns the same shape with everything merged,
as Koordinator keeps it: ``clusterStrategy`` is the defaults overlaid by the key's cluster strategy
(``merge_cfg``), and each ``nodeStrategies`` entry is that cluster strategy overlaid by the entry's
fields, so that the entry a node matches is its whole strategy. A missing key means the defaults.

A key is refused, naming the field, when it is not JSON, a field has the wrong type, a value breaks
the rules of ``nodeslo_rules`` (what Koordinator's ConfigMap checker refuses), or a node entry has
an empty ``nodeSelector`` (the checker's rule: it would select every node). A selector whose
expressions do not parse is not refused here: the controller skips that entry, as Koordinator's
does, and says so.
"""

from __future__ import annotations

from typing import Any, TypeVar

from apis.base import KoordModel
from apis.errors import InvalidAnnotation, InvalidValue, summary
from apis.extension._annotation import parse_json
from apis.meta import LabelSelector
from apis.slo.nodeslo import (
    CPUBurstStrategy,
    HostApplicationSpec,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)
from apis.slo.sloconfig.merge import merge_wire
from apis.slo.sloconfig.names import (
    KEY_CPU_BURST,
    KEY_HOST_APPLICATION,
    KEY_RESOURCE_QOS,
    KEY_RESOURCE_THRESHOLD,
    KEY_SYSTEM,
)
from apis.slo.sloconfig.nodeslo_defaults import (
    default_cpu_burst_strategy,
    default_resource_qos_strategy,
    default_resource_threshold_strategy,
    default_system_strategy,
)
from apis.slo.sloconfig.nodeslo_rules import strategy_problems

__all__ = [
    "CPUBurstCfg",
    "HostApplicationCfg",
    "NodeCPUBurstStrategy",
    "NodeCfgProfile",
    "NodeHostApplicationCfg",
    "NodeResourceQOSStrategy",
    "NodeResourceThresholdStrategy",
    "NodeSystemStrategy",
    "ResourceQOSCfg",
    "ResourceThresholdCfg",
    "SystemCfg",
    "parse_cpu_burst_cfg",
    "parse_host_application_cfg",
    "parse_resource_qos_cfg",
    "parse_resource_threshold_cfg",
    "parse_system_cfg",
]

_PROFILE_FIELDS = ("name", "nodeSelector")


class NodeCfgProfile(KoordModel):
    """Which nodes a ``nodeStrategies`` / ``nodeConfigs`` entry is for."""

    name: str | None = None
    """The entry's name (Koordinator's checker wants it unique; here it only labels messages)."""
    node_selector: LabelSelector | None = None
    """Nodes whose labels match take this entry; the first matching entry wins."""

    def strategy_wire(self) -> dict[str, Any]:
        """The entry's own fields, without ``name`` and ``nodeSelector``."""
        wire = self.to_wire()
        for key in _PROFILE_FIELDS:
            wire.pop(key, None)
        return wire

    def describe(self, path: str) -> str:
        return f"{path} (name {self.name!r})" if self.name else path


class NodeResourceThresholdStrategy(NodeCfgProfile, ResourceThresholdStrategy):
    """A node entry of ``resource-threshold-config``: a selector and the strategy's fields."""


class NodeResourceQOSStrategy(NodeCfgProfile, ResourceQOSStrategy):
    """A node entry of ``resource-qos-config``."""


class NodeCPUBurstStrategy(NodeCfgProfile, CPUBurstStrategy):
    """A node entry of ``cpu-burst-config``."""


class NodeSystemStrategy(NodeCfgProfile, SystemStrategy):
    """A node entry of ``system-config``."""


class ResourceThresholdCfg(KoordModel):
    cluster_strategy: ResourceThresholdStrategy | None = None
    node_strategies: list[NodeResourceThresholdStrategy] | None = None


class ResourceQOSCfg(KoordModel):
    cluster_strategy: ResourceQOSStrategy | None = None
    node_strategies: list[NodeResourceQOSStrategy] | None = None


class CPUBurstCfg(KoordModel):
    cluster_strategy: CPUBurstStrategy | None = None
    node_strategies: list[NodeCPUBurstStrategy] | None = None


class SystemCfg(KoordModel):
    cluster_strategy: SystemStrategy | None = None
    node_strategies: list[NodeSystemStrategy] | None = None


class NodeHostApplicationCfg(NodeCfgProfile):
    """A node entry of ``host-application-config``: its list replaces the cluster's."""

    applications: list[HostApplicationSpec] | None = None


class HostApplicationCfg(KoordModel):
    applications: list[HostApplicationSpec] | None = None
    """Host applications of every node no ``nodeConfigs`` entry matches (none by default)."""
    node_configs: list[NodeHostApplicationCfg] | None = None


C = TypeVar("C", ResourceThresholdCfg, ResourceQOSCfg, CPUBurstCfg, SystemCfg, HostApplicationCfg)
SC = TypeVar("SC", ResourceThresholdCfg, ResourceQOSCfg, CPUBurstCfg, SystemCfg)


def _load(key: str, text: str, cfg_type: type[C]) -> C:
    try:
        return parse_json(key, text, cfg_type)
    except InvalidAnnotation as exc:
        raise InvalidValue(exc.problem) from None  # the key is named by whoever holds it


def _empty(selector: LabelSelector | None) -> bool:
    return selector is None or not (selector.match_labels or selector.match_expressions)


def _parse_strategy_cfg(key: str, text: str | None, cfg_type: type[SC], default: KoordModel) -> SC:
    if text is None:
        return cfg_type.model_validate({"clusterStrategy": default.to_wire(), "nodeStrategies": []})
    raw = _load(key, text, cfg_type)
    cluster = merge_wire(default.to_wire(), raw.cluster_strategy.to_wire() if raw.cluster_strategy else {})
    nodes = [merge_wire(cluster, entry.to_wire()) for entry in raw.node_strategies or []]
    merged = cfg_type.model_validate({"clusterStrategy": cluster, "nodeStrategies": nodes})
    assert merged.cluster_strategy is not None
    problems = strategy_problems(merged.cluster_strategy, "clusterStrategy")
    for i, entry in enumerate(merged.node_strategies or []):
        path = entry.describe(f"nodeStrategies[{i}]")
        if _empty(entry.node_selector):
            problems.append(f"{path}.nodeSelector: must not be empty (it would select every node)")
        problems += strategy_problems(entry, path)
    if problems:
        raise InvalidValue(summary(problems))
    return merged


def parse_resource_threshold_cfg(text: str | None) -> ResourceThresholdCfg:
    """``resource-threshold-config`` merged (None: the key is missing, the defaults)."""
    return _parse_strategy_cfg(
        KEY_RESOURCE_THRESHOLD, text, ResourceThresholdCfg, default_resource_threshold_strategy()
    )


def parse_resource_qos_cfg(text: str | None) -> ResourceQOSCfg:
    return _parse_strategy_cfg(KEY_RESOURCE_QOS, text, ResourceQOSCfg, default_resource_qos_strategy())


def parse_cpu_burst_cfg(text: str | None) -> CPUBurstCfg:
    return _parse_strategy_cfg(KEY_CPU_BURST, text, CPUBurstCfg, default_cpu_burst_strategy())


def parse_system_cfg(text: str | None) -> SystemCfg:
    return _parse_strategy_cfg(KEY_SYSTEM, text, SystemCfg, default_system_strategy())


def parse_host_application_cfg(text: str | None) -> HostApplicationCfg:
    """``host-application-config`` as written: lists are not merged (none by default)."""
    if text is None:
        return HostApplicationCfg(applications=[], node_configs=[])
    raw = _load(KEY_HOST_APPLICATION, text, HostApplicationCfg)
    problems = [
        f"{entry.describe(f'nodeConfigs[{i}]')}.nodeSelector: must not be empty (it would select every node)"
        for i, entry in enumerate(raw.node_configs or [])
        if _empty(entry.node_selector)
    ]
    if problems:
        raise InvalidValue(summary(problems))
    return HostApplicationCfg(applications=raw.applications or [], node_configs=raw.node_configs or [])
