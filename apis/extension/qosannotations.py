"""Other keys of Koordinator's public extension API (api-reference 2.13): koordlet QoS overrides,
eviction, core scheduling, node colocation and amplification keys.

JSON shapes checked against Koordinator's Go types:

- ``node.koordinator.sh/resctrl`` (pod annotation): ``{"llc": {"schemata": {"range": [0, 30]},
  "schemataPerCache": [{"cacheID": 0, "range": [..]}]}, "mb": {"schemata": {"percent": 20},
  "schemataPerCache": [{"cacheID": 0, "percent": 20}]}}``;
- ``koordinator.sh/cpuQOS``: ``{"enable": bool, "groupIdentity": int in [-1, 2], "schedIdle": int,
  "coreExpeller": bool}``;
- ``koordinator.sh/blkioQOS``: ``{"blocks": [{"name": "/dev/vda", "type": "device", "ioCfg":
  {"readBPS": int, "writeIOPS": int, "ioWeightPercent": int in [1, 100], ...}}]}`` (slo/v1alpha1
  ``BlkIOQOS``);
- ``koordinator.sh/oom-score-adj``: an int in [-1000, 1000]; ``koordinator.sh/oom-score-adj-spec``:
  ``{"<container>": int}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from apis.base import KoordModel
from apis.errors import InvalidAnnotation, InvalidValue
from apis.extension._annotation import lookup, parse_bool, parse_go_int, parse_json
from apis.quantity import Quantity
from apis.slo.nodeslo import BlockCfg
from apis.types import Int64, NonNegativeInt64, Percent

__all__ = [
    "ANNOTATION_CPU_NORMALIZATION_RATIO",
    "ANNOTATION_NETWORK_QOS",
    "ANNOTATION_NODE_BANDWIDTH",
    "ANNOTATION_NODE_COLOCATION_STRATEGY",
    "ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE",
    "ANNOTATION_NODE_RAW_ALLOCATABLE",
    "ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO",
    "ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS",
    "ANNOTATION_OOM_SCORE_ADJ",
    "ANNOTATION_OOM_SCORE_ADJ_SPEC",
    "ANNOTATION_POD_BLKIO_QOS",
    "ANNOTATION_POD_CPU_BURST",
    "ANNOTATION_POD_CPU_QOS",
    "ANNOTATION_POD_EVICTION_POLICY",
    "ANNOTATION_POD_EVICTION_PRIORITY",
    "ANNOTATION_POD_MEMORY_QOS",
    "ANNOTATION_RESCTRL",
    "CORE_SCHED_POLICY_DEFAULT",
    "CORE_SCHED_POLICY_EXCLUSIVE",
    "CORE_SCHED_POLICY_NONE",
    "CPUQOS",
    "LABEL_CORE_SCHED_GROUP_ID",
    "LABEL_CORE_SCHED_POLICY",
    "LABEL_CPU_NORMALIZATION_ENABLED",
    "LABEL_CPU_RECLAIM_RATIO",
    "LABEL_MANAGED_BY",
    "LABEL_MEMORY_RECLAIM_RATIO",
    "LABEL_MID_STATIC_CPU_RESERVED_RATIO",
    "LABEL_MID_STATIC_MEMORY_RESERVED_RATIO",
    "LABEL_POD_EVICT_ENABLED",
    "LABEL_POD_MUTATING_UPDATE",
    "LABEL_POD_SKIP_ENHANCED_VALIDATION",
    "LABEL_QUESTIONED_OBJECT_KEY",
    "LABEL_TOPOLOGY_KEY_TO_EXPLAIN",
    "MANAGED_BY_KOORDINATOR",
    "OOM_SCORE_ADJ_MAX",
    "OOM_SCORE_ADJ_MIN",
    "CoreSchedPolicy",
    "PodBlkIOQOS",
    "ResctrlConfig",
    "ResctrlSchemata",
    "ResctrlSchemataPerCache",
    "ResctrlSection",
    "core_sched_policy",
    "get_blkio_qos",
    "get_cpu_qos",
    "get_node_total_bandwidth",
    "get_oom_score_adj",
    "get_oom_score_adj_spec",
    "get_pod_eviction_priority",
    "get_resctrl",
    "parse_blkio_qos",
    "parse_cpu_normalization_enabled",
    "parse_cpu_qos",
    "parse_oom_score_adj",
    "parse_oom_score_adj_spec",
    "parse_pod_eviction_priority",
    "parse_resctrl",
    "pod_evict_enabled",
]

# --- pod keys --------------------------------------------------------------------------------------

LABEL_POD_EVICT_ENABLED = "koordinator.sh/eviction-enabled"
ANNOTATION_POD_EVICTION_POLICY = "koordinator.sh/eviction-policy"
ANNOTATION_POD_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"
"""int32 string; koordlet evicts lower values first. Absent means 0."""
ANNOTATION_OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
ANNOTATION_OOM_SCORE_ADJ_SPEC = "koordinator.sh/oom-score-adj-spec"
ANNOTATION_NETWORK_QOS = "koordinator.sh/networkQOS"
ANNOTATION_POD_CPU_BURST = "koordinator.sh/cpuBurst"
ANNOTATION_POD_CPU_QOS = "koordinator.sh/cpuQOS"
ANNOTATION_POD_MEMORY_QOS = "koordinator.sh/memoryQOS"
ANNOTATION_POD_BLKIO_QOS = "koordinator.sh/blkioQOS"
ANNOTATION_RESCTRL = "node.koordinator.sh/resctrl"
"""Pod annotation despite the node prefix: per-pod LLC / memory-bandwidth schemata."""
LABEL_CORE_SCHED_GROUP_ID = "koordinator.sh/core-sched-group-id"
LABEL_CORE_SCHED_POLICY = "koordinator.sh/core-sched-policy"
LABEL_POD_MUTATING_UPDATE = "pod.koordinator.sh/mutating-update"
LABEL_POD_SKIP_ENHANCED_VALIDATION = "pod.koordinator.sh/skip-enhanced-validation"

OOM_SCORE_ADJ_MIN = -1000
OOM_SCORE_ADJ_MAX = 1000

CoreSchedPolicy = Literal["", "none", "exclusive"]
CORE_SCHED_POLICY_DEFAULT: CoreSchedPolicy = ""
CORE_SCHED_POLICY_NONE: CoreSchedPolicy = "none"
CORE_SCHED_POLICY_EXCLUSIVE: CoreSchedPolicy = "exclusive"

# --- node keys -------------------------------------------------------------------------------------

ANNOTATION_NODE_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
LABEL_CPU_NORMALIZATION_ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_NODE_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANNOTATION_NODE_BANDWIDTH = "node.koordinator.sh/network-bandwidth"
ANNOTATION_NODE_ORIGIN_EXTENDED_ALLOCATABLE = "node.koordinator.sh/originExtendedAllocatable"
ANNOTATION_NODE_THIRD_PARTY_ALLOCATIONS = "node.koordinator.sh/thirdPartyAllocations"

# --- schedule explanation, ownership ---------------------------------------------------------------

LABEL_QUESTIONED_OBJECT_KEY = "scheduling.koordinator.sh/questioned-object-key"
LABEL_TOPOLOGY_KEY_TO_EXPLAIN = "scheduling.koordinator.sh/topology-key-to-explain"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_KOORDINATOR = "Koordinator"


def pod_evict_enabled(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_POD_EVICT_ENABLED) == "true"


def parse_pod_eviction_priority(raw: str) -> int:
    return parse_go_int(ANNOTATION_POD_EVICTION_PRIORITY, raw, bits=32)


def get_pod_eviction_priority(annotations: Mapping[str, str] | None) -> int:
    """0 when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_POD_EVICTION_PRIORITY)
    return 0 if raw is None else parse_pod_eviction_priority(raw)


