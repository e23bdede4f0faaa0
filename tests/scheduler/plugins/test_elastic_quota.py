"""The ElasticQuota plugin over the memory backend: pod -> quota mapping, runtime admission, borrowing,
non-preemptible pods, whole gangs, multi-tree node restriction, Reserve, the figures written back,
and the API job-level preemption uses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.client.backend import (
    ELASTICQUOTAPROFILES,
    ELASTICQUOTAS,
    PODS,
    EventType,
    ResourceType,
    WatchEvent,
)
from apis.core import Node, Pod
from apis.features import FeatureGates
from apis.quantity import Quantity
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota as ElasticQuotaObject
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.elastic_quota import ElasticQuota, ElasticQuotaArgs
from tests.scheduler.builders import make_cache, make_node, make_pod

Q = "quota.scheduling.koordinator.sh/"


def quota(
    name: str,
    namespace: str = "default",
    *,
    min: dict[str, str] | None = None,
    max: dict[str, str] | None = None,
    parent: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> ElasticQuotaObject:
    all_labels = dict(labels or {})
    if parent:
        all_labels[Q + "parent"] = parent
    spec: dict[str, Any] = {}
    if min is not None:
        spec["min"] = min
    if max is not None:
        spec["max"] = max
    return ElasticQuotaObject.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": all_labels,
                "annotations": annotations or {},
            },
            "spec": spec,
        }
    )


class World:
    """A cache with nodes, a memory backend holding the quota objects, and the plugin fed by events."""

    def __init__(self, nodes: list[Node] | None = None, args: ElasticQuotaArgs | None = None) -> None:
        self.cache: Cache = make_cache(nodes or [make_node("n1").alloc(cpu="64", memory="256Gi").obj()])
        self.backend = MemoryBackend()
        self.handle = Handle(backend=self.backend, snapshot=lambda: Snapshot(self.cache))
        self.plugin = ElasticQuota(args or ElasticQuotaArgs(), self.handle)
        for resource in (ELASTICQUOTAS, ELASTICQUOTAPROFILES, PODS):
            self.feed(resource, WatchEvent(EventType.REPLACED, objects=()))

    def feed(self, resource: ResourceType[Any], event: WatchEvent[Any]) -> None:
        for callback in self.handle.informers.listeners(resource):
            callback(event)

    def quotas(self, *quotas: ElasticQuotaObject) -> None:
        for q in quotas:
            stored = self.backend.apply(ELASTICQUOTAS, q)
            self.feed(ELASTICQUOTAS, WatchEvent(EventType.ADDED, obj=stored))

    def profile(self, profile: dict[str, Any]) -> None:
        self.feed(
            ELASTICQUOTAPROFILES, WatchEvent(EventType.ADDED, obj=ElasticQuotaProfile.model_validate(profile))
        )

    def pod(self, pod: Pod) -> PodInfo:
        self.feed(PODS, WatchEvent(EventType.ADDED, obj=pod))
        info = PodInfo.of(pod)
        if pod.spec.node_name:
            self.cache.upsert_pod(info)
        return info

    def pre_filter(self, pod: PodInfo) -> tuple[Code, str, frozenset[str] | None]:
        result = self.plugin.pre_filter(CycleState(), pod, Snapshot(self.cache))
        return result.status.code, result.status.message(), result.node_names


def pod(name: str, cpu: str, namespace: str = "default", **labels: str) -> Any:
    builder = make_pod(name).namespace(namespace).req(cpu=cpu)
    builder._spec["schedulerName"] = "koord-scheduler"
    for key, value in labels.items():
        builder.label(key, value)
    return builder


def test_a_pod_with_no_quota_objects_is_admitted_everywhere() -> None:
    world = World()
    assert world.pre_filter(world.pod(pod("p", "60").obj())) == (Code.SUCCESS, "", None)
    assert world.plugin.quota_of(PodInfo.of(pod("p", "1").obj())) == "koordinator-default-quota"


def test_pods_map_to_quotas_in_koordinators_order() -> None:
    world = World()
    world.quotas(
        quota("team-a", "team-a", max={"cpu": "8"}),
        quota("shared", "other", max={"cpu": "8"}, annotations={Q + "namespaces": '["team-b"]'}),
        quota("labelled", "other", max={"cpu": "8"}),
    )
    quota_of = world.plugin.quota_of
    assert quota_of(PodInfo.of(pod("p", "1", "team-a").obj())) == "team-a"
    assert quota_of(PodInfo.of(pod("p", "1", "team-b").obj())) == "shared"
    assert quota_of(PodInfo.of(pod("p", "1", "team-a", **{Q + "name": "labelled"}).obj())) == "labelled"
    assert quota_of(PodInfo.of(pod("p", "1", "team-a", **{Q + "name": "nope"}).obj())) == (
        "koordinator-default-quota"
    )
    assert quota_of(PodInfo.of(pod("p", "1", "team-c").obj())) == "koordinator-default-quota"


def test_a_pod_beyond_the_runtime_is_rejected_naming_quota_and_resource() -> None:
    world = World()
    world.quotas(quota("team-a", "team-a", min={"cpu": "8"}, max={"cpu": "8"}))
    world.pod(pod("a1", "6", "team-a").on("n1").obj())
    code, message, _ = world.pre_filter(world.pod(pod("a2", "4", "team-a").obj()))
    assert code == Code.UNSCHEDULABLE
    assert message == (
        "Insufficient quotas: quota team-a cpu used 6 + request 4 > runtime 8 (Insufficient quotas, "
        "quotaName: team-a, runtime: cpu:8, used: cpu:6, pod's request: cpu:4, exceedDimensions: [cpu])"
    )
    assert world.pre_filter(world.pod(pod("a3", "2", "team-a").obj()))[0] == Code.SUCCESS


def test_runtime_quota_off_checks_against_max() -> None:
    world = World(args=ElasticQuotaArgs(enable_runtime_quota=False))
    world.quotas(quota("team-a", "team-a", max={"cpu": "8"}))
    world.pod(pod("a1", "6", "team-a").on("n1").obj())
    _, message, _ = world.pre_filter(world.pod(pod("a2", "4", "team-a").obj()))
    # Koordinator names the limit "runtime" in its part whichever limit is checked.
    assert message == (
        "Insufficient quotas: quota team-a cpu used 6 + request 4 > max 8 (Insufficient quotas, "
        "quotaName: team-a, runtime: cpu:8, used: cpu:6, pod's request: cpu:4, exceedDimensions: [cpu])"
    )


def test_the_message_names_every_exceeded_dimension_as_koordinator_does() -> None:
    world = World()
    limits = {"cpu": "4", "memory": "8Gi", "pods": "10"}
    world.quotas(quota("team-a", "team-a", min=limits, max=limits))
    first = make_pod("a1").namespace("team-a").req(cpu="3", memory="6Gi").on("n1")
    world.pod(first.obj())
    second = make_pod("a2").namespace("team-a").req(cpu="2", memory="4Gi")
    second._spec["schedulerName"] = "koord-scheduler"
    _, message, _ = world.pre_filter(world.pod(second.obj()))
    assert message == (
        "Insufficient quotas: quota team-a cpu used 3 + request 2 > runtime 4 (Insufficient quotas, "
        "quotaName: team-a, runtime: cpu:4,memory:8Gi,pods:2, used: cpu:3,memory:6Gi,pods:1, "
        "pod's request: cpu:2,memory:4Gi,pods:1, exceedDimensions: [cpu memory])"
    )


def test_a_full_parent_is_named_with_koordinators_quota_name_topology() -> None:
    world = World(args=ElasticQuotaArgs(enable_check_parent_quota=True, enable_runtime_quota=False))
    world.quotas(
        quota("p", "default", min={"cpu": "4"}, max={"cpu": "4"}, labels={Q + "is-parent": "true"}),
        quota("a", "a", min={"cpu": "4"}, max={"cpu": "8"}, parent="p"),
    )
    world.pod(pod("a1", "4", "a").on("n1").obj())
    _, message, _ = world.pre_filter(world.pod(pod("a2", "1", "a").obj()))
    assert message == (
        "Insufficient quotas: parent quota p cpu used 4 + request 1 > max 4 "
        "(Insufficient quotas, quotaNameTopo: [p a], runtime: cpu:4, used: cpu:4, "
        "pod's request: cpu:1, exceedDimensions: [cpu])"
    )


def borrowing_world(lender_lends: bool) -> World:
    """Parent P (min = max = 8 cpu) with A and B (min 4, max 8 each); B runs 2 x 2 cpu."""
    world = World()
    lends = {} if lender_lends else {Q + "allow-lent-resource": "false"}
    world.quotas(
        quota("p", "default", min={"cpu": "8"}, max={"cpu": "8"}, labels={Q + "is-parent": "true"}),
        quota("a", "a", min={"cpu": "4"}, max={"cpu": "8"}, parent="p", labels=lends),
        quota("b", "b", min={"cpu": "4"}, max={"cpu": "8"}, parent="p"),
    )
    world.pod(pod("b1", "2", "b").on("n1").obj())
    world.pod(pod("b2", "2", "b").on("n1").obj())
    return world


def test_a_tenant_borrows_the_idle_min_of_another() -> None:
    world = borrowing_world(lender_lends=True)
    assert world.pre_filter(world.pod(pod("b3", "2", "b").obj()))[0] == Code.SUCCESS
    assert world.plugin.quota_figures()["b"].runtime == {"cpu": 6000}


def test_a_quota_that_does_not_lend_keeps_its_min_from_borrowers() -> None:
    world = borrowing_world(lender_lends=False)
    code, message, _ = world.pre_filter(world.pod(pod("b3", "2", "b").obj()))
    assert code == Code.UNSCHEDULABLE
    assert message.startswith("Insufficient quotas: quota b cpu used 4 + request 2 > runtime 4 (")
    assert world.plugin.quota_figures()["a"].runtime == {"cpu": 4000}


def test_non_preemptible_pods_are_limited_to_min() -> None:
    world = World()
    world.quotas(quota("q", "q", min={"cpu": "2"}, max={"cpu": "8"}))
    keep = {Q + "preemptible": "false"}
    world.pod(pod("np1", "2", "q", **keep).on("n1").obj())
    code, message, _ = world.pre_filter(world.pod(pod("np2", "2", "q", **keep).obj()))
    assert code == Code.UNSCHEDULABLE
    assert message == (
        "Insufficient non-preemptible quotas: quota q cpu non-preemptible used 2 + request 2 > min 2 "
        "(Insufficient non-preemptible quotas, quotaName: q, min: cpu:2, nonPreemptibleUsed: cpu:2, "
        "pod's request: cpu:2, exceedDimensions: [cpu])"
    )
    assert world.pre_filter(world.pod(pod("p3", "2", "q").obj()))[0] == Code.SUCCESS


def gang_member(name: str, cpu: str, gang: str) -> Pod:
    builder = pod(name, cpu, "g")
    builder._meta.setdefault("annotations", {}).update(
        {"gang.scheduling.koordinator.sh/name": gang, "gang.scheduling.koordinator.sh/min-available": "1"}
    )
    return builder.obj()  # type: ignore[no-any-return]


def test_a_gang_is_admitted_as_a_whole_or_not_at_all() -> None:
    world = World()
    world.quotas(quota("g", "g", min={"cpu": "4"}, max={"cpu": "4"}))
    members = [world.pod(gang_member(f"big-{i}", "2", "big")) for i in range(3)]
    for member in members:
        code, message, _ = world.pre_filter(member)
        assert code == Code.UNSCHEDULABLE
        assert message == (
            "Insufficient quotas: quota g cpu used 0 + request 6 of gang g/big (3 pending members) "
            "> runtime 4 (Insufficient quotas, quotaName: g, runtime: cpu:4, used: cpu:0, "
            "pod's request: cpu:6, exceedDimensions: [cpu])"
        )
    for member in members:
        world.feed(PODS, WatchEvent(EventType.DELETED, obj=member.pod))
    small = [world.pod(gang_member(f"small-{i}", "2", "small")) for i in range(2)]
    assert world.pre_filter(small[0])[0] == Code.SUCCESS
    world.plugin.reserve(CycleState(), small[0], "n1")
    assert world.pre_filter(small[1])[0] == Code.SUCCESS  # used 2 + the one still pending


def test_reserve_counts_used_and_unreserve_takes_it_back() -> None:
    world = World()
    world.quotas(quota("q", "q", min={"cpu": "4"}, max={"cpu": "4"}))
    p1 = world.pod(pod("p1", "3", "q").obj())
    p2 = world.pod(pod("p2", "1", "q").obj())
    world.plugin.reserve(CycleState(), p1, "n1")
    assert world.plugin.quota_figures()["q"].used == {"cpu": 3000}
    assert world.pre_filter(p2)[0] == Code.SUCCESS
    world.plugin.unreserve(CycleState(), p1, "n1")
    assert world.plugin.quota_figures()["q"].used == {"cpu": 0}
    # The informer sees the pod bound: unreserve afterwards changes nothing.
    world.plugin.reserve(CycleState(), p1, "n1")
    world.pod(pod("p1", "3", "q").on("n1").obj())
    world.plugin.unreserve(CycleState(), p1, "n1")
    assert world.plugin.quota_figures()["q"].used == {"cpu": 3000}


def multi_tree_world() -> World:
    nodes = [
        make_node("amd-0").alloc(cpu="8", memory="16Gi").label("tree", "amd64").obj(),
        make_node("arm-0").alloc(cpu="8", memory="16Gi").label("tree", "arm64").obj(),
        make_node("arm-1").alloc(cpu="8", memory="16Gi").label("tree", "arm64").obj(),
        make_node("cpu-0").alloc(cpu="100", memory="16Gi").obj(),
    ]
    world = World(nodes)
    world.profile(
        {
            "metadata": {"name": "arm64", "namespace": "kube-system"},
            "spec": {
                "quotaName": "arm64-root",
                "resourceRatio": "0.5",
                "nodeSelector": {"matchLabels": {"tree": "arm64"}},
            },
        }
    )
    root_labels = {Q + "is-root": "true", Q + "tree-id": "arm", Q + "is-parent": "true"}
    huge = {"cpu": "1000", "memory": "1Ti"}
    world.quotas(
        quota("arm64-root", "kube-system", min=huge, max=huge, labels=root_labels),
        quota("arm-team", "arm-team", max=huge, parent="arm64-root", labels={Q + "tree-id": "arm"}),
        quota("cpu-team", "cpu-team", max=huge),
    )
    return world


def test_a_profile_tree_keeps_its_pods_on_its_nodes_and_within_its_total() -> None:
    world = multi_tree_world()
    world.pod(pod("arm-1", "6", "arm-team").on("arm-0").obj())
    code, message, nodes = world.pre_filter(world.pod(pod("arm-small", "2", "arm-team").obj()))
    assert (code, nodes) == (Code.SUCCESS, frozenset({"arm-0", "arm-1"}))
    code, message, _ = world.pre_filter(world.pod(pod("arm-big", "3", "arm-team").obj()))
    assert code == Code.UNSCHEDULABLE
    assert message.startswith("Insufficient quotas: quota arm-team cpu used 6 + request 3")
    figures = world.plugin.quota_figures()
    assert figures["arm64-root"].runtime["cpu"] == 8000  # (8 + 8) x 0.5
    # The default tree shares the rest of the cluster: 124 - 8 cpu.
    assert figures["koordinator-root-quota"].runtime["cpu"] == 116000
    code, _, nodes = world.pre_filter(world.pod(pod("c", "50", "cpu-team").obj()))
    assert (code, nodes) == (Code.SUCCESS, None)


async def test_figures_are_written_onto_the_quota_objects() -> None:
    world = World()
    world.quotas(quota("team-a", "team-a", min={"cpu": "4"}, max={"cpu": "8", "memory": "8Gi"}))
    world.pod(pod("a1", "3", "team-a").on("n1").obj())
    world.pod(pod("a2", "2", "team-a").obj())
    assert await world.plugin.flush_figures() == 1
    stored = world.backend.get(ELASTICQUOTAS, "team-a", "team-a")
    assert stored is not None
    annotations = stored.metadata.annotations or {}
    assert json.loads(annotations[Q + "runtime"]) == {"cpu": "5", "memory": "0"}
    assert json.loads(annotations[Q + "request"]) == {"cpu": "5", "memory": "0"}
    assert stored.status is not None
    assert {k: str(v) for k, v in (stored.status.used or {}).items()} == {"cpu": "3", "memory": "0"}
    world.feed(ELASTICQUOTAS, WatchEvent(EventType.MODIFIED, obj=stored))
    assert await world.plugin.flush_figures() == 0  # nothing changed since


def test_fits_after_removal_and_borrowing() -> None:
    world = borrowing_world(lender_lends=True)
    b3 = world.pod(pod("b3", "2", "b").obj())
    world.plugin.reserve(CycleState(), b3, "n1")
    b_pod = PodInfo.of(pod("b1", "2", "b").on("n1").obj())
    assert world.plugin.is_borrowing(b_pod)  # b uses 6 > min 4
    a_pods = [world.pod(pod(f"a{i}", "2", "a").obj()) for i in range(2)]
    # a asks for its min (4): b's runtime drops back to 4, a gets 4 but b still holds 6 of p's 8.
    assert world.pre_filter(a_pods[0])[0] == Code.SUCCESS
    assert not world.plugin.fits_after_removal([*a_pods, world.pod(pod("a2", "2", "a").obj())], [])
    assert world.plugin.fits_after_removal(a_pods, [])
    assert not world.plugin.is_borrowing(a_pods[0])


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_min_scaling_follows_the_args(scale: bool) -> None:
    world = World(
        [make_node("n1").alloc(cpu="8", memory="16Gi").obj()], ElasticQuotaArgs(enable_min_quota_scale=scale)
    )
    world.quotas(
        quota("x", "x", min={"cpu": "8"}, max={"cpu": "16"}),
        quota("y", "y", min={"cpu": "8"}, max={"cpu": "16"}),
    )
    world.pod(pod("x1", "16", "x").obj())
    world.pod(pod("y1", "16", "y").obj())
    figures = world.plugin.quota_figures()
    expected = 4000 if scale else 8000
    assert figures["x"].runtime["cpu"] == expected
    assert figures["y"].auto_scale_min["cpu"] == expected


async def test_the_background_writer_patches_after_a_change_and_survives_failures() -> None:
    import asyncio

    world = World()
    world.plugin.writer.interval = 0.01
    world.quotas(quota("q", "q", min={"cpu": "4"}, max={"cpu": "4"}))
    world.pod(pod("p1", "1", "q").on("n1").obj())  # a pod event inside the loop starts the writer

    async def used() -> Any:
        for _ in range(500):
            stored = world.backend.get(ELASTICQUOTAS, "q", "q")
            if stored is not None and stored.status is not None and stored.status.used:
                return {k: str(v) for k, v in stored.status.used.items()}
            await asyncio.sleep(0.01)
        return None

    assert await used() == {"cpu": "1"}
    world.backend.delete(ELASTICQUOTAS, "q", "q")  # the patch now answers NotFound: logged, not raised
    world.pod(pod("p2", "1", "q").on("n1").obj())
    assert await world.plugin.flush_figures() == 0
    await world.plugin.writer.close()


async def test_a_node_joining_a_profile_tree_rewrites_its_figures_without_any_other_event() -> None:
    """Nodes reach the plugin through the cache only: the writer polls what the figures depend on,
    as Koordinator's controller re-syncs every second, so a child of a profile root shows
    runtime == its request (within its min) once the tree has nodes, not the 0 of before."""
    import asyncio

    world = World([make_node("arm-0").alloc(cpu="8", memory="16Gi").obj()])
    world.plugin.writer.interval = 0.01
    world.profile(
        {
            "metadata": {"name": "arm64", "namespace": "kube-system"},
            "spec": {"quotaName": "arm64-root", "nodeSelector": {"matchLabels": {"tree": "arm64"}}},
        }
    )
    root_labels = {Q + "is-root": "true", Q + "tree-id": "arm", Q + "is-parent": "true"}
    limits = {"cpu": "8", "memory": "16Gi"}
    world.quotas(
        quota("arm64-root", "kube-system", min=limits, max=limits, labels=root_labels),
        quota(
            "arm-team",
            "arm-team",
            min={"cpu": "4"},
            max={"cpu": "8"},
            parent="arm64-root",
            labels={Q + "tree-id": "arm"},
        ),
    )
    world.pod(pod("a1", "2", "arm-team").obj())  # a pod event inside the loop starts the writer

    async def annotation(name: str) -> Any:
        stored = world.backend.get(ELASTICQUOTAS, "arm-team", "arm-team")
        raw = ((stored.metadata.annotations or {}) if stored else {}).get(Q + name)
        return json.loads(raw) if raw else None

    async def runtime() -> Any:
        return await annotation("runtime")

    for _ in range(200):
        if await annotation("request") is not None:
            break
        await asyncio.sleep(0.01)
    assert await annotation("request") == {"cpu": "2"}
    # The tree has no node yet: runtime is zero, and a zero list is not written (as Koordinator).
    assert await runtime() is None
    world.cache.upsert_node(make_node("arm-0").alloc(cpu="8", memory="16Gi").label("tree", "arm64").obj())
    for _ in range(200):
        if await runtime() == {"cpu": "2"}:
            break
        await asyncio.sleep(0.01)
    assert await runtime() == {"cpu": "2"}
    await world.plugin.writer.close()


def test_pods_seen_before_their_quota_are_charged_to_it_once_it_arrives() -> None:
    world = World()
    world.pod(pod("a1", "3", "team-a").on("n1").obj())
    assert world.plugin.quota_figures()["koordinator-default-quota"].used["cpu"] == 3000
    world.quotas(quota("team-a", "team-a", min={"cpu": "4"}, max={"cpu": "4"}))
    figures = world.plugin.quota_figures()
    assert figures["team-a"].used == {"cpu": 3000}
    assert figures["koordinator-default-quota"].used["cpu"] == 0
    # A relist without the pod forgets it; a finished pod counts nowhere.
    world.feed(PODS, WatchEvent(EventType.REPLACED, objects=()))
    assert world.plugin.quota_figures()["team-a"].used == {"cpu": 0}
    done = pod("a2", "3", "team-a").on("n1").obj()
    done.status.phase = "Succeeded"
    world.pod(done)
    assert world.plugin.quota_figures()["team-a"].used == {"cpu": 0}


def test_pending_pods_of_other_schedulers_do_not_count() -> None:
    world = World()
    world.quotas(quota("team-a", "team-a", min={"cpu": "4"}, max={"cpu": "4"}))
    other = pod("x", "3", "team-a")
    other._spec["schedulerName"] = "default-scheduler"
    world.pod(other.obj())
    assert world.plugin.quota_figures()["team-a"].request == {"cpu": 0}
    world.pod(other.on("n1").obj())  # bound by the other scheduler: it uses the quota
    assert world.plugin.quota_figures()["team-a"].used == {"cpu": 3000}


def test_a_profile_root_reports_its_figures_as_koordinators_only_child_of_the_tree_total() -> None:
    """Koordinator's tree root (koordinator-root-quota) holds the total; a profile's root quota is
    its child: runtime is what the root asks for up to the total, over the root's max resources."""
    world = multi_tree_world()
    world.pod(pod("arm-1", "2", "arm-team").on("arm-0").obj())
    root = world.plugin.quota_figures()["arm64-root"]
    assert (root.runtime, root.request, root.used) == (
        {"cpu": 2000, "memory": 0},
        {"cpu": 2000, "memory": 0},
        {"cpu": 2000, "memory": 0},
    )
    world.pod(pod("arm-2", "7", "arm-team").obj())
    assert world.plugin.quota_figures()["arm64-root"].runtime == {"cpu": 8000, "memory": 0}  # the total
    assert world.plugin.quota_figures()["arm-team"].runtime["cpu"] == 8000


