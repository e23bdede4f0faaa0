"""A Reservation of GPUs on the real API server: it takes a specific card, nobody else gets it, its
owner gets exactly that card, also after koord-scheduler restarts.

One fake 2-GPU node of its own (tainted, so no other scenario's pods land there). koordlet
(``--simulate-devices``) writes its Device and koord-manager sums the cards into its allocatable,
as on a cluster; ``nvidia.com/gpu`` is the device plugin's, written with the node. What is checked
is what a user sees: the Reservation's ``device-allocated`` annotation, the pods' nodes and their
``device-allocated`` annotations, and FailedScheduling events.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from e2e.cluster.controlplane import ControlPlane
from e2e.devices import Pool
from e2e.devices import reported_devices as reported_devices_of
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for

NAMESPACE = "reservation-devices"
NODE = "resdev-gpu-0"
POOL = Pool("reservation-devices")
TAINT, SELECTOR = POOL.taint, POOL.selector
RESERVATION = "gpu-hold"
OWNER_LABELS = {"app": "gpu-trainer"}


DEVICES = {
    "reportIntervalSeconds": 5,
    "nodes": [{"name": NODE, "gpus": {"count": 2, "model": "NVIDIA L40S", "memory": "80Gi"}}],
}


@pytest.fixture(scope="module")
def reported_devices(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    node = POOL.node(NODE, {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "2"})
    with reported_devices_of(
        control_plane,
        [node],
        DEVICES,
        tmp_path_factory.mktemp("reservation-devices"),
        koordlet="koordlet-resdev",
        synced={NODE: {"koordinator.sh/gpu-core": "200"}},
    ):
        yield


def _reservation() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": RESERVATION},
        "spec": {
            "template": {
                "metadata": {"namespace": NAMESPACE},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "nodeSelector": SELECTOR,
                    "tolerations": [TAINT],
                    "containers": [
                        {
                            "name": "main",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
            "owners": [{"labelSelector": {"matchLabels": OWNER_LABELS}}],
            "ttl": "1h",
        },
    }


def _gpu_pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return make_pod(
        name,
        NAMESPACE,
        cpu="100m",
        memory="64Mi",
        extra={"nvidia.com/gpu": "1"},
        node_selector=SELECTOR,
        tolerations=[TAINT],
        labels=labels,
    )


def _minors(annotations: dict[str, str] | None) -> list[int]:
    raw = (annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
    assert raw is not None, annotations
    return [entry["minor"] for entry in json.loads(raw)["gpu"]]


def _bound(cp: ControlPlane, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        return next(
            (p for p in pods(cp, NAMESPACE) if p["metadata"]["name"] == name and p["spec"].get("nodeName")),
            None,
        )

    return wait_for(check, timeout=60, what=f"{name} bound")


def test_a_reserved_gpu_is_held_from_strangers_and_given_to_its_owner(
    control_plane: ControlPlane, scheduler: Scheduler, scheduler_kubeconfig: Path, reported_devices: None
) -> None:
    cp = control_plane
    cp.create_namespace(NAMESPACE)
    try:
        apply(cp, [_reservation()])

        def placed() -> dict[str, Any] | None:
            found = get_object(cp, "reservation", RESERVATION)
            status = found.get("status") or {}
            return found if status.get("phase") == "Available" else None

        reservation = wait_for(placed, timeout=60, what=f"{RESERVATION} Available")
        assert reservation["status"]["nodeName"] == NODE
        reserved = _minors(reservation["metadata"].get("annotations"))
        assert len(reserved) == 1
        assert reserved[0] in (0, 1)  # a card the Device lists

        # The node's other card goes to the first stranger; the second stranger finds none.
        apply(cp, [_gpu_pod("filler")])
        filler = _bound(cp, "filler")
        assert filler["spec"]["nodeName"] == NODE
        assert _minors(filler["metadata"]["annotations"]) == [1 - reserved[0]]
        apply(cp, [_gpu_pod("stranger")])
        message = wait_for(
            lambda: [m for m in failed_scheduling(cp, NAMESPACE, "stranger") if "Insufficient" in m],
            timeout=60,
            what="FailedScheduling for the stranger",
        )[-1]
        assert "1 Insufficient nvidia.com/gpu" in message or "1 Insufficient gpu devices" in message, message

        # A restarted scheduler reads the reserved card back from the Reservation.
        scheduler.component.stop_now(signal.SIGKILL)
        restarted = start_scheduler(cp, scheduler_kubeconfig, scheduler.component.name)
        scheduler.component, scheduler.port = restarted.component, restarted.port

        # The owner gets exactly the reserved card and says which reservation it used.
        apply(cp, [_gpu_pod("owner", OWNER_LABELS)])
        owner = _bound(cp, "owner")
        assert owner["spec"]["nodeName"] == NODE
        assert _minors(owner["metadata"]["annotations"]) == reserved
        allocated = json.loads(
            owner["metadata"]["annotations"]["scheduling.koordinator.sh/reservation-allocated"]
        )
        assert allocated["name"] == RESERVATION
        stranger = next(p for p in pods(cp, NAMESPACE) if p["metadata"]["name"] == "stranger")
        assert not stranger["spec"].get("nodeName")  # the card is the owner's now, not free
    finally:
        cp.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", check=False)
        cp.kubectl("delete", "reservation", RESERVATION, "--ignore-not-found", check=False)
