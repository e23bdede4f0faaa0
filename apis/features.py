"""Koordinator's feature gates that koord-scheduler and koord-manager read (``--feature-gates``,
Kubernetes' ``Name=true,Other=false`` syntax).

Only gates this project honours are accepted: any other gate name (Koordinator's gates not built
here included) or a value that is not a boolean stops the component at start-up with a message
naming the gate, never silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from apis.errors import InvalidValue, echo

__all__ = ["FeatureGates", "parse_feature_gates"]


@dataclass(frozen=True, slots=True)
class FeatureGates:
    elastic_quota_ignore_pod_overhead: bool = field(
        default=False, metadata={"gate": "ElasticQuotaIgnorePodOverhead"}
    )
    """A pod's ``spec.overhead`` is left out of what it charges its ElasticQuota."""
    disable_default_quota: bool = field(default=False, metadata={"gate": "DisableDefaultQuota"})
    """No default quota: a pod charges only the quota its ``quota.scheduling.koordinator.sh/name``
    label names, when that quota exists; otherwise no quota at all (never the default quota, and
    never the quota named like its namespace)."""
    elastic_quota_guarantee_usage: bool = field(
        default=False, metadata={"gate": "ElasticQuotaGuaranteeUsage"}
    )
    """What a quota's pods hold is guaranteed to it (``guaranteed = max(min, allocated)``): its
    runtime never drops below it, so it is not reclaimed; ``allocated`` and ``guaranteed`` are
    written on every quota."""
    device_plugin_adaption: bool = field(default=False, metadata={"gate": "DevicePluginAdaption"})
    """DeviceShare also writes what vendors' device plugins read at PreBind (bind timestamp, GPU
    minors, the HAMi node label, Huawei and Cambricon annotations, the Cambricon node lock)."""
    node_mutating_webhook: bool = field(default=False, metadata={"gate": "NodeMutatingWebhook"})
    """koord-manager serves the Node mutating webhook: ``nodes/status`` updates get their cpu and
    memory allocatable amplified by the node's ``resource-amplification-ratio``."""


def _gate_fields() -> dict[str, str]:
    return {f.metadata["gate"]: f.name for f in fields(FeatureGates)}


def parse_feature_gates(text: str) -> FeatureGates:
    """``--feature-gates``: ``Name=bool`` pairs separated by commas (empty: every default)."""
    known = _gate_fields()
    values: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise InvalidValue(f"missing bool value for {echo(name)} in --feature-gates")
        value = _bool(name, raw.strip())
        if name not in known:
            raise InvalidValue(f"unrecognized feature gate: {echo(name)}")
        values[known[name]] = value
    return FeatureGates(**values)


def _bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise InvalidValue(f"invalid value of {echo(name)}={echo(raw)}, err: expected a bool")
