"""koordlet's feature gates (``koordlet --feature-gates``), with Koordinator's names and defaults
(``pkg/features/koordlet_features.go`` and the runtime hooks' gates).

Only gates this project honours are accepted; another name or a value that is not a boolean stops
koordlet at start-up with a message naming the gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from apis.errors import InvalidValue, echo

__all__ = ["KoordletFeatureGates", "parse_koordlet_feature_gates"]


@dataclass(frozen=True, slots=True)
class KoordletFeatureGates:
    be_cpu_suppress: bool = field(default=True, metadata={"gate": "BECPUSuppress"})
    """Suppress BE pods' CPU by the LS usage (cpuset or cfsQuota policy)."""
    be_cpu_evict: bool = field(default=False, metadata={"gate": "BECPUEvict"})
    """Evict BE pods whose CPU satisfaction falls below the NodeSLO's lower percent."""
    be_memory_evict: bool = field(default=False, metadata={"gate": "BEMemoryEvict"})
    """Evict BE pods when node memory usage crosses ``memoryEvictThresholdPercent``."""
    rdt_resctrl: bool = field(default=True, metadata={"gate": "RdtResctrl"})
    """Class-level LLC and memory bandwidth through resctrl from the NodeSLO."""
    be_cpu_manager: bool = field(default=False, metadata={"gate": "BECPUManager"})
    """BE cpusets are managed elsewhere: CPU suppression restores the BE cgroup and stops."""
    group_identity: bool = field(default=True, metadata={"gate": "GroupIdentity"})
    """Pod-level CPU QoS: group identity (``cpu.bvt_warp_ns``) or, with ``cpuPolicy: coreSched``,
    ``cpu.idle``; host applications get their class's value."""
    resctrl_hook: bool = field(default=False, metadata={"gate": "Resctrl"})
    """Pod-level resctrl groups for pods with ``node.koordinator.sh/resctrl``."""
    batch_resource: bool = field(default=True, metadata={"gate": "BatchResource"})
    """BE pods' CFS quota from their ``kubernetes.io/batch-cpu`` limits (divided by the node's CPU
    normalization ratio)."""
    cpu_normalization: bool = field(default=False, metadata={"gate": "CPUNormalization"})
    """LS and no-QoS pods' CFS quota divided by the node's CPU normalization ratio."""


def parse_koordlet_feature_gates(text: str) -> KoordletFeatureGates:
    """``Name=bool`` pairs separated by commas (empty: every default)."""
    known = {f.metadata["gate"]: f.name for f in fields(KoordletFeatureGates)}
    values: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise InvalidValue(f"missing bool value for {echo(name)} in --feature-gates")
        if name not in known:
            raise InvalidValue(f"unrecognized koordlet feature gate: {echo(name)}")
        lowered = raw.strip().lower()
        if lowered not in ("true", "1", "t", "false", "0", "f"):
            raise InvalidValue(f"invalid value of {echo(name)}={echo(raw.strip())}, err: expected a bool")
        values[known[name]] = lowered in ("true", "1", "t")
    return KoordletFeatureGates(**values)
