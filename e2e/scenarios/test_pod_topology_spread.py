"""PodTopologySpread on the real API server, over the ``spread`` pool of e2e/clusters/e2e.yaml:
spread-0..5, two per zone (zone-0, zone-1, zone-2), tainted koord-e2e/pool=spread."""

from __future__ import annotations

from collections import Counter
from typing import Any

from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, make_pod, pods, wait_for

ZONE = "topology.kubernetes.io/zone"
ZONE_OF = {f"spread-{i}": f"zone-{i // 2}" for i in range(6)}
TOLERATE = [{"key": "koord-e2e/pool", "operator": "Equal", "value": "spread", "effect": "NoSchedule"}]
SPREAD_REASON = "node(s) didn't match pod topology spread constraints"


def spread_pod(
    name: str, namespace: str, app: str, *, constraint: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    extra_labels = kw.pop("labels", {})
    pod = make_pod(
        name,
        namespace,
        cpu="1",
        memory="1Gi",
        tolerations=TOLERATE,
        labels={"app": app, **extra_labels},
        **kw,
    )
    if constraint is not None:
        pod["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
                **constraint,
            }
        ]
    return pod


def bound(cp: ControlPlane, namespace: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods(cp, namespace) if p["spec"].get("nodeName")
    }


def bound_count(cp: ControlPlane, namespace: str, count: int) -> dict[str, str] | None:
    placed = bound(cp, namespace)
    return placed if len(placed) >= count else None


def test_zone_spread_places_two_per_zone_and_refuses_a_pod_that_would_break_it(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    ns = "spread-zones"
    control_plane.create_namespace(ns)
    apply(control_plane, [spread_pod(f"web-{i}", ns, "web", constraint={}) for i in range(6)])
    placed = wait_for(lambda: bound_count(control_plane, ns, 6), timeout=60, what="6 spread pods bound")
    assert Counter(ZONE_OF[node] for node in placed.values()) == {"zone-0": 2, "zone-1": 2, "zone-2": 2}

    # zone-0 gets a third matching pod (no constraint of its own), so the zones hold 3/2/2 ...
    apply(control_plane, [spread_pod("extra", ns, "web", node_selector={ZONE: "zone-0"})])
    wait_for(lambda: bound_count(control_plane, ns, 7), timeout=60, what="the extra pod bound")
    # ... and a pod that may only go to zone-0 (counting every zone) would make it 4/2/2.
    pinned = spread_pod(
        "skewed", ns, "web", constraint={"nodeAffinityPolicy": "Ignore"}, node_selector={ZONE: "zone-0"}
    )
    apply(control_plane, [pinned])
    messages = wait_for(
        lambda: failed_scheduling(control_plane, ns, "skewed"), timeout=60, what="FailedScheduling for skewed"
    )
    assert f"2 {SPREAD_REASON}" in messages[-1], messages
    assert "skewed" not in bound(control_plane, ns)


def test_a_gang_with_zone_spread_over_two_zones_is_placed_two_and_two(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    ns = "spread-gang"
    control_plane.create_namespace(ns)
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {"minMember": 4},
    }
    two_zones = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-1", "zone-2"]}]}
            ]
        }
    }
    members = []
    for i in range(4):
        member = spread_pod(
            f"worker-{i}", ns, "train", constraint={}, labels={"pod-group.scheduling.sigs.k8s.io": "train"}
        )
        member["spec"]["affinity"] = {"nodeAffinity": two_zones}
        members.append(member)
    apply(control_plane, [group, *members])
    placed = wait_for(lambda: bound_count(control_plane, ns, 4), timeout=90, what="the 4 gang members bound")
    assert Counter(ZONE_OF[node] for node in placed.values()) == {"zone-1": 2, "zone-2": 2}
