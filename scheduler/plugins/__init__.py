"""koord-scheduler's plugins, one module each, and the default set a profile gets.

Each plugin module declares itself once, as ``PLUGIN = PluginSpec(...)`` (its name, factory, args
model and RBAC); ``PLUGIN_MODULES`` lists the modules, and ``DEFAULT_REGISTRY``, every plugin a
profile may enable (kube-scheduler's ``default_registry.go``), is built from it.
``DEFAULT_PLUGINS`` is what a profile with no ``plugins`` section runs, with kube-scheduler's
default score weights. ElasticQuota runs at PreFilter (before Coscheduling, so that a
gang over its quota is rejected with the quota's reason before its placement is planned) and
Reserve. Its PostFilter (Koordinator's quota preemption) and DefaultPreemption (kube-scheduler's
pod-level preemption) are enabled only by configuration, as Koordinator's shipped profile enables
them: by default, preemption is Coscheduling's job-level preemption (``enablePreemption``), which
also asks ElasticQuota what a rejected job's quota must free. SchedulingHint, Coscheduling's
PreScore/Score and DefaultPreBind are likewise what Koordinator's shipped profile adds.
NodeResourcesFitPlus and ScarceResourceAvoidance are registered but, as in Koordinator, enabled
only by configuration. The volume plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding,
VolumeZone) run in kube-scheduler's order; VolumeBinding also reserves and binds volumes, before
the gang plugins do. NodeNUMAResource runs where Koordinator's shipped profile runs it (PreFilter,
Filter, Score with weight 1, Reserve and PreBind, each before DeviceShare, whose GPUs it aligns on
NUMA nodes); on nodes without a NodeResourceTopology or NUMA labels it passes every pod that asks
for no cpuset and scores 0. Reservation runs first at PreFilter (it restores reserved room before any
plugin reads it) and binds reservations before DefaultBinder. LoadAwareScheduling is registered
but enabled only by configuration: Koordinator's shipped profile enables it, but it refuses every
node whose NodeMetric has not been reported yet (koord-manager creates one per node), so a cluster
without koordlet on every node would place nothing (docs/load-aware.md).
"""

from __future__ import annotations

from types import ModuleType

from scheduler.framework.profile import ExtensionPoint, PluginRef
from scheduler.framework.registry import Registry, declared_plugin
from scheduler.plugins import (
    coscheduling,
    default_binder,
    default_prebind,
    default_preemption,
    device_share,
    dynamic_resources,
    elastic_quota,
    image_locality,
    inter_pod_affinity,
    load_aware,
    node_affinity,
    node_name,
    node_numa_resource,
    node_ports,
    node_resources_balanced_allocation,
    node_resources_fit,
    node_resources_fit_plus,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    queue_sort,
    reservation,
    scarce_resource_avoidance,
    scheduling_gates,
    scheduling_hint,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)

__all__ = ["DEFAULT_PLUGINS", "DEFAULT_REGISTRY", "PLUGIN_MODULES"]

PLUGIN_MODULES: tuple[ModuleType, ...] = (
    queue_sort,
    node_resources_fit,
    node_resources_fit_plus,
    scarce_resource_avoidance,
    node_name,
    node_unschedulable,
    node_affinity,
    taint_toleration,
    inter_pod_affinity,
    default_binder,
    scheduling_gates,
    dynamic_resources,
    coscheduling,
    elastic_quota,
    node_ports,
    reservation,
    node_resources_balanced_allocation,
    image_locality,
    volume_restrictions,
    node_volume_limits,
    volume_binding,
    volume_zone,
    pod_topology_spread,
    load_aware,
    device_share,
    node_numa_resource,
    scheduling_hint,
    default_preemption,
    default_prebind,
)
"""Every plugin module; adding a plugin is adding its module here."""

DEFAULT_REGISTRY = Registry(declared_plugin(module) for module in PLUGIN_MODULES)

_VOLUME_FILTERS = tuple(
    PluginRef(name)
    for name in (volume_restrictions.NAME, node_volume_limits.NAME, volume_binding.NAME, volume_zone.NAME)
)
"""kube-scheduler's volume plugins, in its order, at PreFilter and at Filter."""

DEFAULT_PLUGINS: dict[ExtensionPoint, tuple[PluginRef, ...]] = {
    ExtensionPoint.PRE_ENQUEUE: (PluginRef(scheduling_gates.NAME), PluginRef(coscheduling.NAME)),
    ExtensionPoint.QUEUE_SORT: (PluginRef(queue_sort.NAME),),
    ExtensionPoint.PRE_FILTER: (
        PluginRef(reservation.NAME),
        PluginRef(node_resources_fit.NAME),
        PluginRef(node_affinity.NAME),
        PluginRef(node_ports.NAME),
        *_VOLUME_FILTERS,
        PluginRef(pod_topology_spread.NAME),
        PluginRef(inter_pod_affinity.NAME),
        PluginRef(dynamic_resources.NAME),
        PluginRef(node_numa_resource.NAME),
        PluginRef(device_share.NAME),
        PluginRef(elastic_quota.NAME),
        PluginRef(coscheduling.NAME),
    ),
    ExtensionPoint.POST_FILTER: (PluginRef(reservation.NAME), PluginRef(coscheduling.NAME)),
    ExtensionPoint.RESERVE: (
        PluginRef(volume_binding.NAME),
        PluginRef(node_numa_resource.NAME),
        PluginRef(device_share.NAME),
        PluginRef(reservation.NAME),
        PluginRef(coscheduling.NAME),
        PluginRef(elastic_quota.NAME),
    ),
    ExtensionPoint.PERMIT: (PluginRef(coscheduling.NAME),),
    ExtensionPoint.PRE_BIND: (
        PluginRef(volume_binding.NAME),
        PluginRef(node_numa_resource.NAME),
        PluginRef(device_share.NAME),
        PluginRef(reservation.NAME),
        PluginRef(coscheduling.NAME),
    ),
    ExtensionPoint.POST_BIND: (PluginRef(coscheduling.NAME),),
    ExtensionPoint.FILTER: (
        PluginRef(node_unschedulable.NAME),
        PluginRef(node_name.NAME),
        PluginRef(taint_toleration.NAME),
        PluginRef(node_affinity.NAME),
        PluginRef(node_ports.NAME),
        PluginRef(node_resources_fit.NAME),
        *_VOLUME_FILTERS,
        PluginRef(pod_topology_spread.NAME),
        PluginRef(inter_pod_affinity.NAME),
        PluginRef(node_numa_resource.NAME),
        PluginRef(device_share.NAME),
        PluginRef(reservation.NAME),
    ),
    ExtensionPoint.PRE_SCORE: (
        PluginRef(pod_topology_spread.NAME),
        PluginRef(inter_pod_affinity.NAME),
        PluginRef(reservation.NAME),
    ),
    ExtensionPoint.SCORE: (
        PluginRef(node_resources_fit.NAME, weight=1),
        PluginRef(node_affinity.NAME, weight=2),
        PluginRef(taint_toleration.NAME, weight=3),
        PluginRef(pod_topology_spread.NAME, weight=2),
        PluginRef(inter_pod_affinity.NAME, weight=2),
        PluginRef(node_resources_balanced_allocation.NAME, weight=1),
        PluginRef(image_locality.NAME, weight=1),
        PluginRef(node_numa_resource.NAME, weight=1),
        PluginRef(device_share.NAME, weight=1),
        PluginRef(reservation.NAME, weight=5000),
    ),
    ExtensionPoint.BIND: (PluginRef(reservation.NAME), PluginRef(default_binder.NAME)),
}
