"""VolumeRestrictions against kube-scheduler's documented cases (volume_restrictions_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.backend.memory import MemoryBackend
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins import volume_restrictions
from scheduler.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons
from tests.scheduler.plugins.storage_objects import feed, pvc

GCE = {"gcePersistentDisk": {"pdName": "disk"}}
GCE_RO = {"gcePersistentDisk": {"pdName": "disk", "readOnly": True}}
EBS = {"awsElasticBlockStore": {"volumeID": "vol-1"}}
EBS_RO = {"awsElasticBlockStore": {"volumeID": "vol-1", "readOnly": True}}
RBD = {"rbd": {"monitors": ["a", "b"], "pool": "p", "image": "img"}}
RBD_OTHER_MON = {"rbd": {"monitors": ["b", "c"], "pool": "p", "image": "img"}}
RBD_OTHER_IMAGE = {"rbd": {"monitors": ["a"], "pool": "p", "image": "other"}}
ISCSI = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}
ISCSI_RO = {"iscsi": {**ISCSI["iscsi"], "readOnly": True}}


def cluster(*existing: dict[str, Any]) -> Snapshot:
    assigned = [make_pod(f"e{i}").volume("v", **source).on("n1").obj() for i, source in enumerate(existing)]
    return make_snapshot(
        [make_node("n1").alloc(cpu="4").obj(), make_node("n2").alloc(cpu="4").obj()], assigned
    )


def plugin(snapshot: Snapshot, **objects: Any) -> VolumeRestrictions:
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    vr = volume_restrictions.new(None, handle)
    feed(handle, **objects)
    return vr


@pytest.mark.parametrize(
    ("existing", "new", "conflict"),
    [
        (GCE, GCE, True),
        (GCE_RO, GCE, True),
        (GCE_RO, GCE_RO, False),  # every mount read-only
        (EBS, EBS, True),
        (EBS_RO, EBS_RO, True),  # EBS: read-only does not help
        (RBD, RBD_OTHER_MON, True),  # an overlapping monitor, the same pool and image
        (RBD, RBD_OTHER_IMAGE, False),
        (ISCSI, ISCSI, True),
        (ISCSI_RO, ISCSI_RO, False),
        (GCE, EBS, False),
    ],
)
def test_disks_mounted_by_a_pod_on_the_node(
    existing: dict[str, Any], new: dict[str, Any], conflict: bool
) -> None:
    snapshot = cluster(existing)
    reasons = filter_reasons(plugin(snapshot), make_pod("p").volume("v", **new).info(), snapshot)
    assert reasons == {"n1": [ERR_REASON_DISK_CONFLICT] if conflict else [], "n2": []}


def test_a_pod_without_such_volumes_is_skipped() -> None:
    snapshot = cluster(GCE)
    status = plugin(snapshot).pre_filter(
        CycleState(), make_pod("p").volume("t", emptyDir={}).info(), snapshot
    )
    assert status.status.code == Code.SKIP


def test_a_missing_claim_is_unresolvable() -> None:
    snapshot = cluster()
    result = plugin(snapshot).pre_filter(CycleState(), make_pod("p").claim("nope").info(), snapshot)
    assert (result.status.code, result.status.message()) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'persistentvolumeclaim "nope" not found',
    )


def test_a_read_write_once_pod_claim_in_use_rejects_every_node() -> None:
    snapshot = make_snapshot(
        [make_node("n1").alloc(cpu="4").obj(), make_node("n2").alloc(cpu="4").obj()],
        [make_pod("user").claim("exclusive").on("n1").obj()],
    )
    vr = plugin(snapshot, claims=[pvc("exclusive", modes=["ReadWriteOncePod"]), pvc("shared")])
    assert filter_reasons(vr, make_pod("p").claim("exclusive").info(), snapshot) == {
        "n1": [ERR_REASON_RWOP_CONFLICT],
        "n2": [ERR_REASON_RWOP_CONFLICT],
    }
    state = CycleState()
    pod = make_pod("p").claim("exclusive").info()
    vr.pre_filter(state, pod, snapshot)
    assert (
        vr.filter(state, pod, snapshot, snapshot.candidate_rows()).unresolvable is None
    )  # preemption may help
    # A ReadWriteOnce claim in use, or the same name in another namespace, is no conflict.
    assert (
        vr.pre_filter(CycleState(), make_pod("q").claim("shared").info(), snapshot).status.code == Code.SKIP
    )
    other = make_pod("q").namespace("other").claim("exclusive").info()
    vr_other = plugin(snapshot, claims=[pvc("exclusive", modes=["ReadWriteOncePod"], namespace="other")])
    assert vr_other.pre_filter(CycleState(), other, snapshot).status.code == Code.SKIP


def test_an_unused_read_write_once_pod_claim_fits() -> None:
    snapshot = cluster()
    vr = plugin(snapshot, claims=[pvc("exclusive", modes=["ReadWriteOncePod"])])
    reasons = filter_reasons(vr, make_pod("p").claim("exclusive").info(), snapshot)
    assert reasons == {"n1": [], "n2": []}
