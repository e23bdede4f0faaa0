"""koordlet's feature gates (``koordlet --feature-gates``), with Koordinator's names and defaults
(``pkg/features/koordlet_features.go`` and the runtime hooks' gates).

Every gate of Koordinator's koordlet is accepted, and ``AllAlpha``/``AllBeta`` set every alpha (beta)
gate not named explicitly; the gates of :class:`KoordletFeatureGates` are honoured, another
Koordinator gate is accepted with one warning naming it (:func:`koordlet_feature_gate_notes`). An
unknown name or a value that is not a boolean stops koordlet at start-up with a message naming the
gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from apis.features import GateSpec, gate_notes, resolve_gates

__all__ = [
    "KOORDLET_GATES",
    "KoordletFeatureGates",
    "koordlet_feature_gate_notes",
    "parse_koordlet_feature_gates",
]

KOORDLET_GATES: Mapping[str, GateSpec] = {
    "Accelerators": GateSpec(False, "ALPHA"),
    "AuditEvents": GateSpec(False, "ALPHA"),
    "AuditEventsHTTPHandler": GateSpec(False, "ALPHA"),
    "BECPUEvict": GateSpec(False, "ALPHA"),
    "BECPUManager": GateSpec(False, "ALPHA"),
    "BECPUSuppress": GateSpec(True, "BETA"),
    "BEMemoryEvict": GateSpec(False, "ALPHA"),
    "BatchResource": GateSpec(True, "BETA"),
    "BlkIOReconcile": GateSpec(False, "ALPHA"),
    "CPICollector": GateSpec(False, "ALPHA"),
    "CPUAllocatableEvict": GateSpec(False, "ALPHA"),
    "CPUBurst": GateSpec(True, "BETA"),
    "CPUEvict": GateSpec(False, "ALPHA"),
    "CPUNormalization": GateSpec(False, "ALPHA"),
    "CPUSetAllocator": GateSpec(True, "BETA"),
    "CgroupReconcile": GateSpec(False, "ALPHA"),
    "ColdPageCollector": GateSpec(False, "ALPHA"),
    "CoreSched": GateSpec(False, "ALPHA"),
    "GPUEnvInject": GateSpec(False, "ALPHA"),
    "GroupIdentity": GateSpec(True, "BETA"),
    "HamiCoreVGPUMonitor": GateSpec(False, "ALPHA"),
    "HugePageReport": GateSpec(False, "ALPHA"),
    "Libpfm4": GateSpec(False, "ALPHA"),
    "MemoryAllocatableEvict": GateSpec(False, "ALPHA"),
    "MemoryEvict": GateSpec(False, "ALPHA"),
    "NodeMetricPromMetrics": GateSpec(False, "ALPHA"),
    "NodeTopologyReport": GateSpec(True, "BETA"),
    "OOMScoreAdj": GateSpec(False, "ALPHA"),
    "PSICollector": GateSpec(False, "ALPHA"),
    "PerCPUMetric": GateSpec(False, "ALPHA"),
    "PodResourcesProxy": GateSpec(False, "ALPHA"),
    "RDMADeviceInject": GateSpec(False, "ALPHA"),
    "RDMADevices": GateSpec(False, "ALPHA"),
    "RdtResctrl": GateSpec(True, "BETA"),
    "Resctrl": GateSpec(False, "ALPHA"),
    "ResctrlCollector": GateSpec(False, "ALPHA"),
    "SystemConfig": GateSpec(False, "ALPHA"),
    "TCNetworkQoS": GateSpec(False, "ALPHA"),
    "TerwayQoS": GateSpec(False, "ALPHA"),
}
"""Koordinator's koordlet gates (``pkg/features/koordlet_features.go`` and
``pkg/koordlet/runtimehooks/config.go``, commit a7a1b76b)."""


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
    blkio_reconcile: bool = field(default=False, metadata={"gate": "BlkIOReconcile"})
    """Block-IO limits and weights of the NodeSLO's ``blkioQOS`` and the pods' ``koordinator.sh/blkioQOS``
    on the blkio (v1) or io (v2) cgroups."""
    cpu_normalization: bool = field(default=False, metadata={"gate": "CPUNormalization"})
    """LS and no-QoS pods' CFS quota divided by the node's CPU normalization ratio."""
    pod_resources_proxy: bool = field(default=False, metadata={"gate": "PodResourcesProxy"})
    """Serve the kubelet's PodResources API with koord-scheduler's devices added on
    ``--pod-resources-proxy-path`` (``koordlet.podresources``)."""


def _honoured() -> dict[str, str]:
    return {f.metadata["gate"]: f.name for f in fields(KoordletFeatureGates)}


def parse_koordlet_feature_gates(text: str) -> KoordletFeatureGates:
    """``Name=bool`` pairs separated by commas (empty: every default)."""
    honoured = _honoured()
    values = resolve_gates(text, KOORDLET_GATES, what="koordlet feature gate")
    return KoordletFeatureGates(
        **{honoured[name]: value for name, value in values.items() if name in honoured}
    )


def koordlet_feature_gate_notes(text: str) -> list[str]:
    """The warnings about the gates ``text`` names that are Koordinator's but not implemented here."""
    return gate_notes(text, KOORDLET_GATES, _honoured(), what="koordlet feature gate")
