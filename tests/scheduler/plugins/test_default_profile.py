"""The default plugin set, run through the real Framework over a snapshot, and DefaultBinder."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from apis.client.backend import BackendError, Conflict, NotFound
from apis.core import Pod, PodResourceClaim
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, Diagnosis
from scheduler.framework.profile import ExtensionPoint, PluginRef, ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY, default_binder
from tests.scheduler.builders import make_node, make_pod, make_snapshot


class FakeBackend:
    """Records bindings; ``fail`` makes the next bind raise it."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.bound: list[tuple[str, str]] = []
        self.fail = fail

    async def bind(self, pod: Pod, node_name: str) -> None:
        if self.fail is not None:
            raise self.fail
        self.bound.append((pod.metadata.name or "", node_name))


def framework(snapshot: Snapshot, backend: FakeBackend | None = None) -> Framework:
    profile = ResolvedProfile(scheduler_name="koord-scheduler", plugins=DEFAULT_PLUGINS)
    handle = Handle(backend=backend or FakeBackend(), snapshot=lambda: snapshot)  # type: ignore[arg-type]
    return Framework(profile, DEFAULT_REGISTRY, handle)


def schedule(fw: Framework, pod: PodInfo, snapshot: Snapshot) -> tuple[str | None, Diagnosis, dict[str, int]]:
    """PreFilter -> Filter -> Score as the loop runs them: the best node, the diagnosis, the totals."""
    state = CycleState()
    diagnosis = Diagnosis(node_count=snapshot.node_count())
    status, allowed = fw.run_pre_filter(state, pod, snapshot)
    assert status.ok, status
    rows = snapshot.candidate_rows()
    if allowed is not None:
        rows = rows[np.isin([snapshot.table.names[r] for r in rows], sorted(allowed))]
    rows, status = fw.run_filter(state, pod, snapshot, rows, diagnosis)
    assert status.ok, status
    if rows.size == 0:
        return None, diagnosis, {}
    status = fw.run_pre_score(state, pod, snapshot, rows)
    assert status.ok, status
    total, _, status = fw.run_score(state, pod, snapshot, rows)
    assert status.ok, status
    totals = {snapshot.table.names[r]: int(t) for r, t in zip(rows.tolist(), total.tolist(), strict=True)}
    best = max(sorted(totals), key=lambda name: totals[name])
    return best, diagnosis, totals


