"""NodeVolumeLimits (CSI) against kube-scheduler's documented cases (csi_test.go)."""

from __future__ import annotations

from apis.storage import PersistentVolume, PersistentVolumeClaim
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins import node_volume_limits
from scheduler.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons
from tests.scheduler.plugins.storage_objects import csi_node, feed, pv, pvc, storage_class

DRIVER = "ebs.csi.aws.com"


def bound_claims(*names: str) -> tuple[list[PersistentVolumeClaim], list[PersistentVolume]]:
    claims: list[PersistentVolumeClaim] = []
    volumes: list[PersistentVolume] = []
    for name in names:
        claim = pvc(name, volume_name=f"pv-{name}", bound=True)
        claims.append(claim)
        volumes.append(
            pv(f"pv-{name}", claim=claim, phase="Bound", csi={"driver": DRIVER, "volumeHandle": name})
        )
    return claims, volumes


def setup(existing: list[str], limit: int | None) -> tuple[NodeVolumeLimits, Snapshot]:
    claims, volumes = bound_claims("a", "b", "c")
    claims.append(pvc("unbound", storage_class="ebs"))
    assigned = [make_pod(f"e-{name}").claim(name).on("n1").obj() for name in existing]
    snapshot = make_snapshot(
        [make_node("n1").alloc(cpu="4").obj(), make_node("n2").alloc(cpu="4").obj()], assigned
    )
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    plugin = node_volume_limits.new(None, handle)
    csi_nodes = [csi_node("n1", **{DRIVER: limit})] if limit is not None else []
    feed(
        handle,
        claims=claims,
        volumes=volumes,
        classes=[storage_class("ebs", provisioner=DRIVER)],
        csi_nodes=csi_nodes,
    )
    return plugin, snapshot


def test_volumes_over_the_drivers_count_exceed_it() -> None:
    plugin, snapshot = setup(["a"], limit=1)
    assert filter_reasons(plugin, make_pod("p").claim("b").info(), snapshot) == {
        "n1": [ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED],
        "n2": [],  # no CSINode: no limit
    }


def test_a_volume_already_attached_is_not_counted_twice() -> None:
    plugin, snapshot = setup(["a"], limit=1)
    assert filter_reasons(plugin, make_pod("p").claim("a").info(), snapshot)["n1"] == []


def test_within_the_limit_fits() -> None:
    plugin, snapshot = setup(["a"], limit=2)
    assert filter_reasons(plugin, make_pod("p").claim("b").info(), snapshot)["n1"] == []
    plugin, snapshot = setup(["a"], limit=2)
    assert filter_reasons(plugin, make_pod("p").claim("b").claim("c").info(), snapshot)["n1"] == [
        ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
    ]


def test_an_unbound_claim_counts_for_its_classs_provisioner() -> None:
    plugin, snapshot = setup(["a"], limit=1)
    assert filter_reasons(plugin, make_pod("p").claim("unbound").info(), snapshot)["n1"] == [
        ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED
    ]


def test_pods_without_claims_are_skipped_and_missing_claims_unresolvable() -> None:
    plugin, snapshot = setup([], limit=1)
    assert plugin.pre_filter(CycleState(), make_pod("p").info(), snapshot).status.code == Code.SKIP
    state = CycleState()
    pod = make_pod("p").claim("nope").info()
    assert plugin.pre_filter(state, pod, snapshot).status.ok
    result = plugin.filter(state, pod, snapshot, snapshot.candidate_rows())
    assert result.rejections[0][0] == 'persistentvolumeclaim "nope" not found'
    assert result.unresolvable is not None
    assert result.unresolvable.all()
