"""A node's NodeSLO spec, rendered from the NodeSLO keys of ``slo-controller-config``
(Koordinator's ``pkg/slo-controller/nodeslo/resource_strategy.go``; algorithms.md 10.5).

1. resource-threshold, resource-qos, cpu-burst and system config: the first ``nodeStrategies``
   entry (in list order) whose ``nodeSelector`` matches the node's labels replaces the cluster
   strategy wholesale (entries are already merged over it when the key is parsed); no match, the
   cluster strategy. An entry whose selector does not parse is skipped.
2. system config: the node's ``node.koordinator.sh/network-bandwidth`` annotation, when present,
   replaces ``totalNetworkBandwidth``; one that does not parse is left out and reported.
3. host-application config: the first matching ``nodeConfigs`` entry's list replaces the cluster
   list (no merging); an empty result leaves ``hostApplications`` out, as Go's ``omitempty`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from apis.errors import InvalidAnnotation, summary
from apis.extension.qosannotations import get_node_total_bandwidth
from apis.meta import LabelSelector, ObjectMeta, OwnerReference
from apis.slo.nodeslo import (
    CPUBurstStrategy,
    NodeSLO,
    NodeSLOSpec,
    NodeSLOStatus,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)
from apis.slo.sloconfig.names import (
    KEY_CPU_BURST,
    KEY_HOST_APPLICATION,
    KEY_RESOURCE_QOS,
    KEY_RESOURCE_THRESHOLD,
    KEY_SYSTEM,
)
from apis.slo.sloconfig.nodeslo_config import (
    CPUBurstCfg,
    HostApplicationCfg,
    NodeCfgProfile,
    ResourceQOSCfg,
    ResourceThresholdCfg,
    SystemCfg,
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_qos_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)
from operators.logic.reservation_admission import label_selector_problems

__all__ = [
    "NodeSLOConfig",
    "Rendered",
    "node_slo_for",
    "normalized_spec",
    "render",
    "skipped_entries",
]

P = TypeVar("P", bound=NodeCfgProfile)
S = TypeVar("S", ResourceThresholdStrategy, ResourceQOSStrategy, CPUBurstStrategy, SystemStrategy)


@dataclass(frozen=True)
class NodeSLOConfig:
    """The five keys as koord-manager holds them (each parsed, or its last good value)."""

    resource_threshold: ResourceThresholdCfg = field(
        default_factory=lambda: parse_resource_threshold_cfg(None)
    )
    resource_qos: ResourceQOSCfg = field(default_factory=lambda: parse_resource_qos_cfg(None))
    cpu_burst: CPUBurstCfg = field(default_factory=lambda: parse_cpu_burst_cfg(None))
    system: SystemCfg = field(default_factory=lambda: parse_system_cfg(None))
    host_application: HostApplicationCfg = field(default_factory=lambda: parse_host_application_cfg(None))


@dataclass(frozen=True)
class Rendered:
    spec: NodeSLOSpec
    problems: tuple[str, ...] = ()
    """What was wrong with the node's own metadata (left out of the spec)."""


def _selector_problem(selector: LabelSelector | None) -> str | None:
    if selector is None:
        return "Required value"
    problems = label_selector_problems(selector, "nodeSelector")
    return summary(problems) if problems else None


def _first_match(entries: Sequence[P] | None, labels: Mapping[str, str]) -> P | None:
    for entry in entries or ():
        selector = entry.node_selector
        if selector is not None and _selector_problem(selector) is None and selector.matches(labels):
            return entry
    return None


def _strategy(
    entries: Sequence[Any] | None, cluster: S | None, labels: Mapping[str, str], kind: type[S]
) -> S:
    match = _first_match(entries, labels)
    if match is not None:
        return kind.model_validate(match.strategy_wire())
    assert cluster is not None, "a parsed key always has its cluster strategy"
    return cluster.model_copy(deep=True)


def render(config: NodeSLOConfig, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Rendered:
    """The NodeSLO spec of a node with these labels and annotations (steps in the module docstring)."""
    problems: list[str] = []
    system = _strategy(config.system.node_strategies, config.system.cluster_strategy, labels, SystemStrategy)
    try:
        bandwidth = get_node_total_bandwidth(annotations)
    except InvalidAnnotation as exc:
        problems.append(f"{exc}; totalNetworkBandwidth comes from system-config instead")
    else:
        if bandwidth is not None:
            system.total_network_bandwidth = bandwidth
    hosts = config.host_application
    host_match = _first_match(hosts.node_configs, labels)
    applications = host_match.applications if host_match is not None else hosts.applications
    spec = NodeSLOSpec(
        resource_used_threshold_with_be=_strategy(
            config.resource_threshold.node_strategies,
            config.resource_threshold.cluster_strategy,
            labels,
            ResourceThresholdStrategy,
        ),
        resource_qos_strategy=_strategy(
            config.resource_qos.node_strategies,
            config.resource_qos.cluster_strategy,
            labels,
            ResourceQOSStrategy,
        ),
        cpu_burst_strategy=_strategy(
            config.cpu_burst.node_strategies, config.cpu_burst.cluster_strategy, labels, CPUBurstStrategy
        ),
        system_strategy=system,
        host_applications=[app.model_copy(deep=True) for app in applications] if applications else None,
    )
    return Rendered(spec=spec, problems=tuple(problems))


def skipped_entries(config: NodeSLOConfig, key: str) -> list[str]:
    """The entries of ``key`` that no node can take because their selector does not parse."""
    entries: Sequence[NodeCfgProfile] | None
    list_name = "nodeStrategies"
    if key == KEY_RESOURCE_THRESHOLD:
        entries = config.resource_threshold.node_strategies
    elif key == KEY_RESOURCE_QOS:
        entries = config.resource_qos.node_strategies
    elif key == KEY_CPU_BURST:
        entries = config.cpu_burst.node_strategies
    elif key == KEY_SYSTEM:
        entries = config.system.node_strategies
    elif key == KEY_HOST_APPLICATION:
        entries, list_name = config.host_application.node_configs, "nodeConfigs"
    else:
        raise KeyError(key)
    skipped = []
    for i, entry in enumerate(entries or ()):
        problem = _selector_problem(entry.node_selector)
        if problem is not None:
            skipped.append(f"{key}: {entry.describe(f'{list_name}[{i}]')}: {problem}; the entry is skipped")
    return skipped


def normalized_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """A NodeSLO spec as read back from the API server, in the form ``render`` produces, so that
    the two compare equal when they mean the same."""
    return NodeSLOSpec.model_validate(spec or {}).to_wire()


def node_slo_for(node_name: str, node_uid: str, spec: NodeSLOSpec) -> NodeSLO:
    """The node's NodeSLO, owned by the node so that the garbage collector removes it with the node
    even if koord-manager missed the deletion."""
    return NodeSLO(
        api_version=NodeSLO.crd.api_version,
        kind=NodeSLO.crd.kind,
        metadata=ObjectMeta(
            name=node_name,
            owner_references=[OwnerReference(api_version="v1", kind="Node", name=node_name, uid=node_uid)],
        ),
        spec=spec,
        status=NodeSLOStatus(),
    )