def test_registry_and_default_set() -> None:
    assert DEFAULT_REGISTRY.names() == [
        "Coscheduling",
        "DefaultBinder",
        "DefaultPreBind",
        "DefaultPreemption",
        "DeviceShare",
        "DynamicResources",
        "ElasticQuota",
        "ImageLocality",
        "InterPodAffinity",
        "LoadAwareScheduling",
        "NodeAffinity",
        "NodeNUMAResource",
        "NodeName",
        "NodePorts",
        "NodeResourcesBalancedAllocation",
        "NodeResourcesFit",
        "NodeResourcesFitPlus",
        "NodeUnschedulable",
        "NodeVolumeLimits",
        "PodTopologySpread",
        "PrioritySort",
        "Reservation",
        "ScarceResourceAvoidance",
        "SchedulingGates",
        "SchedulingHint",
        "TaintToleration",
        "VolumeBinding",
        "VolumeRestrictions",
        "VolumeZone",
    ]
    assert DEFAULT_PLUGINS[ExtensionPoint.PRE_ENQUEUE] == (
        PluginRef("SchedulingGates"),
        PluginRef("Coscheduling"),
    )
    assert DEFAULT_PLUGINS[ExtensionPoint.PERMIT] == (PluginRef("Coscheduling"),)
    assert DEFAULT_PLUGINS[ExtensionPoint.SCORE] == (
        PluginRef("NodeResourcesFit", 1),
        PluginRef("NodeAffinity", 2),
        PluginRef("TaintToleration", 3),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
        PluginRef("NodeNUMAResource", 1),  # Koordinator's shipped profile
        PluginRef("DeviceShare", 1),  # Koordinator's shipped profile
        PluginRef("Reservation", 5000),  # Koordinator's shipped weight: a reserved node wins
    )
    # kube-scheduler v1.35's getDefaultPlugins order: ... NodeAffinity, NodePorts, NodeResourcesFit,
    # VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity,
    # then Reservation
    assert DEFAULT_PLUGINS[ExtensionPoint.FILTER] == (
        PluginRef("NodeUnschedulable"),
        PluginRef("NodeName"),
        PluginRef("TaintToleration"),
        PluginRef("NodeAffinity"),
        PluginRef("NodePorts"),
        PluginRef("NodeResourcesFit"),
        PluginRef("VolumeRestrictions"),
        PluginRef("NodeVolumeLimits"),
        PluginRef("VolumeBinding"),
        PluginRef("VolumeZone"),
        PluginRef("PodTopologySpread"),
        PluginRef("InterPodAffinity"),
        PluginRef("NodeNUMAResource"),
        PluginRef("DeviceShare"),
        PluginRef("Reservation"),
    )
    # Koordinator's shipped profile runs DeviceShare and NodeNUMAResource at PreFilter, Filter,
    # Score, Reserve and PreBind, NodeNUMAResource first (it admits the NUMA nodes DeviceShare
    # then takes cards on).
    for point in (ExtensionPoint.PRE_FILTER, ExtensionPoint.RESERVE, ExtensionPoint.PRE_BIND):
        chosen = DEFAULT_PLUGINS[point]
        assert chosen.index(PluginRef("NodeNUMAResource")) < chosen.index(PluginRef("DeviceShare")), point
    assert PluginRef("NodePorts") in DEFAULT_PLUGINS[ExtensionPoint.PRE_FILTER]
    # Reservation restores reserved room at PreFilter, before any plugin (a gang's plan) reads it.
    assert DEFAULT_PLUGINS[ExtensionPoint.PRE_FILTER][0] == PluginRef("Reservation")
    assert DEFAULT_PLUGINS[ExtensionPoint.BIND] == (PluginRef("Reservation"), PluginRef("DefaultBinder"))
    assert DEFAULT_PLUGINS[ExtensionPoint.PRE_SCORE] == (
        PluginRef("PodTopologySpread"),
        PluginRef("InterPodAffinity"),
        PluginRef("Reservation"),
    )
    volumes = ["VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"]  # upstream's order
    for point in (ExtensionPoint.PRE_FILTER, ExtensionPoint.FILTER):
        names = [ref.name for ref in DEFAULT_PLUGINS[point]]
        assert [n for n in names if n in volumes] == volumes, point
    assert DEFAULT_PLUGINS[ExtensionPoint.RESERVE][0] == PluginRef("VolumeBinding")
    assert DEFAULT_PLUGINS[ExtensionPoint.PRE_BIND][0] == PluginRef("VolumeBinding")
    enabled = {ref.name for refs in DEFAULT_PLUGINS.values() for ref in refs}
    assert "NodeResourcesFitPlus" not in enabled
    assert "LoadAwareScheduling" not in enabled  # it refuses nodes koordlet has not reported yet
    assert "ScarceResourceAvoidance" not in enabled


def test_every_plugin_declares_its_events() -> None:
    fw = framework(make_snapshot([]))
    names = ("NodeResourcesFit", "TaintToleration", "NodeAffinity", "NodeUnschedulable", "NodeName")
    for name in (*names, "NodePorts", "PodTopologySpread", "InterPodAffinity"):
        events = fw.plugin(name).events_to_register()  # type: ignore[union-attr]
        assert events & ClusterEvent.NODE_ADD, name


def cluster() -> Snapshot:
    return make_snapshot(
        [
            make_node("small").alloc(cpu="2", memory="8Gi").obj(),
            make_node("infra-1").alloc(cpu="32", memory="64Gi").taint("dedicated", "infra").obj(),
            make_node("infra-2").alloc(cpu="32", memory="64Gi").taint("dedicated", "infra").obj(),
            make_node("big-a").alloc(cpu="16", memory="64Gi").obj(),
            make_node("big-b").alloc(cpu="16", memory="64Gi").label("zone", "b").obj(),
        ],
        assigned=[make_pod("resident").req(cpu="8", memory="8Gi").on("big-b").obj()],
    )


def test_default_profile_picks_the_preferred_node() -> None:
    snapshot = cluster()
    pod = (
        make_pod("web")
        .req(cpu="4", memory="8Gi")
        .preferred_term(10, {"key": "zone", "operator": "In", "values": ["b"]})
    )
    best, diagnosis, totals = schedule(framework(snapshot), pod.info(), snapshot)
    # big-a: fit (75 + 87) / 2 = 81, affinity 0, taints 100, balanced cpu 4/16 memory 8/64:
    # (1 - 0.0625) * 100 = 93, images 0 -> 81 + 0*2 + 100*3 + 93 + 0 = 474
    # big-b: fit (25 + 75) / 2 = 50, affinity 100, taints 100, balanced 12/16 and 16/64: 75
    # -> 50 + 200 + 300 + 75 = 625
    assert totals == {"big-a": 474, "big-b": 625}
    assert best == "big-b"
    assert diagnosis.reason_counts == {
        "Insufficient cpu": 1,
        "node(s) had untolerated taint {dedicated: infra}": 2,
    }