def test_the_default_quota_fast_path_decides_as_the_tree_does() -> None:
    """Pods of the default quota are checked without a tree computation (its runtime is its max):
    the answer and the message must be the ones the full figures give."""
    world = World()
    world.quotas(
        quota("koordinator-default-quota", "koordinator-system", min={"cpu": "1"}, max={"cpu": "4"}),
    )
    world.pod(pod("d1", "2", "apps").on("n1").obj())
    figures = world.plugin.quota_figures()["koordinator-default-quota"]
    assert figures.runtime == {"cpu": 4000}
    assert figures.used == {"cpu": 2000}
    assert world.pre_filter(PodInfo.of(pod("d2", "2", "apps").obj()))[0] == Code.SUCCESS
    code, message, _ = world.pre_filter(PodInfo.of(pod("d3", "3", "apps").obj()))
    assert code == Code.UNSCHEDULABLE
    assert message == (
        "Insufficient quotas: quota koordinator-default-quota cpu used 2 + request 3 > runtime 4 "
        "(Insufficient quotas, quotaName: koordinator-default-quota, runtime: cpu:4, used: cpu:2, "
        "pod's request: cpu:3, exceedDimensions: [cpu])"
    )
    np = {"quota.scheduling.koordinator.sh/preemptible": "false"}
    world.pod(pod("np0", "1", "apps", **np).on("n1").obj())
    code, message, _ = world.pre_filter(PodInfo.of(pod("np1", "1", "apps", **np).obj()))
    assert code == Code.UNSCHEDULABLE
    assert message == (
        "Insufficient non-preemptible quotas: "
        "quota koordinator-default-quota cpu non-preemptible used 1 + request 1 > min 1 "
        "(Insufficient non-preemptible quotas, quotaName: koordinator-default-quota, min: cpu:1, "
        "nonPreemptibleUsed: cpu:1, pod's request: cpu:1, exceedDimensions: [cpu])"
    )