def _check_oom_score_adj(key: str, value: int, where: str = "") -> int:
    if not OOM_SCORE_ADJ_MIN <= value <= OOM_SCORE_ADJ_MAX:
        raise InvalidAnnotation(
            key,
            f"{where}oom_score_adj must be within [{OOM_SCORE_ADJ_MIN}, {OOM_SCORE_ADJ_MAX}] (got {value})",
        )
    return value


def parse_oom_score_adj(raw: str) -> int:
    """A decimal int in [-1000, 1000]."""
    return _check_oom_score_adj(
        ANNOTATION_OOM_SCORE_ADJ, parse_go_int(ANNOTATION_OOM_SCORE_ADJ, raw, bits=64)
    )


def get_oom_score_adj(annotations: Mapping[str, str] | None) -> int | None:
    raw = lookup(annotations, ANNOTATION_OOM_SCORE_ADJ)
    return None if raw is None else parse_oom_score_adj(raw)


_OOM_SPEC: TypeAdapter[dict[str, Int64]] = TypeAdapter(dict[str, Int64])


def parse_oom_score_adj_spec(raw: str) -> dict[str, int]:
    """``{"<container>": int}``, every value in [-1000, 1000]."""
    spec = parse_json(ANNOTATION_OOM_SCORE_ADJ_SPEC, raw, _OOM_SPEC)
    for container, value in spec.items():
        _check_oom_score_adj(ANNOTATION_OOM_SCORE_ADJ_SPEC, value, f"{container}: ")
    return spec


