"""Device-plugin adaptation (feature gate ``DevicePluginAdaption``): what vendors' device plugins read.

koord-scheduler names the cards; the vendor's device plugin on the node must then hand exactly those
to the container. It cannot see the ``device-allocated`` annotation in its own format, so at PreBind
Koordinator also writes (``device_plugin_adapter.go``):

- every pod: ``scheduling.koordinator.sh/bind-timestamp`` (unix nanoseconds);
- every GPU pod: ``scheduling.koordinator.sh/gpu-minors`` (``0,1``) and, for a pod labelled
  ``koordinator.sh/gpu-isolation-provider: HAMi-core``, the label ``hami.io/vgpu-node: <node>``;
- Huawei (the Device's ``gpu-vendor: huawei``): ``predicate-time`` (unix nanoseconds) and
  ``huawei.com/npu-core``: ``<minor>-<template>`` for a vNPU, the minors for whole NPUs;
  ``huawei.com/Ascend310P`` (``Ascend310P-<minor>,...``) on the Ascend-310P3-300I-DUO;
- Cambricon: ``CAMBRICON_DSMLU_ASSIGHED: "false"`` and ``CAMBRICON_DSMLU_PROFILE:
  <minor>_<gpu-core>_<memory in 256 MiB units>`` for one card (several cards are refused, as
  Koordinator does: "multiple gpu share is not supported on device side"), and a node lock
  ``cambricon.com/dsmlu.lock: <RFC3339>,<namespace>,<name>`` that the device plugin removes; a lock
  younger than five minutes fails the bind (the pod is retried), an older one is taken over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from apis.extension.device import (
    ANNOTATION_BIND_TIMESTAMP,
    ANNOTATION_CAMBRICON_DSMLU_ASSIGNED,
    ANNOTATION_CAMBRICON_DSMLU_LOCK,
    ANNOTATION_CAMBRICON_DSMLU_PROFILE,
    ANNOTATION_GPU_MINORS,
    ANNOTATION_HUAWEI_ASCEND_310P,
    ANNOTATION_HUAWEI_NPU_CORE,
    ANNOTATION_PREDICATE_TIME,
    GPU_ISOLATION_PROVIDER_HAMI_CORE,
    GPU_VENDOR_CAMBRICON,
    GPU_VENDOR_HUAWEI,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_HAMI_VGPU_NODE,
)
from scheduler.plugins.device_share.allocator import Allocation

__all__ = [
    "ASCEND_310P_DUO",
    "CAMBRICON_VMEMORY_UNIT",
    "NODE_LOCK_TIMEOUT",
    "Adaptation",
    "BindContext",
    "adapt",
]

CAMBRICON_VMEMORY_UNIT = 256 * 2**20
"""The smallest dynamic-sMLU memory unit (the device plugin's ``min-dsmlu-unit``)."""
NODE_LOCK_TIMEOUT = timedelta(minutes=5)
ASCEND_310P_DUO = "Ascend-310P3-300I-DUO"


@dataclass(frozen=True, slots=True)
class Adaptation:
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    node_annotations: dict[str, str] = field(default_factory=dict)
    """Set on the node (the vendor's lock)."""


@dataclass(frozen=True, slots=True)
class BindContext:
    namespace: str
    name: str
    pod_labels: Mapping[str, str]
    node: str
    node_annotations: Mapping[str, str]
    vendor: str | None
    model: str | None
    now: datetime


def _minors(allocations: Sequence[Allocation]) -> str:
    return ",".join(str(a.minor) for a in allocations)


def _lock(ctx: BindContext, key: str) -> dict[str, str] | str:
    held = ctx.node_annotations.get(key)
    if held is not None:
        try:
            since = datetime.fromisoformat(held.split(",")[0])
        except ValueError as exc:
            return f"node {ctx.node!r} lock {key}: {exc}"
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        if ctx.now - since <= NODE_LOCK_TIMEOUT:
            return f"node {ctx.node!r} has been locked"
    stamp = ctx.now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {key: f"{stamp},{ctx.namespace},{ctx.name}"}


def _cambricon(ctx: BindContext, allocations: Sequence[Allocation], out: Adaptation) -> str | None:
    if len(allocations) > 1:
        return "multiple gpu share is not supported on device side"
    usage = allocations[0].usage
    if usage.memory < CAMBRICON_VMEMORY_UNIT:
        return f"gpu memory must not be less than {CAMBRICON_VMEMORY_UNIT} bytes"
    lock = _lock(ctx, ANNOTATION_CAMBRICON_DSMLU_LOCK)
    if isinstance(lock, str):
        return f"failed to lock node: {lock}"
    out.node_annotations.update(lock)
    out.annotations[ANNOTATION_CAMBRICON_DSMLU_ASSIGNED] = "false"
    vmemory = usage.memory // CAMBRICON_VMEMORY_UNIT
    out.annotations[ANNOTATION_CAMBRICON_DSMLU_PROFILE] = f"{allocations[0].minor}_{usage.core}_{vmemory}"
    return None


def adapt(ctx: BindContext, allocations: Sequence[Allocation], template: str | None) -> Adaptation | str:
    """What to write for the pod bound with GPU ``allocations`` (none: only the timestamp), or why
    the bind must fail."""
    nanos = str(int(ctx.now.timestamp() * 1_000_000_000))
    out = Adaptation(annotations={ANNOTATION_BIND_TIMESTAMP: nanos})
    if not allocations:
        return out
    out.annotations[ANNOTATION_GPU_MINORS] = _minors(allocations)
    if ctx.pod_labels.get(LABEL_GPU_ISOLATION_PROVIDER) == GPU_ISOLATION_PROVIDER_HAMI_CORE:
        out.labels[LABEL_HAMI_VGPU_NODE] = ctx.node
    if ctx.vendor == GPU_VENDOR_HUAWEI:
        out.annotations[ANNOTATION_PREDICATE_TIME] = nanos
        if template:
            out.annotations[ANNOTATION_HUAWEI_NPU_CORE] = f"{allocations[0].minor}-{template}"
        else:
            out.annotations[ANNOTATION_HUAWEI_NPU_CORE] = _minors(allocations)
        if ctx.model == ASCEND_310P_DUO:
            out.annotations[ANNOTATION_HUAWEI_ASCEND_310P] = ",".join(
                f"Ascend310P-{a.minor}" for a in allocations
            )
    elif ctx.vendor == GPU_VENDOR_CAMBRICON:
        refused = _cambricon(ctx, allocations, out)
        if refused is not None:
            return refused
    return out