def gated_world(**gates: bool) -> World:
    """A World whose plugin runs under Koordinator's feature gates (``--feature-gates``)."""
    world = World()
    world.handle = Handle(
        backend=world.backend, snapshot=lambda: Snapshot(world.cache), features=FeatureGates(**gates)
    )
    world.plugin = ElasticQuota(ElasticQuotaArgs(), world.handle)
    for resource in (ELASTICQUOTAS, ELASTICQUOTAPROFILES, PODS):
        world.feed(resource, WatchEvent(EventType.REPLACED, objects=()))
    return world


def with_overhead(builder: Any, cpu: str) -> Pod:
    built: Pod = builder.obj()
    built.spec.overhead = {"cpu": Quantity.parse(cpu)}
    return built


@pytest.mark.parametrize("ignore", [False, True], ids=["counted", "ignored"])
def test_elastic_quota_ignore_pod_overhead_leaves_the_overhead_out_of_the_quota(ignore: bool) -> None:
    world = gated_world(elastic_quota_ignore_pod_overhead=ignore)
    world.quotas(quota("q", "q", min={"cpu": "4"}, max={"cpu": "4"}))
    world.pod(with_overhead(pod("p1", "2", "q").on("n1"), "1"))
    assert world.plugin.quota_figures()["q"].used == {"cpu": 2000 if ignore else 3000}
    code, _, _ = world.pre_filter(world.pod(with_overhead(pod("p2", "1", "q"), "1")))
    assert code == (Code.SUCCESS if ignore else Code.UNSCHEDULABLE)


