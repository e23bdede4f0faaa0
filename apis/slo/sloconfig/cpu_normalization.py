"""The ``cpu-normalization-config`` and ``resource-amplification-config`` keys of
``slo-controller-config`` (Koordinator's ``CPUNormalizationCfg`` and ``ResourceAmplificationCfg``,
``apis/configuration/slo_controller_config.go``).

Both have a cluster strategy at the top level and ``nodeConfigs``: entries with a ``nodeSelector``
(and an optional ``name``) whose strategy fields are laid over the cluster strategy when the key is
parsed (``merge_cfg``), so a node's strategy is the first matching entry's, else the cluster's.
Defaults: ``enable: false``, no ratio model, no amplification ratios.

Validation at parse time, where Koordinator's controllers would only skip or fail per node:

- a ``nodeSelector`` must be a valid LabelSelector (known operator; values for In/NotIn only);
- a ``resourceAmplificationRatio`` below 1 is refused (Koordinator fails every node's calculation
  with it and deletes their amplification annotation).

A CPU normalization ratio outside [1.0, 5.0] is *not* a parse error: the v1.4 release notes'
example ConfigMap has ``hyperThreadEnabledRatio: 0.82``, and Koordinator refuses such a ratio only
for the nodes it would apply to (``operators.logic.cpu_normalization``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Self

from pydantic import Field, FiniteFloat, model_validator

from apis.base import KoordModel
from apis.errors import InvalidAnnotation, InvalidValue
from apis.extension._annotation import parse_json
from apis.meta import LabelSelector, selects
from apis.slo.sloconfig.merge import merge_cfg
from apis.slo.sloconfig.names import KEY_CPU_NORMALIZATION, KEY_RESOURCE_AMPLIFICATION

__all__ = [
    "CPUNormalizationCfg",
    "CPUNormalizationStrategy",
    "ModelRatioCfg",
    "NodeCPUNormalizationCfg",
    "NodeResourceAmplificationCfg",
    "ResourceAmplificationCfg",
    "ResourceAmplificationStrategy",
    "parse_cpu_normalization_cfg",
    "parse_resource_amplification_cfg",
]

_OPERATORS_WITH_VALUES = frozenset({"In", "NotIn"})
_OPERATORS_WITHOUT_VALUES = frozenset({"Exists", "DoesNotExist"})


class ModelRatioCfg(KoordModel):
    """The ratios of one CPU model, by its hyper-threading and turbo state."""

    base_ratio: FiniteFloat | None = None
    """Neither hyper-threading nor turbo enabled."""
    hyper_thread_enabled_ratio: FiniteFloat | None = None
    """Hyper-threading enabled, turbo not."""
    turbo_enabled_ratio: FiniteFloat | None = None
    """Turbo enabled, hyper-threading not."""
    hyper_thread_turbo_enabled_ratio: FiniteFloat | None = None
    """Both enabled."""


class CPUNormalizationStrategy(KoordModel):
    enable: bool | None = None
    """Whether nodes get a ratio; the node label ``node.koordinator.sh/cpu-normalization-enabled``
    overrides it. Disabled nodes get ``"1.00"``."""
    default_ratio: FiniteFloat | None = None
    """The ratio of a node whose CPU model (or whose HT/turbo combination) the model does not list."""
    ratio_model: dict[str, ModelRatioCfg] | None = None
    """CPU model name (``cpu-basic-info``'s ``cpuModel``) -> its ratios."""


class _NodeCfgProfile(KoordModel):
    name: str | None = None
    """An identifier for the entry (consoles use it)."""
    node_selector: LabelSelector | None = None
    """The nodes the entry applies to; a missing selector matches no node, an empty one every node."""

    @model_validator(mode="after")
    def _selector_is_valid(self) -> Self:
        for i, req in enumerate((self.node_selector.match_expressions or []) if self.node_selector else []):
            where = f"nodeSelector.matchExpressions[{i}]"
            if req.operator in _OPERATORS_WITH_VALUES and not req.values:
                raise ValueError(f"{where}: operator {req.operator} needs values")
            if req.operator in _OPERATORS_WITHOUT_VALUES and req.values:
                raise ValueError(f"{where}: operator {req.operator} takes no values")
            if req.operator not in _OPERATORS_WITH_VALUES | _OPERATORS_WITHOUT_VALUES:
                raise ValueError(
                    f"{where}: operator {req.operator!r} is not In, NotIn, Exists or DoesNotExist"
                )
        return self

    def selects(self, labels: Mapping[str, str]) -> bool:
        return selects(self.node_selector, labels)


class NodeCPUNormalizationCfg(_NodeCfgProfile, CPUNormalizationStrategy):
    """A ``nodeConfigs`` entry: after parsing, the cluster strategy with the entry's fields on top."""


class CPUNormalizationCfg(CPUNormalizationStrategy):
    node_configs: list[NodeCPUNormalizationCfg] | None = None

    def strategy_for(self, labels: Mapping[str, str]) -> CPUNormalizationStrategy:
        """The first ``nodeConfigs`` entry selecting ``labels``, else the cluster strategy."""
        for entry in self.node_configs or ():
            if entry.selects(labels):
                return CPUNormalizationStrategy.model_validate(entry.model_dump())
        return CPUNormalizationStrategy.model_validate(self.model_dump(exclude={"node_configs"}))


class ResourceAmplificationStrategy(KoordModel):
    enable: bool | None = None
    """Whether ``resourceAmplificationRatio`` applies (the CPU normalization ratio applies anyway)."""
    resource_amplification_ratio: dict[str, Annotated[FiniteFloat, Field(ge=1.0)]] | None = None
    """Resource name -> ratio, at least 1; the node webhook amplifies ``cpu`` and ``memory``."""


class NodeResourceAmplificationCfg(_NodeCfgProfile, ResourceAmplificationStrategy):
    """A ``nodeConfigs`` entry: after parsing, the cluster strategy with the entry's fields on top."""


class ResourceAmplificationCfg(ResourceAmplificationStrategy):
    node_configs: list[NodeResourceAmplificationCfg] | None = None

    def strategy_for(self, labels: Mapping[str, str]) -> ResourceAmplificationStrategy:
        for entry in self.node_configs or ():
            if entry.selects(labels):
                return ResourceAmplificationStrategy.model_validate(entry.model_dump())
        return ResourceAmplificationStrategy.model_validate(self.model_dump(exclude={"node_configs"}))


DEFAULT_CPU_NORMALIZATION = CPUNormalizationCfg(enable=False, ratio_model={})
DEFAULT_RESOURCE_AMPLIFICATION = ResourceAmplificationCfg(enable=False)


def _premerged(key: str, text: str | None, default: Any, model: type[Any]) -> Any:
    if text is None:
        return default.model_copy(deep=True)
    try:
        parsed = parse_json(key, text, model)
    except InvalidAnnotation as exc:
        raise InvalidValue(exc.problem) from None
    cluster_wire = {k: v for k, v in parsed.to_wire().items() if k != "nodeConfigs"}
    cluster = merge_cfg(default, cluster_wire)
    cluster_only = {k: v for k, v in cluster.to_wire().items() if k != "nodeConfigs"}
    entries = [
        merge_cfg(type(entry).model_validate(cluster_only), entry) for entry in parsed.node_configs or ()
    ]
    return cluster.model_copy(update={"node_configs": entries or None})


def parse_cpu_normalization_cfg(text: str | None) -> CPUNormalizationCfg:
    """The key's JSON (None: the key is missing) with the defaults and the cluster strategy merged
    into every ``nodeConfigs`` entry; raises InvalidValue naming the path of a bad field."""
    cfg: CPUNormalizationCfg = _premerged(
        KEY_CPU_NORMALIZATION, text, DEFAULT_CPU_NORMALIZATION, CPUNormalizationCfg
    )
    return cfg


def parse_resource_amplification_cfg(text: str | None) -> ResourceAmplificationCfg:
    """As :func:`parse_cpu_normalization_cfg`, for ``resource-amplification-config``."""
    cfg: ResourceAmplificationCfg = _premerged(
        KEY_RESOURCE_AMPLIFICATION, text, DEFAULT_RESOURCE_AMPLIFICATION, ResourceAmplificationCfg
    )
    return cfg
