"""Volumes through kubectl against the real API server: koord-scheduler places a pod where its
WaitForFirstConsumer claim has a static volume, writes the volume's claimRef, and
kube-controller-manager's PV controller (persistentvolume-binder, running in the e2e control
plane) completes the binding, which koord-scheduler waits for before binding the pod. Claims
nothing can satisfy and a ReadWriteOncePod claim in use get kube-scheduler's FailedScheduling
reasons.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.storage import ANN_SELECTED_NODE
from e2e.cluster.controlplane import ControlPlane
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, list_items, make_pod, pods, wait_for
from scheduler.app import AppSettings

NS = "volumes"
CLASS = "koord-e2e-local"
IMMEDIATE_CLASS = "koord-e2e-immediate"
SLOW_CLASS = "koord-e2e-slow-provisioner"
SLOW_LABEL = "koord-e2e/slow-provisioner"
PRE_BOUND = "koord-e2e-pv-pre-bound"
NODE = "cpu-3"
RWOP_NODE = "cpu-4"


def storage_class(
    name: str = CLASS, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def local_volume(
    name: str, node: str, *, size: str = "1Gi", mode: str = "ReadWriteOnce", storage_class: str = CLASS
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": [mode],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "local": {"path": f"/mnt/disks/{name}"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def claim(
    name: str, *, size: str = "1Gi", mode: str = "ReadWriteOnce", storage_class: str = CLASS
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "accessModes": [mode],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


def pod_with(
    name: str, claim_name: str, *, cpu: str = "100m", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    pod = make_pod(name, NS, cpu=cpu, memory="64Mi", labels=labels)
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


def first_failure(cp: ControlPlane, pod: str) -> str | None:
    return next(iter(failed_scheduling(cp, NS, pod)), None)


@pytest.fixture(scope="module")
def volumes(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, _scheduler_process: Scheduler
) -> Iterator[ControlPlane]:
    _scheduler_process.ensure_running(control_plane, scheduler_kubeconfig)
    control_plane.create_namespace(NS)
    volume_names = ["koord-e2e-pv-local", "koord-e2e-pv-rwop"]
    apply(
        control_plane,
        [
            storage_class(),
            local_volume(volume_names[0], NODE),
            local_volume(volume_names[1], RWOP_NODE, mode="ReadWriteOncePod"),
        ],
    )
    yield control_plane
    control_plane.kubectl("delete", "namespace", NS, "--wait=false", check=False)
    control_plane.kubectl("delete", "pv", *volume_names, PRE_BOUND, "--wait=false", check=False)
    control_plane.kubectl(
        "delete", "storageclass", CLASS, IMMEDIATE_CLASS, SLOW_CLASS, "--wait=false", check=False
    )


def test_a_wait_for_first_consumer_claim_lands_on_its_volumes_node_and_binds(volumes: ControlPlane) -> None:
    cp = volumes
    apply(cp, [claim("data"), pod_with("uses-local-pv", "data")])

    def placed() -> str | None:
        pod = next((p for p in pods(cp, NS) if p["metadata"]["name"] == "uses-local-pv"), None)
        return pod["spec"].get("nodeName") if pod else None

    assert wait_for(placed, timeout=90, what="the pod bound") == NODE
    bound = get_object(cp, "pvc", "data", namespace=NS)
    assert bound["status"]["phase"] == "Bound"
    assert bound["spec"]["volumeName"] == "koord-e2e-pv-local"
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    volume = get_object(cp, "pv", "koord-e2e-pv-local")
    assert (volume["spec"]["claimRef"]["namespace"], volume["spec"]["claimRef"]["name"]) == (NS, "data")


def test_a_claim_nothing_can_satisfy_is_reported_with_upstreams_reason(volumes: ControlPlane) -> None:
    cp = volumes
    apply(cp, [claim("too-big", size="100Gi"), pod_with("unsatisfiable", "too-big")])
    message = wait_for(lambda: first_failure(cp, "unsatisfiable"), timeout=60, what="FailedScheduling")
    nodes = len(list_items(cp, "nodes"))
    assert message.startswith(f"0/{nodes} nodes are available: "), message
    assert "node(s) didn't find available persistent volumes to bind" in message, message
    assert get_object(cp, "pvc", "too-big", namespace=NS)["status"]["phase"] == "Pending"
    assert not next(p for p in pods(cp, NS) if p["metadata"]["name"] == "unsatisfiable")["spec"].get(
        "nodeName"
    )


def test_a_missing_claim_is_reported(volumes: ControlPlane) -> None:
    cp = volumes
    apply(cp, [pod_with("no-claim", "does-not-exist")])
    message = wait_for(lambda: first_failure(cp, "no-claim"), timeout=60, what="FailedScheduling")
    nodes = len(list_items(cp, "nodes"))
    assert message.startswith(
        f'0/{nodes} nodes are available: persistentvolumeclaim "does-not-exist" not found'
    ), message


def test_a_read_write_once_pod_claim_in_use_keeps_the_second_pod_pending(volumes: ControlPlane) -> None:
    cp = volumes
    apply(cp, [claim("exclusive", mode="ReadWriteOncePod"), pod_with("rwop-first", "exclusive")])

    def placed() -> str | None:
        pod = next((p for p in pods(cp, NS) if p["metadata"]["name"] == "rwop-first"), None)
        return pod["spec"].get("nodeName") if pod else None

    assert wait_for(placed, timeout=90, what="the first pod bound") == RWOP_NODE
    apply(cp, [pod_with("rwop-second", "exclusive")])
    message = wait_for(lambda: first_failure(cp, "rwop-second"), timeout=60, what="FailedScheduling")
    assert "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode" in (
        message
    ), message
    assert not next(p for p in pods(cp, NS) if p["metadata"]["name"] == "rwop-second")["spec"].get("nodeName")


def test_a_pod_waiting_for_its_immediate_claim_is_bound_once_the_pv_controller_binds_it(
    volumes: ControlPlane,
) -> None:
    """The pod is tried while its claim is unbound (kube-scheduler's reason), then the claim's
    update is the cluster event that sends it back to the queue: without it, the pod would wait
    for the unschedulable pods' five-minute flush."""
    cp = volumes
    apply(
        cp,
        [
            storage_class(IMMEDIATE_CLASS, "Immediate"),
            claim("later", storage_class=IMMEDIATE_CLASS),
            pod_with("waits-for-claim", "later"),
        ],
    )
    message = wait_for(lambda: first_failure(cp, "waits-for-claim"), timeout=60, what="FailedScheduling")
    assert "pod has unbound immediate PersistentVolumeClaims" in message, message
    # Pre-bound to the claim: the PV controller binds the claim as soon as it sees the volume.
    volume = local_volume(PRE_BOUND, NODE, storage_class=IMMEDIATE_CLASS)
    volume["spec"]["claimRef"] = {"namespace": NS, "name": "later"}
    apply(cp, [volume])

    def placed() -> str | None:
        pod = next((p for p in pods(cp, NS) if p["metadata"]["name"] == "waits-for-claim"), None)
        return pod["spec"].get("nodeName") if pod else None

    assert wait_for(placed, timeout=60, what="the pod bound after its claim") == NODE
    assert get_object(cp, "pvc", "later", namespace=NS)["spec"]["volumeName"] == PRE_BOUND


def test_pods_waiting_for_a_slow_provisioner_hold_up_no_other_binding(volumes: ControlPlane) -> None:
    """More pods than koord-scheduler has binding slots wait in VolumeBinding's PreBind for a
    provisioner that never answers (up to bindTimeoutSeconds, ten minutes); a pod without volumes
    is still bound at once, as kube-scheduler, which binds each pod in a goroutine of its own,
    binds it. While PreBind held a binding slot, those pods held every slot."""
    cp = volumes
    waiting = AppSettings.bind_concurrency + 2
    slow = {SLOW_LABEL: "true"}
    try:
        apply(cp, [storage_class(SLOW_CLASS, provisioner="example.com/never-answers")])
        # Created rather than applied: a plain create is the cheaper request for the API server.
        for i in range(waiting):
            slow_claim = claim(f"slow-{i}", storage_class=SLOW_CLASS)
            slow_claim["metadata"]["labels"] = slow
            cp.rest.create(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", slow_claim)
            cp.rest.create(
                f"/api/v1/namespaces/{NS}/pods", pod_with(f"slow-{i}", f"slow-{i}", cpu="5m", labels=slow)
            )

        def claims_in_pre_bind() -> int | None:
            claims = list_items(cp, "pvc", namespace=NS)
            selected = sum(
                1
                for c in claims
                if c["metadata"]["name"].startswith("slow-")
                and ANN_SELECTED_NODE in (c["metadata"].get("annotations") or {})
            )
            return selected if selected >= AppSettings.bind_concurrency else None

        # Every binding slot there is would be held now, were PreBind under the cap.
        wait_for(claims_in_pre_bind, timeout=120, what="the slow pods in PreBind")
        assert not any(p["spec"].get("nodeName") for p in pods(cp, NS, f"{SLOW_LABEL}=true"))
        apply(cp, [make_pod("no-volumes", NS, cpu="10m", memory="16Mi")])

        def placed() -> str | None:
            pod = next((p for p in pods(cp, NS) if p["metadata"]["name"] == "no-volumes"), None)
            return pod["spec"].get("nodeName") if pod else None

        assert wait_for(placed, timeout=30, what="the pod without volumes bound")
    finally:
        cp.kubectl("delete", "pods,pvc", "-n", NS, "-l", f"{SLOW_LABEL}=true", "--wait=false", check=False)