def test_disable_default_quota_charges_only_the_quota_a_pod_names() -> None:
    world = gated_world(disable_default_quota=True)
    world.quotas(
        quota("team-a", "team-a", min={"cpu": "2"}, max={"cpu": "2"}),
        quota("named", "other", min={"cpu": "2"}, max={"cpu": "2"}),
    )
    quota_of = world.plugin.quota_of
    assert quota_of(PodInfo.of(pod("p", "1", "team-a").obj())) is None  # no namespace fallback
    assert quota_of(PodInfo.of(pod("p", "1", "team-a", **{Q + "name": "nope"}).obj())) is None
    assert quota_of(PodInfo.of(pod("p", "1", "team-a", **{Q + "name": "named"}).obj())) == "named"
    world.pod(pod("free", "8", "team-a").on("n1").obj())
    figures = world.plugin.quota_figures()
    assert figures["team-a"].used == {"cpu": 0}
    assert figures["koordinator-default-quota"].used["cpu"] == 0
    assert world.pre_filter(world.pod(pod("big", "60", "team-a").obj()))[0] == Code.SUCCESS
    world.plugin.reserve(CycleState(), world.pod(pod("big2", "3", "team-a").obj()), "n1")
    assert world.plugin.quota_figures()["team-a"].used == {"cpu": 0}
    code, _, _ = world.pre_filter(world.pod(pod("over", "3", "team-a", **{Q + "name": "named"}).obj()))
    assert code == Code.UNSCHEDULABLE


