"""VolumeZone against kube-scheduler's documented cases (volume_zone_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.backend.memory import MemoryBackend
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins import volume_zone
from scheduler.plugins.volume_zone import ERR_REASON_CONFLICT, VolumeZone
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons
from tests.scheduler.plugins.storage_objects import feed, pv, pvc, storage_class

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"


def cluster() -> Snapshot:
    return make_snapshot(
        [
            make_node("zone-a").alloc(cpu="4").label(ZONE, "us-west1-a").label(REGION, "us-west1").obj(),
            make_node("zone-b").alloc(cpu="4").label(ZONE, "us-west1-b").label(REGION, "us-west1").obj(),
            make_node("beta-a").alloc(cpu="4").label(BETA_ZONE, "us-west1-a").obj(),
            make_node("no-zone").alloc(cpu="4").obj(),
        ]
    )


def plugin(snapshot: Snapshot, labels: dict[str, str], **more: Any) -> VolumeZone:
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    vz = volume_zone.new(None, handle)
    claim = pvc("c", volume_name="v", bound=True)
    feed(
        handle,
        claims=[claim, *more.get("claims", [])],
        volumes=[pv("v", labels=labels, claim=claim, phase="Bound")],
        classes=more.get("classes", []),
    )
    return vz


@pytest.mark.parametrize(
    ("labels", "fits"),
    [
        ({ZONE: "us-west1-a"}, {"zone-a", "no-zone"}),  # a GA key is not matched by a node's beta label
        ({BETA_ZONE: "us-west1-a"}, {"zone-a", "beta-a", "no-zone"}),  # a beta key matches the GA label
        ({ZONE: "us-west1-a__us-west1-b"}, {"zone-a", "zone-b", "no-zone"}),
        ({REGION: "us-west1"}, {"zone-a", "zone-b", "no-zone"}),
        ({}, {"zone-a", "zone-b", "beta-a", "no-zone"}),
    ],
)
def test_bound_volume_zones_against_node_labels(labels: dict[str, str], fits: set[str]) -> None:
    snapshot = cluster()
    reasons = filter_reasons(plugin(snapshot, labels), make_pod("p").claim("c").info(), snapshot)
    assert {n for n, r in reasons.items() if not r} == fits
    assert all(r == [ERR_REASON_CONFLICT] for n, r in reasons.items() if n not in fits)


def test_unbound_wait_for_first_consumer_claims_are_skipped_and_immediate_ones_refused() -> None:
    snapshot = cluster()
    vz = plugin(
        snapshot,
        {ZONE: "us-west1-a"},
        claims=[pvc("later"), pvc("now", storage_class="fast"), pvc("bare", storage_class=None)],
        classes=[storage_class(), storage_class("fast", mode="Immediate")],
    )
    assert vz.pre_filter(CycleState(), make_pod("p").claim("later").info(), snapshot).status.code == Code.SKIP
    for claim, message in (
        ("now", "PersistentVolume had no name"),
        ("bare", "PersistentVolumeClaim had no pv name and storageClass name"),
        ("missing", 'persistentvolumeclaim "missing" not found'),
    ):
        status = vz.pre_filter(CycleState(), make_pod("p").claim(claim).info(), snapshot).status
        assert (status.code, status.message()) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)
