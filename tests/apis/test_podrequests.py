"""A pod's requests as Kubernetes' ``resourcehelper.PodRequests`` sums them, exactly."""

from __future__ import annotations

from typing import Any

from apis.core import PodSpec
from apis.podrequests import pod_requests
from apis.quantity import Quantity


def _container(name: str, requests: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **extra}
    if requests is not None:
        body["resources"] = {"requests": requests}
    return body


def _requests(spec: dict[str, Any]) -> dict[str, str]:
    return {name: str(q) for name, q in pod_requests(PodSpec.model_validate(spec)).items()}


def test_containers_are_summed_exactly() -> None:
    spec = {
        "containers": [_container("a", {"cpu": "100m", "memory": "1Gi"}), _container("b", {"cpu": "0.2"})]
    }
    assert _requests(spec) == {"cpu": "300m", "memory": "1Gi"}
    assert pod_requests(PodSpec.model_validate(spec))["cpu"] == Quantity.parse("300m")


def test_an_init_container_raises_a_resource_to_its_own_need() -> None:
    spec = {
        "initContainers": [_container("init", {"cpu": "2", "memory": "100Mi"})],
        "containers": [_container("main", {"cpu": "1", "memory": "1Gi"})],
    }
    assert _requests(spec) == {"cpu": "2", "memory": "1Gi"}


def test_sidecars_run_beside_the_containers_and_the_later_init_containers() -> None:
    spec = {
        "initContainers": [
            _container("sidecar", {"cpu": "500m"}, restartPolicy="Always"),
            _container("init", {"cpu": "2"}),
        ],
        "containers": [_container("main", {"cpu": "1"})],
    }
    # main + sidecar = 1.5; init runs beside the sidecar started before it = 2.5.
    assert _requests(spec) == {"cpu": "2500m"}


def test_overhead_is_added_and_limits_are_not_requests() -> None:
    spec = {
        "containers": [
            _container("main", {"cpu": "1"}),
            {"name": "lim", "resources": {"limits": {"cpu": "4"}}},
        ],
        "overhead": {"cpu": "250m"},
    }
    assert _requests(spec) == {"cpu": "1250m"}
    assert _requests({"containers": [{"name": "lim", "resources": {"limits": {"cpu": "4"}}}]}) == {}
