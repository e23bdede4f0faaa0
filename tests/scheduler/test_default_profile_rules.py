"""The default profile keeps kube-scheduler's and Koordinator's ordering rules, one test per rule,
and stays what it was when it was listed by hand per extension point (``TODAYS_DEFAULT_PLUGINS``)."""

from __future__ import annotations

from scheduler.framework.profile import ExtensionPoint, PluginRef
from scheduler.plugins import DEFAULT_PLUGINS

EP = ExtensionPoint

TODAYS_DEFAULT_PLUGINS: dict[ExtensionPoint, tuple[PluginRef, ...]] = {
    EP.PRE_ENQUEUE: (PluginRef("SchedulingGates"), PluginRef("Coscheduling")),
    EP.QUEUE_SORT: (PluginRef("PrioritySort"),),
    EP.PRE_FILTER: tuple(
        PluginRef(name)
        for name in (
            "Reservation",
            "NodeResourcesFit",
            "NodeAffinity",
            "NodePorts",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "NodeNUMAResource",
            "DeviceShare",
            "ElasticQuota",
            "Coscheduling",
        )
    ),
    EP.FILTER: tuple(
        PluginRef(name)
        for name in (
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
        )
    ),
    EP.POST_FILTER: (PluginRef("Reservation"), PluginRef("Coscheduling"), PluginRef("DefaultPreemption")),
    EP.PRE_SCORE: (PluginRef("PodTopologySpread"), PluginRef("InterPodAffinity"), PluginRef("Reservation")),
    EP.SCORE: (
        PluginRef("NodeResourcesFit", 1),
        PluginRef("NodeAffinity", 2),
        PluginRef("TaintToleration", 3),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
        PluginRef("NodeNUMAResource", 1),
        PluginRef("DeviceShare", 1),
        PluginRef("Reservation", 5000),
    ),
    EP.RESERVE: tuple(
        PluginRef(name)
        for name in (
            "VolumeBinding",
            "NodeNUMAResource",
            "DeviceShare",
            "Reservation",
            "Coscheduling",
            "ElasticQuota",
        )
    ),
    EP.PERMIT: (PluginRef("Coscheduling"),),
    EP.PRE_BIND: tuple(
        PluginRef(name)
        for name in ("VolumeBinding", "NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling")
    ),
    EP.BIND: (PluginRef("Reservation"), PluginRef("DefaultBinder")),
    EP.POST_BIND: (PluginRef("Coscheduling"),),
}
"""``DEFAULT_PLUGINS`` as scheduler/plugins/__init__.py listed it per extension point before it was
derived from what each plugin implements."""

KUBE_SCHEDULER_V1_ORDER = (
    "SchedulingGates",
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "DefaultPreemption",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "DefaultBinder",
)
"""kube-scheduler v1.35's getDefaultPlugins (multiPoint, DynamicResources added by its feature gate),
in its order."""

VOLUME_PLUGINS = ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone")


def names(point: ExtensionPoint) -> list[str]:
    return [ref.name for ref in DEFAULT_PLUGINS.get(point, ())]


def test_the_derived_default_profile_is_the_one_listed_by_hand() -> None:
    assert DEFAULT_PLUGINS == TODAYS_DEFAULT_PLUGINS


def test_rule_reservation_runs_first_at_pre_filter() -> None:
    """It restores reserved room before any plugin (a gang's plan) reads it."""
    assert names(EP.PRE_FILTER)[0] == "Reservation"


def test_rule_elastic_quota_runs_before_coscheduling_at_pre_filter() -> None:
    """A gang over its quota is rejected with the quota's reason before its placement is planned."""
    at = names(EP.PRE_FILTER)
    assert at.index("ElasticQuota") < at.index("Coscheduling")


def test_rule_node_numa_resource_runs_before_device_share_wherever_both_run() -> None:
    """NodeNUMAResource admits the NUMA nodes DeviceShare then takes cards on (Koordinator's shipped
    profile runs both at PreFilter, Filter, Score, Reserve and PreBind)."""
    both = [point for point in EP if {"NodeNUMAResource", "DeviceShare"} <= set(names(point))]
    out_of_order = [
        point for point in both if names(point).index("NodeNUMAResource") > names(point).index("DeviceShare")
    ]
    assert (both, out_of_order) == ([EP.PRE_FILTER, EP.FILTER, EP.SCORE, EP.RESERVE, EP.PRE_BIND], [])