def test_an_empty_resource_list_prints_as_koordinator_prints_it() -> None:
    from scheduler.plugins.elastic_quota import messages

    message = messages.insufficient("q", {}, {"cpu": 2000}, {"cpu": 1000}, "runtime", "")
    assert message is not None
    assert "used: <empty>, pod's request: cpu:2, exceedDimensions: [cpu])" in message


@pytest.mark.parametrize("guarantee", [False, True], ids=["off", "on"])
async def test_the_guarantee_gate_keeps_a_borrowers_pods_and_writes_allocated_and_guaranteed(
    guarantee: bool,
) -> None:
    """ElasticQuotaGuaranteeUsage: B holds 6 of P's 8 (2 borrowed from A's idle min); when A asks
    for its min, B's runtime stays at what it holds, so its pods are not reclaimed; allocated and
    guaranteed are written on every quota (and only with the gate)."""
    world = gated_world(elastic_quota_guarantee_usage=guarantee)
    world.quotas(
        quota("p", "default", min={"cpu": "8"}, max={"cpu": "8"}, labels={Q + "is-parent": "true"}),
        quota("a", "a", min={"cpu": "4"}, max={"cpu": "8"}, parent="p"),
        quota("b", "b", min={"cpu": "4"}, max={"cpu": "8"}, parent="p"),
    )
    held = [world.pod(pod(f"b{i}", "2", "b").on("n1").obj()) for i in range(3)]
    claim = world.pod(pod("a1", "4", "a").obj())
    figures = world.plugin.quota_figures()
    assert figures["b"].runtime == {"cpu": 6000 if guarantee else 4000}
    assert world.plugin.reclaimable(claim, held[0]) is not guarantee
    await world.plugin.flush_figures()
    stored = world.backend.get(ELASTICQUOTAS, "b", "b")
    annotations = (stored.metadata.annotations or {}) if stored else {}
    if guarantee:
        assert json.loads(annotations[Q + "allocated"]) == {"cpu": "6"}
        assert json.loads(annotations[Q + "guaranteed"]) == {"cpu": "6"}
        parent = world.backend.get(ELASTICQUOTAS, "default", "p")
        assert parent is not None
        assert json.loads((parent.metadata.annotations or {})[Q + "guaranteed"]) == {"cpu": "10"}
    else:
        assert Q + "allocated" not in annotations
        assert Q + "guaranteed" not in annotations


