"""A schemaless reservation template becomes a reserve pod the way Koordinator's NewReservePod
makes one: what Go's zero values would fill in is filled in here."""

from __future__ import annotations

from typing import Any

from apis.scheduling.reservation import Reservation, template_pod_spec
from scheduler.plugins.helper.reservation import reserve_pod


def reservation(template: dict[str, Any]) -> Reservation:
    return Reservation.model_validate(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": "simple-reservation", "uid": "u1"},
            "spec": {"template": template, "owners": [{"object": {"name": "p"}}]},
        }
    )


def test_unnamed_containers_get_unique_names_and_the_rest_is_left_as_written() -> None:
    spec = template_pod_spec(
        {
            "spec": {
                "containers": [{"image": "pause"}, {"name": "container-0"}, {"name": ""}],
                "initContainers": [{"resources": {}}],
                "restartPolicy": "Always",
            }
        }
    )
    names = [c["name"] for c in spec["containers"]]
    assert names[1] == "container-0"
    assert len(set(names)) == 3
    assert all(names)
    assert spec["initContainers"] == [{"resources": {}, "name": "init-container-0"}]
    assert spec["restartPolicy"] == "Always"
    assert template_pod_spec(None) == {}
    assert template_pod_spec({"spec": {"containers": "garbage"}}) == {"containers": "garbage"}


def test_koordinators_e2e_template_is_a_reserve_pod_of_its_requests() -> None:
    """test/e2e/testing-manifests/scheduling/simple-reservation.yaml: a container with no name."""
    pod = reserve_pod(
        reservation(
            {
                "metadata": {"name": "pause", "namespace": "default"},
                "spec": {
                    "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                    "schedulerName": "koord-scheduler",
                },
            }
        )
    )
    assert pod.pod.spec.containers[0].name == "container-0"
    assert pod.requests["cpu"] == 1000
    assert pod.requests["memory"] == 1 << 30


def test_a_template_with_no_containers_reserves_nothing_but_a_pod_slot() -> None:
    pod = reserve_pod(reservation({"spec": {"schedulerName": "koord-scheduler"}}))
    assert {name: amount for name, amount in pod.requests.items() if amount and name != "pods"} == {}