def test_rule_volume_binding_reserves_and_prebinds_before_the_gang_plugins() -> None:
    """Volumes are reserved and bound before Reservation, Coscheduling and ElasticQuota act."""
    assert [names(EP.RESERVE)[0], names(EP.PRE_BIND)[0]] == ["VolumeBinding", "VolumeBinding"]


def test_rule_reservations_binder_runs_before_default_binder() -> None:
    """Reservation binds a pod that takes a reservation; DefaultBinder binds the rest."""
    assert names(EP.BIND) == ["Reservation", "DefaultBinder"]


def test_rule_in_tree_filters_run_in_kube_scheduler_v1_order() -> None:
    """A node is counted for the first Filter that rejects it: the same first as kube-scheduler's."""
    in_tree = [name for name in names(EP.FILTER) if name in KUBE_SCHEDULER_V1_ORDER]
    assert in_tree == [name for name in KUBE_SCHEDULER_V1_ORDER if name in in_tree]


def test_rule_volume_plugins_run_in_kube_scheduler_order_at_pre_filter_and_filter() -> None:
    volumes = {
        point: [n for n in names(point) if n in VOLUME_PLUGINS] for point in (EP.PRE_FILTER, EP.FILTER)
    }
    assert volumes == {EP.PRE_FILTER: list(VOLUME_PLUGINS), EP.FILTER: list(VOLUME_PLUGINS)}


def test_rule_default_score_weights_are_kube_schedulers_and_koordinators() -> None:
    """kube-scheduler v1's default weights; Koordinator's shipped profile's for its plugins
    (Reservation's 5000: a reserved node wins)."""
    weights = {ref.name: ref.weight for ref in DEFAULT_PLUGINS[EP.SCORE]}
    assert weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
        "NodeNUMAResource": 1,
        "DeviceShare": 1,
        "Reservation": 5000,
    }


def test_rule_scheduling_gates_run_first_at_pre_enqueue() -> None:
    """A gated pod waits before any other plugin looks at it, as in kube-scheduler."""
    assert names(EP.PRE_ENQUEUE)[0] == "SchedulingGates"


def test_rule_one_queue_sort_plugin() -> None:
    """Only one QueueSort plugin is enabled per scheduler."""
    assert names(EP.QUEUE_SORT) == ["PrioritySort"]


def test_rule_configuration_only_plugins_are_off_by_default() -> None:
    """Enabled only by configuration, as in Koordinator: LoadAwareScheduling (it refuses nodes
    koordlet has not reported yet), NodeResourcesFitPlus, ScarceResourceAvoidance, SchedulingHint,
    DefaultPreBind."""
    enabled = {name for point in EP for name in names(point)}
    configuration_only = {
        "LoadAwareScheduling",
        "NodeResourcesFitPlus",
        "ScarceResourceAvoidance",
        "SchedulingHint",
        "DefaultPreBind",
    }
    assert enabled & configuration_only == set()


def test_rule_default_preemption_runs_last_at_post_filter() -> None:
    """A pod of no gang preempts as kube-scheduler's default profile has it preempt, after the
    job-level preemption plugins, in the order Koordinator's shipped profile gives PostFilter."""
    assert names(EP.POST_FILTER)[-1] == "DefaultPreemption"


def test_rule_quota_preemption_and_gang_scores_are_off_by_default() -> None:
    """ElasticQuota's PostFilter (quota preemption) and Coscheduling's PreScore/Score are what
    Koordinator's shipped profile adds; by default preemption is Coscheduling's job-level one."""
    assert [
        "ElasticQuota" in names(EP.POST_FILTER),
        "Coscheduling" in names(EP.PRE_SCORE),
        "Coscheduling" in names(EP.SCORE),
        "Coscheduling" in names(EP.POST_FILTER),
    ] == [False, False, False, True]