def test_pod_and_quota_changes_refresh_the_figures_incrementally_as_a_full_computation_would() -> None:
    """Pods come, bind, go, a quota's min and max change: after each, the figures kept between
    changes (only the changed quotas' paths recomputed) equal the ones computed from scratch, and
    the kept trees are not rebuilt until a quota moves."""
    world = World()
    world.quotas(
        quota("dept", "dept", min={"cpu": "20"}, max={"cpu": "40"}, labels={Q + "is-parent": "true"}),
        quota("a", "a", min={"cpu": "8"}, max={"cpu": "30"}, parent="dept"),
        quota("b", "b", min={"cpu": "12"}, max={"cpu": "30"}, parent="dept"),
        quota("c", "c", min={"cpu": "4"}, max={"cpu": "10"}),
    )
    world.plugin.quota_figures()
    kept = world.plugin._state
    steps = [
        pod("a1", "6", "a").obj(),
        pod("b1", "20", "b").obj(),
        pod("a1", "6", "a").on("n1").obj(),
        pod("c1", "3", "c").on("n1").obj(),
        pod("a2", "10", "a").obj(),
    ]
    for step in steps:
        world.pod(step)
        full = world.plugin._compute(world.plugin.ledger.usage(), Snapshot(world.cache)).figures
        assert world.plugin.quota_figures() == full, step.metadata.name
    world.feed(PODS, WatchEvent(EventType.DELETED, obj=steps[1]))
    full = world.plugin._compute(world.plugin.ledger.usage(), Snapshot(world.cache)).figures
    assert world.plugin.quota_figures() == full
    # A quota's min and max change: its path only, too.
    world.quotas(quota("a", "a", min={"cpu": "2"}, max={"cpu": "12"}, parent="dept"))
    full = world.plugin._compute(world.plugin.ledger.usage(), Snapshot(world.cache)).figures
    assert world.plugin.quota_figures() == full
    assert full["a"].max == {"cpu": 12000}
    assert world.plugin._state is kept
    # A quota moved to another parent rebuilds the trees.
    world.quotas(quota("c", "c", min={"cpu": "4"}, max={"cpu": "10"}, parent="dept"))
    full = world.plugin._compute(world.plugin.ledger.usage(), Snapshot(world.cache)).figures
    assert world.plugin.quota_figures() == full
    assert full["c"].parent == "dept"
    assert world.plugin._state is not kept
