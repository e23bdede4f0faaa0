"""VolumeBinding against kube-scheduler's documented behaviour (volume_binding_test.go,
binder_test.go): PreFilter's unresolvable claims, Filter's reasons per node, Reserve's assumed
volumes, PreBind's writes and its wait for the PV controller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import Conflict, ResourceType
from apis.storage import PersistentVolume, PersistentVolumeClaim
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins import volume_binding
from scheduler.plugins.helper.storage import PVCS, PVS, STORAGECLASSES
from scheduler.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    VolumeBinding,
    VolumeBindingArgs,
)
from tests.scheduler.builders import make_cache, make_node, make_pod
from tests.scheduler.plugins.helpers import filter_reasons
from tests.scheduler.plugins.storage_objects import feed, pv, pvc, storage_class


def nodes() -> Snapshot:
    return Snapshot(
        make_cache(
            [
                make_node(name).alloc(cpu="4").label("kubernetes.io/hostname", name).label("zone", zone).obj()
                for name, zone in (("node-a", "a"), ("node-b", "a"), ("node-c", "b"))
            ]
        )
    )


def plugin(snapshot: Snapshot, args: VolumeBindingArgs | None = None, **objects: Any) -> VolumeBinding:
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    vb = volume_binding.new(args, handle)
    feed(handle, **objects)
    return vb


def pre_filter_status(vb: VolumeBinding, pod: Any, snapshot: Snapshot) -> tuple[Code, str]:
    status = vb.pre_filter(CycleState(), pod, snapshot).status
    return status.code, status.message()


def test_a_pod_without_claims_is_skipped() -> None:
    snapshot = nodes()
    vb = plugin(snapshot)
    assert pre_filter_status(vb, make_pod("p").info(), snapshot)[0] == Code.SKIP
    assert pre_filter_status(vb, make_pod("p").volume("tmp", emptyDir={}).info(), snapshot)[0] == Code.SKIP


def test_a_missing_claim_is_unresolvable_with_the_listers_message() -> None:
    snapshot = nodes()
    vb = plugin(snapshot)
    code, message = pre_filter_status(vb, make_pod("p").claim("missing").info(), snapshot)
    assert (code, message) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolumeclaim "missing" not found',
    )


def test_a_missing_ephemeral_claim_waits_for_the_ephemeral_volume_controller() -> None:
    snapshot = nodes()
    vb = plugin(snapshot)
    pod = make_pod("p").volume("scratch", ephemeral={"volumeClaimTemplate": {"spec": {}}}).info()
    assert pre_filter_status(vb, pod, snapshot) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
    )


def test_an_ephemeral_claim_the_pod_does_not_own_is_refused() -> None:
    snapshot = nodes()
    vb = plugin(snapshot, claims=[pvc("p-scratch")], classes=[storage_class()])
    pod = make_pod("p").volume("scratch", ephemeral={"volumeClaimTemplate": {"spec": {}}}).info()
    assert pre_filter_status(vb, pod, snapshot) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
    )


def test_lost_and_deleted_claims_are_unresolvable() -> None:
    snapshot = nodes()
    lost = pvc("lost", volume_name="gone")
    lost.status.phase = "Lost"
    deleting = pvc("deleting")
    deleting.metadata.deletion_timestamp = datetime.now(UTC)
    vb = plugin(snapshot, claims=[lost, deleting], classes=[storage_class()])
    assert pre_filter_status(vb, make_pod("p").claim("lost").info(), snapshot)[1] == (
        'persistentvolumeclaim "lost" bound to non-existent persistentvolume "gone"'
    )
    assert pre_filter_status(vb, make_pod("p").claim("deleting").info(), snapshot)[1] == (
        'persistentvolumeclaim "deleting" is being deleted'
    )


@pytest.mark.parametrize(
    "claim",
    [
        pvc("c", storage_class="fast"),  # an Immediate class
        pvc("c", storage_class=None),  # no class: the PV controller binds it
        pvc("c", storage_class="unknown"),  # a class that does not exist reads as Immediate
        pvc("c", volume_name="pv-1"),  # pre-bound to a volume, not yet bound: the PV controller's
    ],
)
def test_unbound_immediate_claims_are_unresolvable(claim: PersistentVolumeClaim) -> None:
    snapshot = nodes()
    vb = plugin(snapshot, claims=[claim], classes=[storage_class(), storage_class("fast", mode="Immediate")])
    assert pre_filter_status(vb, make_pod("p").claim("c").info(), snapshot) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ERR_UNBOUND_IMMEDIATE,
    )


def test_a_bound_volume_allows_only_the_nodes_of_its_node_affinity() -> None:
    snapshot = nodes()
    claim = pvc("c", volume_name="pv-a", bound=True)
    vb = plugin(snapshot, claims=[claim], volumes=[pv("pv-a", nodes=["node-a"], claim=claim, phase="Bound")])
    assert filter_reasons(vb, make_pod("p").claim("c").info(), snapshot) == {
        "node-a": [],
        "node-b": [ERR_REASON_NODE_CONFLICT],
        "node-c": [ERR_REASON_NODE_CONFLICT],
    }


def test_a_claim_bound_to_a_missing_volume_rejects_every_node() -> None:
    snapshot = nodes()
    vb = plugin(snapshot, claims=[pvc("c", volume_name="gone", bound=True)])
    reasons = filter_reasons(vb, make_pod("p").claim("c").info(), snapshot)
    assert set(map(tuple, reasons.values())) == {(ERR_REASON_PV_NOT_EXIST,)}


def test_filter_rejections_are_unresolvable() -> None:
    snapshot = nodes()
    claim = pvc("c", volume_name="pv-a", bound=True)
    vb = plugin(snapshot, claims=[claim], volumes=[pv("pv-a", nodes=["node-a"], claim=claim, phase="Bound")])
    state = CycleState()
    pod = make_pod("p").claim("c").info()
    assert vb.pre_filter(state, pod, snapshot).status.ok
    result = vb.filter(state, pod, snapshot, snapshot.candidate_rows())
    assert result.unresolvable is not None
    assert result.unresolvable.tolist() == [False, True, True]


def test_a_wait_for_first_consumer_claim_goes_where_a_static_volume_is() -> None:
    snapshot = nodes()
    vb = plugin(
        snapshot, claims=[pvc("c")], volumes=[pv("pv-b", nodes=["node-b"])], classes=[storage_class()]
    )
    assert filter_reasons(vb, make_pod("p").claim("c").info(), snapshot) == {
        "node-a": [ERR_REASON_BIND_CONFLICT],
        "node-b": [],
        "node-c": [ERR_REASON_BIND_CONFLICT],
    }


@pytest.mark.parametrize(
    "volume",
    [
        pv("pv-b", nodes=["node-b"], size="500Mi"),  # too small
        pv("pv-b", nodes=["node-b"], storage_class="other"),  # another class
        pv("pv-b", nodes=["node-b"], modes=["ReadOnlyMany"]),  # lacks ReadWriteOnce
        pv("pv-b", nodes=["node-b"], phase="Released"),  # not Available
        pv("pv-b", nodes=["node-b"], claim=pvc("someone-else")),  # bound to another claim
    ],
)
def test_volumes_that_do_not_fit_the_claim_are_not_candidates(volume: PersistentVolume) -> None:
    snapshot = nodes()
    vb = plugin(snapshot, claims=[pvc("c")], volumes=[volume], classes=[storage_class()])
    reasons = filter_reasons(vb, make_pod("p").claim("c").info(), snapshot)
    assert reasons["node-b"] == [ERR_REASON_BIND_CONFLICT]


def test_no_volume_and_no_provisioner_rejects_every_node() -> None:
    snapshot = nodes()
    vb = plugin(snapshot, claims=[pvc("c")], classes=[storage_class()])
    reasons = filter_reasons(vb, make_pod("p").claim("c").info(), snapshot)
    assert set(map(tuple, reasons.values())) == {(ERR_REASON_BIND_CONFLICT,)}


def test_a_provisioner_admits_the_nodes_of_its_allowed_topologies() -> None:
    snapshot = nodes()
    zoned = storage_class(
        provisioner="csi.example.com",
        allowed_topologies=[{"matchLabelExpressions": [{"key": "zone", "values": ["b"]}]}],
    )
    vb = plugin(snapshot, claims=[pvc("c")], classes=[zoned])
    assert filter_reasons(vb, make_pod("p").claim("c").info(), snapshot) == {
        "node-a": [ERR_REASON_BIND_CONFLICT],
        "node-b": [ERR_REASON_BIND_CONFLICT],
        "node-c": [],
    }


def test_two_claims_need_two_volumes_on_the_node() -> None:
    snapshot = nodes()
    volumes = [pv("pv-a1", nodes=["node-a"]), pv("pv-a2", nodes=["node-a"]), pv("pv-b1", nodes=["node-b"])]
    vb = plugin(snapshot, claims=[pvc("c1"), pvc("c2")], volumes=volumes, classes=[storage_class()])
    reasons = filter_reasons(vb, make_pod("p").claim("c1").claim("c2").info(), snapshot)
    assert reasons == {
        "node-a": [],
        "node-b": [ERR_REASON_BIND_CONFLICT],
        "node-c": [ERR_REASON_BIND_CONFLICT],
    }


def reserve(vb: VolumeBinding, pod: Any, snapshot: Snapshot, node: str) -> CycleState:
    state = CycleState()
    assert vb.pre_filter(state, pod, snapshot).status.ok
    assert vb.filter(state, pod, snapshot, snapshot.candidate_rows()).feasible.any()
    snapshot._cache.assume(pod, node)  # as the cycle does, before Reserve
    assert vb.reserve(state, pod, node).ok
    return state


def test_reserve_takes_the_smallest_volume_and_the_next_pod_cannot_take_it() -> None:
    snapshot = nodes()
    volumes = [pv("big", nodes=["node-a"], size="10Gi"), pv("small", nodes=["node-a"], size="2Gi")]
    vb = plugin(
        snapshot, claims=[pvc("c1"), pvc("c2", size="5Gi")], volumes=volumes, classes=[storage_class()]
    )
    first = make_pod("p1").claim("c1").info()
    state = reserve(vb, first, snapshot, "node-a")
    assert vb.assumed.volumes["small"].spec.claim_ref is not None
    assert vb.assumed.volumes["small"].spec.claim_ref.name == "c1"
    # c2 needs 5Gi: only "big" fits it, still free.
    second = make_pod("p2").claim("c2").info()
    assert filter_reasons(vb, second, snapshot)["node-a"] == []
    third_claim_pod = make_pod("p3").claim("c1").info()  # the same claim again: "small" is taken for it
    assert filter_reasons(vb, third_claim_pod, snapshot)["node-a"] == []
    vb.unreserve(state, first, "node-a")
    assert "small" not in vb.assumed.volumes


def test_an_assumed_volume_is_not_offered_to_another_claim() -> None:
    snapshot = nodes()
    vb = plugin(
        snapshot,
        claims=[pvc("c1"), pvc("c2")],
        volumes=[pv("only", nodes=["node-a"])],
        classes=[storage_class()],
    )
    first = make_pod("p1").claim("c1").info()
    state = reserve(vb, first, snapshot, "node-a")
    second = make_pod("p2").claim("c2").info()
    assert filter_reasons(vb, second, snapshot)["node-a"] == [ERR_REASON_BIND_CONFLICT]
    vb.unreserve(state, first, "node-a")
    assert filter_reasons(vb, second, snapshot)["node-a"] == []


def test_args_are_checked() -> None:
    assert VolumeBindingArgs.model_validate({"bindTimeoutSeconds": 5}).bind_timeout_seconds == 5
    with pytest.raises(ValueError, match="should not be a negative value"):
        VolumeBindingArgs.model_validate({"bindTimeoutSeconds": -1})
    with pytest.raises(ValueError, match="not supported yet"):
        VolumeBindingArgs.model_validate({"shape": [{"utilization": 0, "score": 0}]})
    with pytest.raises(ValueError, match="bindTimeout"):
        VolumeBindingArgs.model_validate({"bindTimeout": 5})


# ---- PreBind against the in-memory API server ------------------------------------------------------


async def _pipe(backend: MemoryBackend, handle: Handle, resource: ResourceType[Any]) -> None:
    async for event in backend.watch(resource):
        for listener in handle.informers.listeners(resource):
            listener(event)


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[tuple[MemoryBackend, VolumeBinding, Snapshot]]:
    snapshot = nodes()
    backend = MemoryBackend()
    handle = Handle(backend=backend, snapshot=lambda: snapshot)
    vb = volume_binding.new(VolumeBindingArgs(bind_timeout_seconds=2), handle)
    vb.poll_seconds = 0.01
    tasks = [asyncio.create_task(_pipe(backend, handle, r)) for r in (PVCS, PVS, STORAGECLASSES)]
    await asyncio.sleep(0)
    yield backend, vb, snapshot
    await backend.close()
    for task in tasks:
        task.cancel()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def complete_binding(backend: MemoryBackend, claim_name: str) -> None:
    """What kube-controller-manager's PV controller does once the scheduler set the claimRef."""
    volume = next(v for v in backend.list(PVS) if v.spec.claim_ref and v.spec.claim_ref.name == claim_name)
    claim = backend.get(PVCS, "default", claim_name)
    assert claim is not None
    wire = claim.to_wire()
    wire["spec"]["volumeName"] = volume.metadata.name
    wire["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
    wire["status"] = {"phase": "Bound"}
    backend.apply(PVCS, wire)


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_writes_the_claim_ref_and_waits_for_the_pv_controller(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    backend.apply(STORAGECLASSES, storage_class())
    claim = backend.apply(PVCS, pvc("c"))
    backend.apply(PVS, pv("pv-b", nodes=["node-b"]))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-b")
    binding = asyncio.create_task(vb.pre_bind(state, pod, "node-b"))
    await asyncio.sleep(0.05)
    assert not binding.done()  # waiting for the PV controller
    volume = backend.get(PVS, None, "pv-b")
    assert volume is not None
    assert volume.spec.claim_ref is not None
    assert (volume.spec.claim_ref.name, volume.spec.claim_ref.uid) == ("c", claim.metadata.uid)
    assert (volume.metadata.annotations or {})["pv.kubernetes.io/bound-by-controller"] == "yes"
    complete_binding(backend, "c")
    status = await asyncio.wait_for(binding, 1)
    assert status.ok, status


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_times_out_when_nothing_completes_the_binding(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    vb.args = VolumeBindingArgs(bind_timeout_seconds=0)
    backend.apply(STORAGECLASSES, storage_class())
    backend.apply(PVCS, pvc("c"))
    backend.apply(PVS, pv("pv-b", nodes=["node-b"]))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-b")
    status = await vb.pre_bind(state, pod, "node-b")
    assert (status.code, status.message()) == (Code.ERROR, "binding volumes: context deadline exceeded")


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_fails_when_the_volume_changed_since_it_was_chosen(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    backend.apply(STORAGECLASSES, storage_class())
    backend.apply(PVCS, pvc("c"))
    backend.apply(PVS, pv("pv-b", nodes=["node-b"]))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-b")
    taken = pv("pv-b", nodes=["node-b"], claim=pvc("other"), phase="Bound").to_wire()
    del taken["metadata"]["resourceVersion"]
    backend.apply(PVS, taken)  # someone else bound it in the meantime
    status = await vb.pre_bind(state, pod, "node-b")
    assert status.code == Code.ERROR
    assert "the object has been modified" in status.message()


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_selects_the_node_for_a_claim_to_provision(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    backend.apply(STORAGECLASSES, storage_class(provisioner="csi.example.com"))
    backend.apply(PVCS, pvc("c"))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-c")
    binding = asyncio.create_task(vb.pre_bind(state, pod, "node-c"))
    await asyncio.sleep(0.05)
    claim = backend.get(PVCS, "default", "c")
    assert claim is not None
    assert (claim.metadata.annotations or {})["volume.kubernetes.io/selected-node"] == "node-c"
    # the provisioner creates a volume on node-c; the PV controller binds it
    created = pv("pvc-c", nodes=["node-c"], claim=claim, phase="Bound").to_wire()
    del created["metadata"]["resourceVersion"]
    backend.apply(PVS, created)
    wire = claim.to_wire()
    wire["spec"]["volumeName"] = "pvc-c"
    wire["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    backend.apply(PVCS, wire)
    status = await asyncio.wait_for(binding, 1)
    assert status.ok, status


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_fails_when_the_provisioner_gives_up(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    backend.apply(STORAGECLASSES, storage_class(provisioner="csi.example.com"))
    backend.apply(PVCS, pvc("c"))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-c")
    binding = asyncio.create_task(vb.pre_bind(state, pod, "node-c"))
    await asyncio.sleep(0.05)
    await backend.patch_custom(
        PVCS, "default", "c", {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": None}}}
    )
    status = await asyncio.wait_for(binding, 1)
    assert (status.code, status.message()) == (Code.ERROR, 'binding volumes: provisioning failed for PVC "c"')


def test_memory_backend_merge_patch_honours_the_resource_version_precondition() -> None:
    backend = MemoryBackend()
    stored = backend.apply(PVS, pv("v"))

    async def run() -> None:
        with pytest.raises(Conflict):
            await backend.patch_custom(PVS, None, "v", {"metadata": {"resourceVersion": "0"}})
        await backend.patch_custom(
            PVS, None, "v", {"metadata": {"resourceVersion": stored.metadata.resource_version}}
        )

    asyncio.run(run())


def test_pre_filter_narrows_to_the_nodes_bound_local_volumes_name() -> None:
    snapshot = nodes()
    first, second, anywhere = (pvc(n, volume_name=f"pv-{n}", bound=True) for n in ("c1", "c2", "c3"))
    volumes = [
        pv("pv-c1", nodes=["node-a", "node-b"], claim=first, phase="Bound"),
        pv("pv-c2", nodes=["node-b", "node-c"], claim=second, phase="Bound"),
        pv("pv-c3", claim=anywhere, phase="Bound"),  # no node affinity: any node
    ]
    vb = plugin(snapshot, claims=[first, second, anywhere], volumes=volumes)
    both = vb.pre_filter(CycleState(), make_pod("p").claim("c1").claim("c2").claim("c3").info(), snapshot)
    assert both.node_names == frozenset({"node-b"})
    unrestricted = vb.pre_filter(CycleState(), make_pod("p").claim("c3").info(), snapshot)
    assert unrestricted.node_names is None


@pytest.mark.asyncio(loop_scope="function")
async def test_pre_bind_stops_waiting_when_the_pod_is_deleted(
    cluster: tuple[MemoryBackend, VolumeBinding, Snapshot],
) -> None:
    backend, vb, snapshot = cluster
    backend.apply(STORAGECLASSES, storage_class())
    backend.apply(PVCS, pvc("c"))
    backend.apply(PVS, pv("pv-b", nodes=["node-b"]))
    await settle()
    pod = make_pod("p").claim("c").info()
    state = reserve(vb, pod, snapshot, "node-b")
    binding = asyncio.create_task(vb.pre_bind(state, pod, "node-b"))
    await asyncio.sleep(0.05)
    snapshot._cache.remove_pod(pod.uid)  # the pod informer saw it deleted
    status = await asyncio.wait_for(binding, 1)
    assert status.message() == 'binding volumes: pod does not exist any more: pods "p" not found'