def test_diagnosis_message_when_nothing_fits() -> None:
    snapshot = make_snapshot(
        [
            make_node("small").alloc(cpu="2", memory="8Gi").obj(),
            make_node("infra-1").alloc(cpu="32", memory="64Gi").taint("dedicated", "infra").obj(),
            make_node("infra-2").alloc(cpu="32", memory="64Gi").taint("dedicated", "infra").obj(),
        ]
    )
    best, diagnosis, _ = schedule(framework(snapshot), make_pod("web").req(cpu="4").info(), snapshot)
    assert best is None
    assert diagnosis.message() == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: infra}."
    )
    assert diagnosis.rejecting_plugins == {"NodeResourcesFit", "TaintToleration"}
    assert len(diagnosis.unresolvable_rows) == 2  # preemption can help only on "small"


def test_pre_filter_rejection_is_reported_by_the_runtime() -> None:
    snapshot = cluster()
    pod = make_pod("bad").required_term({"key": "gen", "operator": "Gt", "values": ["x"]}).info()
    status, _ = framework(snapshot).run_pre_filter(CycleState(), pod, snapshot)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == "NodeAffinity"


async def test_default_binder_binds_through_the_backend() -> None:
    backend = FakeBackend()
    snapshot = cluster()
    status = await framework(snapshot, backend).run_bind(CycleState(), make_pod("web").info(), "big-a")
    assert status.ok
    assert backend.bound == [("web", "big-a")]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(
            Conflict("already bound"), "binding pod default/web to node n1: conflict", id="conflict"
        ),
        pytest.param(
            NotFound('pods "web" not found'), "binding pod default/web to node n1: not found", id="not-found"
        ),
        pytest.param(
            BackendError("boom", status=500),
            "binding pod default/web to node n1 failed (HTTP 500): boom",
            id="backend",
        ),
    ],
)
async def test_default_binder_maps_backend_errors(error: Exception, message: str) -> None:
    handle: Any = Handle(backend=FakeBackend(fail=error), snapshot=lambda: make_snapshot([]))  # type: ignore[arg-type]
    status = await default_binder.new(None, handle).bind(CycleState(), make_pod("web").info(), "n1")
    assert status.code == Code.ERROR
    assert status.message().startswith(message)


def test_default_profile_refuses_a_taken_host_port_and_balances_the_rest() -> None:
    snapshot = make_snapshot(
        [
            make_node("a").alloc(cpu="8", memory="32Gi").obj(),
            make_node("b").alloc(cpu="8", memory="32Gi").obj(),
        ],
        assigned=[make_pod("web-0").req(cpu="1", memory="1Gi").host_port(8080).on("a").obj()],
    )
    fw = framework(snapshot)
    pod = make_pod("web-1").req(cpu="1", memory="1Gi").host_port(8080)
    best, diagnosis, _ = schedule(fw, pod.info(), snapshot)
    assert best == "b"
    assert diagnosis.reason_counts == {"node(s) didn't have free ports for the requested pod ports": 1}
    assert diagnosis.rejecting_plugins == {"NodePorts"}
    only_a = make_snapshot(
        [make_node("a").alloc(cpu="8", memory="32Gi").obj()],
        assigned=[make_pod("web-0").host_port(8080).on("a").obj()],
    )
    best, diagnosis, _ = schedule(framework(only_a), pod.info(), only_a)
    assert best is None
    assert diagnosis.message() == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )
    assert not diagnosis.unresolvable_rows  # preemption may free the port


def test_a_pod_with_dra_claims_is_refused_as_unresolvable_not_placed_without_them() -> None:
    """DynamicResources: koord-scheduler cannot allocate ResourceClaims, so PreFilter says so."""
    snapshot = make_snapshot([make_node("n0").alloc(cpu="4", memory="8Gi").obj()])
    fw = framework(snapshot)
    plain = make_pod("plain").req(cpu="1").obj()
    claimed = make_pod("claimed").req(cpu="1").obj()
    claimed.spec.resource_claims = [PodResourceClaim(name="gpu", resource_claim_name="single-gpu")]
    status, _ = fw.run_pre_filter(CycleState(), PodInfo.of(claimed), snapshot)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    (reason,) = status.reasons
    assert "spec.resourceClaims: gpu" in reason
    assert "cannot allocate yet" in reason
    assert fw.run_pre_filter(CycleState(), PodInfo.of(plain), snapshot)[0].ok


def test_the_volume_plugins_share_one_store_per_storage_resource() -> None:
    """Four plugins read claims: one copy of them, each watch event handled once."""
    fw = framework(make_snapshot([]))
    claims = [
        fw.plugin(n).claims for n in ("VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits")
    ]  # type: ignore[union-attr]
    assert all(c is claims[0] for c in claims)
    assert fw.plugin("VolumeBinding").volumes is fw.plugin("VolumeZone").volumes  # type: ignore[union-attr]