def get_oom_score_adj_spec(annotations: Mapping[str, str] | None) -> dict[str, int] | None:
    raw = lookup(annotations, ANNOTATION_OOM_SCORE_ADJ_SPEC)
    return None if raw is None else parse_oom_score_adj_spec(raw)


def core_sched_policy(labels: Mapping[str, str] | None) -> CoreSchedPolicy:
    """``none`` or ``exclusive`` when the label says so, else the default ``""``."""
    value = lookup(labels, LABEL_CORE_SCHED_POLICY)
    if value in (CORE_SCHED_POLICY_NONE, CORE_SCHED_POLICY_EXCLUSIVE):
        return value
    return CORE_SCHED_POLICY_DEFAULT


def parse_cpu_normalization_enabled(raw: str) -> bool:
    """The node label as a Go bool (``true``, ``false``, ``1``, ``0``, ...)."""
    return parse_bool(LABEL_CPU_NORMALIZATION_ENABLED, raw)


def get_node_total_bandwidth(annotations: Mapping[str, str] | None) -> Quantity | None:
    """The node's ``network-bandwidth`` annotation (a quantity, e.g. ``"10G"``); None when absent."""
    raw = lookup(annotations, ANNOTATION_NODE_BANDWIDTH)
    if raw is None:
        return None
    try:
        return Quantity.parse(raw)
    except InvalidValue as exc:
        raise InvalidAnnotation(ANNOTATION_NODE_BANDWIDTH, str(exc)) from None


# --- cpuQOS ----------------------------------------------------------------------------------------


class CPUQOS(KoordModel):
    enable: bool | None = None
    group_identity: Annotated[Int64 | None, Field(ge=-1, le=2)] = None
    """Group identity (bvt) value; Koordinator accepts -1 to 2."""
    sched_idle: Int64 | None = None
    core_expeller: bool | None = None


def parse_cpu_qos(raw: str) -> CPUQOS:
    return parse_json(ANNOTATION_POD_CPU_QOS, raw, CPUQOS)


def get_cpu_qos(annotations: Mapping[str, str] | None) -> CPUQOS | None:
    raw = lookup(annotations, ANNOTATION_POD_CPU_QOS)
    return None if raw is None else parse_cpu_qos(raw)


# --- blkioQOS -------------------------------------------------------------------------------------


class PodBlkIOQOS(KoordModel):
    blocks: list[BlockCfg] | None = None


def parse_blkio_qos(raw: str) -> PodBlkIOQOS:
    return parse_json(ANNOTATION_POD_BLKIO_QOS, raw, PodBlkIOQOS)


def get_blkio_qos(annotations: Mapping[str, str] | None) -> PodBlkIOQOS | None:
    raw = lookup(annotations, ANNOTATION_POD_BLKIO_QOS)
    return None if raw is None else parse_blkio_qos(raw)


# --- resctrl ---------------------------------------------------------------------------------------


class ResctrlSchemata(KoordModel):
    percent: Percent | None = None
    """Memory bandwidth percent (mb), 0 to 100."""
    range: list[Percent] | None = None
    """LLC way range in percent, ``[start, end]`` (llc)."""


class ResctrlSchemataPerCache(ResctrlSchemata):
    cache_id: NonNegativeInt64 | None = Field(default=None, alias="cacheID")


class ResctrlSection(KoordModel):
    schemata: ResctrlSchemata | None = None
    schemata_per_cache: list[ResctrlSchemataPerCache] | None = None


class ResctrlConfig(KoordModel):
    llc: ResctrlSection | None = None
    mb: ResctrlSection | None = None


def parse_resctrl(raw: str) -> ResctrlConfig:
    return parse_json(ANNOTATION_RESCTRL, raw, ResctrlConfig)


def get_resctrl(annotations: Mapping[str, str] | None) -> ResctrlConfig | None:
    raw = lookup(annotations, ANNOTATION_RESCTRL)
    return None if raw is None else parse_resctrl(raw)
