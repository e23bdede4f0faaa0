"""LowNodeLoadArgs with Koordinator's field names, defaults, node-pool conversion and validation
(algorithms.md 12.2, ``pkg/descheduler/apis/config/types_loadaware.go``).

Koordinator's defaulting bugs are not copied: each anomaly count is defaulted on its own (an
else-if chain left ``consecutiveNormalities`` at 0), defaults are fresh objects per instance, and
the threshold maps are never mutated (``thresholds.py`` fills missing resources in copies).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from apis.duration import parse_go_duration_ns
from apis.meta import LabelSelector

__all__ = [
    "DEFAULT_NODE_POOL",
    "LoadAnomalyCondition",
    "LowNodeLoadArgs",
    "LowNodeLoadNodePool",
    "LowNodeLoadPodSelector",
    "Namespaces",
    "NodePool",
    "ResourceThresholds",
]

DEFAULT_NODE_POOL = "__default_node_pool__"
"""The pool the top-level selector and thresholds are converted into, always run first."""

ResourceThresholds = dict[str, float]
"""Resource name -> percent (of allocatable, or of deviation from the pool's mean)."""

_CAMEL = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


def _check_duration(value: str) -> str:
    if parse_go_duration_ns(value) < 0:
        raise ValueError("must be >= 0")
    return value


class LoadAnomalyCondition(BaseModel):
    """How many consecutive hot rounds make a node abnormal, and how long that lasts."""

    model_config = _CAMEL

    timeout: str = "1m"
    """How long the Anomaly state lasts after the node was last seen hot."""
    consecutive_abnormalities: int = Field(default=5, gt=0)
    """Hot rounds in a row before the node's pods are moved (1: at once)."""
    consecutive_normalities: int = Field(default=3, gt=0)
    """Eviction passes after which a node still hot goes back to needing
    ``consecutiveAbnormalities`` hot rounds (a back-off for nodes nothing can cool)."""

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        return _check_duration(value)

    @field_validator("consecutive_abnormalities", "consecutive_normalities", mode="before")
    @classmethod
    def _zero_is_default(cls, value: object, info: ValidationInfo) -> object:
        # Go's uint32 zero value means "not set": each count gets its own default.
        if value == 0 or value is None:
            return 5 if info.field_name == "consecutive_abnormalities" else 3
        return value

    @property
    def timeout_seconds(self) -> float:
        return parse_go_duration_ns(self.timeout) / 1e9


class Namespaces(BaseModel):
    """``include`` XOR ``exclude``: the namespaces whose pods may be moved."""

    model_config = _CAMEL

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_of(self) -> Namespaces:
        if self.include and self.exclude:
            raise ValueError("only one of evictableNamespaces.include and .exclude may be set")
        return self

    def allows(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


class LowNodeLoadPodSelector(BaseModel):
    """One selector of ``podSelectors``; the list is ORed, an empty list matches every pod."""

    model_config = _CAMEL

    name: str = ""
    selector: LabelSelector | None = None


def _check_percentages(where: str, thresholds: ResourceThresholds | None) -> None:
    for name, pct in (thresholds or {}).items():
        if not 0 <= pct <= 100:
            raise ValueError(f"{where}[{name}]: {pct} is out of range [0, 100]")


def _check_order(where: str, low: ResourceThresholds, high: ResourceThresholds, names: str) -> None:
    for name, value in low.items():
        if name in high and value > high[name]:
            raise ValueError(f"{where}: {names}: {name} {value} > {high[name]}")


class LowNodeLoadNodePool(BaseModel):
    """A user pool as written; a field left out (None) inherits the top-level value (v1.8)."""

    model_config = _CAMEL

    name: str = ""
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool | None = None
    high_thresholds: ResourceThresholds | None = None
    low_thresholds: ResourceThresholds | None = None
    prod_high_thresholds: ResourceThresholds | None = None
    prod_low_thresholds: ResourceThresholds | None = None
    resource_weights: dict[str, int] | None = None
    anomaly_condition: LoadAnomalyCondition | None = None


class NodePool(BaseModel):
    """A pool after conversion and inheritance: what one pass of the plugin runs with."""

    model_config = ConfigDict(frozen=True)

    name: str
    node_selector: LabelSelector | None
    use_deviation_thresholds: bool
    high_thresholds: ResourceThresholds
    low_thresholds: ResourceThresholds
    prod_high_thresholds: ResourceThresholds
    prod_low_thresholds: ResourceThresholds
    resource_weights: dict[str, int]
    anomaly_condition: LoadAnomalyCondition

    @model_validator(mode="after")
    def _validate(self) -> NodePool:
        where = f"nodePools[{self.name}]"
        for field, values in (
            ("highThresholds", self.high_thresholds),
            ("lowThresholds", self.low_thresholds),
            ("prodHighThresholds", self.prod_high_thresholds),
            ("prodLowThresholds", self.prod_low_thresholds),
        ):
            _check_percentages(f"{where}.{field}", values)
        _check_order(where, self.low_thresholds, self.high_thresholds, "lowThresholds > highThresholds")
        _check_order(
            where, self.prod_high_thresholds, self.high_thresholds, "prodHighThresholds > highThresholds"
        )
        _check_order(
            where,
            self.prod_low_thresholds,
            self.prod_high_thresholds,
            "prodLowThresholds > prodHighThresholds",
        )
        return self

    def resource_names(self) -> tuple[str, ...]:
        """The union of the four threshold maps' keys plus ``memory`` (always), in a stable order."""
        names: dict[str, None] = {}
        for source in (
            self.low_thresholds,
            self.high_thresholds,
            self.prod_low_thresholds,
            self.prod_high_thresholds,
        ):
            names.update(dict.fromkeys(source))
        names.setdefault("memory", None)
        return tuple(names)

    @property
    def has_prod_thresholds(self) -> bool:
        return bool(self.prod_high_thresholds or self.prod_low_thresholds)


def _weights(configured: dict[str, int] | None, thresholds: tuple[ResourceThresholds, ...]) -> dict[str, int]:
    """cpu=1, memory=1 and 1 for every resource a threshold names, under what the user set; a
    weight <= 0 counts as 1."""
    weights = {"cpu": 1, "memory": 1}
    for source in thresholds:
        weights.update(dict.fromkeys(source, 1))
    for name, weight in (configured or {}).items():
        weights[name] = weight if weight > 0 else 1
    return weights


class LowNodeLoadArgs(BaseModel):
    """Koordinator's LowNodeLoadArgs (``descheduler/v1alpha2``); enable LowNodeLoad under ``balance``."""

    model_config = _CAMEL

    api_version: str | None = None
    """TypeMeta, as in a ``pluginConfig`` entry; the descheduler's config loader checks it."""
    kind: str | None = None
    """``LowNodeLoadArgs`` when given."""
    paused: bool = False
    dry_run: bool = False
    """Only report (log and an event on the node) what would move; nothing is evicted."""
    number_of_nodes: int = Field(default=0, ge=0)
    """Act only when more than this many nodes can take pods."""
    node_metric_expiration_seconds: int = Field(default=180, gt=0)
    evictable_namespaces: Namespaces | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[LowNodeLoadPodSelector] = Field(default_factory=list)
    node_fit: bool = True
    """A pod is moved only if some target node fits it and stays under its high thresholds."""
    use_deviation_thresholds: bool = False
    high_thresholds: ResourceThresholds = Field(default_factory=dict)
    low_thresholds: ResourceThresholds = Field(default_factory=dict)
    prod_high_thresholds: ResourceThresholds = Field(default_factory=dict)
    prod_low_thresholds: ResourceThresholds = Field(default_factory=dict)
    resource_weights: dict[str, int] = Field(default_factory=dict)
    anomaly_condition: LoadAnomalyCondition = Field(default_factory=LoadAnomalyCondition)
    detector_cache_timeout: str = "5m"
    """A node's anomaly detector is forgotten this long after it was last marked."""
    node_pools: list[LowNodeLoadNodePool] = Field(default_factory=list)

    @field_validator("detector_cache_timeout")
    @classmethod
    def _cache_timeout(cls, value: str) -> str:
        return _check_duration(value)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str | None) -> str | None:
        if value not in (None, "LowNodeLoadArgs"):
            raise ValueError(f"kind {value!r}: expected LowNodeLoadArgs")
        return value

    @model_validator(mode="after")
    def _pools_valid(self) -> LowNodeLoadArgs:
        names = [pool.name for pool in self.pools()]
        if len(set(names)) != len(names):
            raise ValueError(f"nodePools: duplicate pool names in {names}")
        return self

    @property
    def detector_cache_timeout_seconds(self) -> float:
        return parse_go_duration_ns(self.detector_cache_timeout) / 1e9

    def _has_top_level_thresholds(self) -> bool:
        return bool(
            self.high_thresholds
            or self.low_thresholds
            or self.prod_high_thresholds
            or self.prod_low_thresholds
        )

    def pools(self) -> list[NodePool]:
        """Koordinator's conversion: the top-level selector and thresholds become the pool
        ``__default_node_pool__``, placed first; user pools inherit every field they leave out."""
        pools: list[NodePool] = []
        if self._has_top_level_thresholds():
            pools.append(
                self._pool(LowNodeLoadNodePool(name=DEFAULT_NODE_POOL, node_selector=self.node_selector))
            )
        for i, user in enumerate(self.node_pools):
            pools.append(self._pool(user, default_name=f"pool-{i}"))
        return pools

    def _pool(self, user: LowNodeLoadNodePool, default_name: str = DEFAULT_NODE_POOL) -> NodePool:
        def pick(value: ResourceThresholds | None, inherited: ResourceThresholds) -> ResourceThresholds:
            return dict(value if value is not None else inherited)

        thresholds = (
            pick(user.low_thresholds, self.low_thresholds),
            pick(user.high_thresholds, self.high_thresholds),
            pick(user.prod_low_thresholds, self.prod_low_thresholds),
            pick(user.prod_high_thresholds, self.prod_high_thresholds),
        )
        weights = user.resource_weights if user.resource_weights is not None else self.resource_weights
        return NodePool(
            name=user.name or default_name,
            node_selector=user.node_selector,
            use_deviation_thresholds=(
                user.use_deviation_thresholds
                if user.use_deviation_thresholds is not None
                else self.use_deviation_thresholds
            ),
            low_thresholds=thresholds[0],
            high_thresholds=thresholds[1],
            prod_low_thresholds=thresholds[2],
            prod_high_thresholds=thresholds[3],
            resource_weights=_weights(weights, thresholds),
            anomaly_condition=(user.anomaly_condition or self.anomaly_condition).model_copy(),
        )
