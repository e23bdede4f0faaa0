"""koord-scheduler's plugins, one module (or package) each, and the default set a profile gets.

Each plugin module declares itself once, as ``PLUGIN = PluginSpec(...)`` (its name, factory, args
model and RBAC). ``PLUGIN_MODULES`` lists the modules: ``DEFAULT_REGISTRY`` (every plugin a
profile may enable, kube-scheduler's ``default_registry.go``) is built from it, and so are the
chart's RBAC (``make rbac``) and ``.importlinter``'s plugins-independent contract
(``make import-contracts``).

``DEFAULT_PROFILE`` is what a profile with no ``plugins`` section runs: each plugin there runs at
every extension point it implements (``scheduler.framework.default_profile``), in the profile's
order, with kube-scheduler's default score weights, except at the points given an explicit order
below. ``tests/scheduler/test_default_profile_rules.py`` asserts each ordering rule by name, and
that ``DEFAULT_PLUGINS`` stays what it was when it was listed per extension point.

A pod of no gang preempts with DefaultPreemption (kube-scheduler's pod-level preemption), last at
PostFilter; gangs with Coscheduling's job-level preemption (``enablePreemption``), which also asks
ElasticQuota what a rejected job's quota must free. Registered but enabled only by configuration,
as Koordinator's shipped profile enables them: ElasticQuota's PostFilter (quota preemption),
SchedulingHint, Coscheduling's PreScore/Score and DefaultPreBind. NodeResourcesFitPlus and
ScarceResourceAvoidance are, as in Koordinator, enabled only by configuration. LoadAwareScheduling
too: Koordinator's shipped profile enables it, but it refuses every node whose NodeMetric has not
been reported yet (koord-manager creates one per node), so a cluster without koordlet on every node
would place nothing (docs/load-aware.md). NodeNUMAResource runs where Koordinator's shipped profile
runs it; on nodes without a NodeResourceTopology or NUMA labels it passes every pod that asks for
no cpuset and scores 0.
"""

from __future__ import annotations

from types import ModuleType

from scheduler.framework.default_profile import DefaultPlugin, default_plugins
from scheduler.framework.profile import ExtensionPoint
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

__all__ = ["DEFAULT_PLUGINS", "DEFAULT_PROFILE", "DEFAULT_REGISTRY", "PLUGIN_MODULES"]

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

# Their Score computes what their PreScore would when PreScore did not run; PreScore is there for
# configurations that enable them by multiPoint, as kube-scheduler's.
_SCORE_WITHOUT_PRE_SCORE = frozenset({ExtensionPoint.PRE_SCORE})

DEFAULT_PROFILE: tuple[DefaultPlugin, ...] = (
    # kube-scheduler v1.35's defaults, in its order (getDefaultPlugins, with DynamicResources where
    # its feature gate puts it), with its score weights
    DefaultPlugin(scheduling_gates.NAME),
    DefaultPlugin(queue_sort.NAME),
    DefaultPlugin(node_unschedulable.NAME),
    DefaultPlugin(node_name.NAME),
    DefaultPlugin(taint_toleration.NAME, weight=3, left_off=_SCORE_WITHOUT_PRE_SCORE),
    DefaultPlugin(node_affinity.NAME, weight=2, left_off=_SCORE_WITHOUT_PRE_SCORE),
    DefaultPlugin(node_ports.NAME),
    DefaultPlugin(node_resources_fit.NAME, left_off=_SCORE_WITHOUT_PRE_SCORE),
    DefaultPlugin(volume_restrictions.NAME),
    DefaultPlugin(node_volume_limits.NAME),
    DefaultPlugin(volume_binding.NAME),  # it also reserves and binds volumes, before the gang plugins
    DefaultPlugin(volume_zone.NAME),
    DefaultPlugin(pod_topology_spread.NAME, weight=2),
    DefaultPlugin(inter_pod_affinity.NAME, weight=2),
    DefaultPlugin(dynamic_resources.NAME),
    DefaultPlugin(node_resources_balanced_allocation.NAME, left_off=_SCORE_WITHOUT_PRE_SCORE),
    DefaultPlugin(image_locality.NAME),
    # Koordinator's, where its shipped profile runs them: NodeNUMAResource before DeviceShare (it
    # admits the NUMA nodes DeviceShare then takes cards on), then Reservation (weight 5000: a
    # reserved node wins), the gang plugins last
    DefaultPlugin(node_numa_resource.NAME),
    DefaultPlugin(device_share.NAME),
    DefaultPlugin(reservation.NAME, weight=5000),
    DefaultPlugin(coscheduling.NAME, left_off=frozenset({ExtensionPoint.PRE_SCORE, ExtensionPoint.SCORE})),
    DefaultPlugin(elastic_quota.NAME, left_off=frozenset({ExtensionPoint.POST_FILTER})),
    # kube-scheduler's pod-level preemption for a pod of no gang, after the job-level preemption
    # plugins, as Koordinator's shipped profile orders PostFilter
    DefaultPlugin(default_preemption.NAME),
    # last, as in kube-scheduler: Reservation binds a pod that takes a reservation, DefaultBinder the rest
    DefaultPlugin(default_binder.NAME),
)

_ORDERS: dict[ExtensionPoint, tuple[str, ...]] = {
    # Reservation first: it restores reserved room before any plugin (a gang's plan) reads it.
    # ElasticQuota before Coscheduling: a gang over its quota is rejected with the quota's reason
    # before its placement is planned. NodeResourcesFit before NodeAffinity and NodePorts, where
    # kube-scheduler v1 runs it after them.
    ExtensionPoint.PRE_FILTER: (
        reservation.NAME,
        node_resources_fit.NAME,
        node_affinity.NAME,
        node_ports.NAME,
        volume_restrictions.NAME,
        node_volume_limits.NAME,
        volume_binding.NAME,
        volume_zone.NAME,
        pod_topology_spread.NAME,
        inter_pod_affinity.NAME,
        dynamic_resources.NAME,
        node_numa_resource.NAME,
        device_share.NAME,
        elastic_quota.NAME,
        coscheduling.NAME,
    ),
    # The order of the debug scores' columns (scores add up in any order).
    ExtensionPoint.SCORE: (
        node_resources_fit.NAME,
        node_affinity.NAME,
        taint_toleration.NAME,
        pod_topology_spread.NAME,
        inter_pod_affinity.NAME,
        node_resources_balanced_allocation.NAME,
        image_locality.NAME,
        node_numa_resource.NAME,
        device_share.NAME,
        reservation.NAME,
    ),
}

DEFAULT_PLUGINS = default_plugins(DEFAULT_REGISTRY, DEFAULT_PROFILE, _ORDERS)
