"""Koordinator's feature gates that koord-scheduler, koord-manager and koord-descheduler read
(``--feature-gates``, Kubernetes' ``Name=true,Other=false`` syntax).

Every gate of Koordinator's shared gate set (``pkg/features/features.go`` and
``scheduler_features.go``, which all three binaries register) is accepted, and so are
component-base's ``AllAlpha`` and ``AllBeta``, which set every alpha (beta) gate not named
explicitly. The gates of :class:`FeatureGates` are honoured; a Koordinator gate this project does
not implement is accepted with one warning naming it (:func:`feature_gate_notes`). An unknown gate
name or a value that is not a boolean stops the component at start-up with a message naming the
gate, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Literal

from apis.errors import InvalidValue, echo

__all__ = [
    "KOORDINATOR_GATES",
    "FeatureGates",
    "GateSpec",
    "feature_gate_notes",
    "gate_notes",
    "parse_feature_gates",
    "resolve_gates",
]


@dataclass(frozen=True, slots=True)
class GateSpec:
    """A gate's default and maturity, as Koordinator's ``featuregate.FeatureSpec``."""

    default: bool
    stage: Literal["ALPHA", "BETA", "GA", "DEPRECATED"]


KOORDINATOR_GATES: Mapping[str, GateSpec] = {
    "BindingAdmissionWebhook": GateSpec(False, "ALPHA"),
    "CSIStorageCapacity": GateSpec(True, "GA"),
    "CleanExpiredReservationAllocated": GateSpec(False, "ALPHA"),
    "ColocationProfileController": GateSpec(False, "ALPHA"),
    "ColocationProfileSkipMutatingResources": GateSpec(False, "ALPHA"),
    "ColocationProfileSkipValidatingPriority": GateSpec(False, "ALPHA"),
    "CompatibleCSIStorageCapacity": GateSpec(False, "ALPHA"),
    "CompatiblePodDisruptionBudget": GateSpec(False, "ALPHA"),
    "ConfigMapValidatingWebhook": GateSpec(False, "ALPHA"),
    "CrossSchedulerNomination": GateSpec(False, "ALPHA"),
    "DevicePluginAdaption": GateSpec(False, "ALPHA"),
    "DisableCSIStorageCapacityInformer": GateSpec(False, "ALPHA"),
    "DisableDefaultQuota": GateSpec(False, "ALPHA"),
    "DisableDeviceResourceSpec": GateSpec(False, "ALPHA"),
    "DisableDynamicResourceAllocationInformer": GateSpec(False, "ALPHA"),
    "DisableExtendedResourceSpec": GateSpec(False, "ALPHA"),
    "DisablePVCReservation": GateSpec(False, "BETA"),
    "DisablePodDisruptionBudgetInformer": GateSpec(False, "ALPHA"),
    "DynamicSchedulerCheck": GateSpec(True, "ALPHA"),
    "ElasticMutatingWebhook": GateSpec(True, "BETA"),
    "ElasticQuotaEnableUpdateResourceKey": GateSpec(False, "ALPHA"),
    "ElasticQuotaEvaluationTransformPod": GateSpec(False, "ALPHA"),
    "ElasticQuotaGuaranteeUsage": GateSpec(False, "ALPHA"),
    "ElasticQuotaIgnorePodOverhead": GateSpec(False, "ALPHA"),
    "ElasticQuotaIgnoreTerminatingPod": GateSpec(False, "ALPHA"),
    "ElasticQuotaImmediateIgnoreTerminatingPod": GateSpec(False, "ALPHA"),
    "ElasticValidatingWebhook": GateSpec(True, "BETA"),
    "EnableBatchScheduleNodeSnapshot": GateSpec(True, "BETA"),
    "EnableInlineBatchSchedule": GateSpec(False, "ALPHA"),
    "EnablePodEnhancedValidator": GateSpec(False, "ALPHA"),
    "EnableQuotaAdmission": GateSpec(False, "ALPHA"),
    "EnableQuotaAdmissionOnUpdate": GateSpec(False, "ALPHA"),
    "EnableSyncGPUSharedResource": GateSpec(False, "ALPHA"),
    "GangPendingPodsConditionPatch": GateSpec(True, "BETA"),
    "GenericEphemeralVolume": GateSpec(True, "GA"),
    "LazyReservationRestore": GateSpec(False, "ALPHA"),
    "MultiQuotaTree": GateSpec(False, "ALPHA"),
    "NodeMutatingWebhook": GateSpec(False, "ALPHA"),
    "NodeValidatingWebhook": GateSpec(False, "ALPHA"),
    "OmitNodeLabelsForReservation": GateSpec(False, "ALPHA"),
    "PodDisruptionBudget": GateSpec(True, "GA"),
    "PodMutatingWebhook": GateSpec(True, "BETA"),
    "PodValidatingWebhook": GateSpec(True, "BETA"),
    "PreemptionPolicyTransformer": GateSpec(False, "ALPHA"),
    "PriorityTransformer": GateSpec(False, "ALPHA"),
    "ReplaceResourcesTransformer": GateSpec(False, "ALPHA"),
    "ReservationMutatingWebhook": GateSpec(False, "ALPHA"),
    "ResizePod": GateSpec(False, "ALPHA"),
    "SkipFilterWithNominatedPods": GateSpec(False, "ALPHA"),
    "SkipReservationFitsNode": GateSpec(False, "ALPHA"),
    "SupportParentQuotaSubmitPod": GateSpec(False, "ALPHA"),
    "SyncBarrier": GateSpec(False, "ALPHA"),
    "ValidatePodDeviceResource": GateSpec(False, "ALPHA"),
    "WebhookFramework": GateSpec(True, "BETA"),
}
"""Koordinator's gates of koord-manager, koord-scheduler and koord-descheduler (commit a7a1b76b):
one Go package registers them all into the one global gate the three binaries parse."""

_ALL = {"AllAlpha": "ALPHA", "AllBeta": "BETA"}


def resolve_gates(text: str, known: Mapping[str, GateSpec], *, what: str = "feature gate") -> dict[str, bool]:
    """The gates ``text`` sets, by name: ``Name=bool`` pairs separated by commas, with ``AllAlpha``
    and ``AllBeta`` setting every gate of that stage not named explicitly (in any order, as
    component-base). Raises :class:`InvalidValue` naming an unknown gate or a bad value."""
    explicit: dict[str, bool] = {}
    stages: dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise InvalidValue(f"missing bool value for {echo(name)} in --feature-gates")
        value = _bool(name, raw.strip())
        if name in _ALL:
            stages[_ALL[name]] = value
        elif name in known:
            explicit[name] = value
        else:
            raise InvalidValue(f"unrecognized {what}: {echo(name)}")
    values = {name: stages[spec.stage] for name, spec in known.items() if spec.stage in stages}
    values.update(explicit)
    return values


def gate_notes(
    text: str, known: Mapping[str, GateSpec], honoured: Mapping[str, str], *, what: str
) -> list[str]:
    """One warning per gate ``text`` names explicitly that is Koordinator's but has no effect here
    (``honoured``: the gates that do); gates set only by ``AllAlpha``/``AllBeta`` are not named."""
    named = {part.partition("=")[0].strip() for part in text.split(",")}
    resolve_gates(text, known, what=what)
    return [
        f"--feature-gates: {what} {name} is Koordinator's and accepted, but not implemented here: no effect"
        for name in sorted(named & set(known))
        if name not in honoured
    ]


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
    """``--feature-gates``: ``Name=bool`` pairs separated by commas (empty: every default); any
    Koordinator gate is accepted (:func:`feature_gate_notes` names those without effect here)."""
    honoured = _gate_fields()
    values = resolve_gates(text, KOORDINATOR_GATES)
    return FeatureGates(**{honoured[name]: value for name, value in values.items() if name in honoured})


def feature_gate_notes(text: str) -> list[str]:
    """The warnings about the gates ``text`` names that are Koordinator's but not implemented here."""
    return gate_notes(text, KOORDINATOR_GATES, _gate_fields(), what="feature gate")


def _bool(name: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise InvalidValue(f"invalid value of {echo(name)}={echo(raw)}, err: expected a bool")
