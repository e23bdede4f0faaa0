"""Reservation admission: every rule through ``admission.review`` (what the webhook calls), with the
field in its message, and the bound-spec rule of updates."""

from __future__ import annotations

from typing import Any

import pytest

from apis.scheduling.reservation import Reservation
from operators.logic import admission
from operators.logic.reservation_admission import validate_update

TEMPLATE = {"spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}}
OWNERS = [{"object": {"name": "p", "namespace": "default"}}]


def body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "r"},
        "spec": {"template": TEMPLATE, "owners": OWNERS, **spec},
    }


def problems(**spec: Any) -> str:
    result = admission.review(Reservation, body(**spec))
    assert not result.allowed
    return result.message()


def containers(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]}}


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {
            "owners": [
                {"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u"}}
            ]
        },
        {"owners": [{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]},
        {"owners": [{"labelSelector": {}}]},
        {"owners": [{"object": {"uid": "u"}}]},
        {"ttl": "0s"},
        {"expires": "2026-11-26T00:00:00Z"},
        {"expires": "2026-11-26T00:00:00Z", "ttl": "24h"},  # the CRD's default ttl beside expires
        {
            "template": {
                "spec": {
                    "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
                    "containers": [{"name": "m"}],
                }
            }
        },
    ],
)
def test_valid_reservations_pass(spec: dict[str, Any]) -> None:
    result = admission.review(Reservation, body(**spec))
    assert result.allowed, result.message()


def test_a_missing_template_is_rejected() -> None:
    assert (
        "spec.template: Field required"
        in admission.review(
            Reservation, {"kind": "Reservation", "metadata": {"name": "r"}, "spec": {"owners": OWNERS}}
        ).message()
    )
    assert (
        problems(template={})
        == "spec.template: Required value: a pod template giving the resources to reserve"
    )


KOORDINATOR_E2E_TEMPLATE = {
    # test/e2e/testing-manifests/scheduling/simple-reservation.yaml in Koordinator's repository: its
    # container has no name, and its template sets metadata.name.
    "metadata": {"name": "pause", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "resources": {
                    "limits": {"cpu": "1", "memory": "1Gi"},
                    "requests": {"cpu": "1", "memory": "1Gi"},
                }
            }
        ],
        "restartPolicy": "Always",
        "schedulerName": "koord-scheduler",
    },
}


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(KOORDINATOR_E2E_TEMPLATE, id="koordinator-e2e-container-without-name"),
        pytest.param({"spec": {}}, id="no-containers"),
        pytest.param({"metadata": {"labels": {"a": "b"}}}, id="no-spec"),
        pytest.param(containers({}), id="no-requests"),
        pytest.param(containers({"limits": {"cpu": "1"}}), id="limits-only"),
        pytest.param(containers({"requests": {"cpu": "0"}}), id="zero-requests"),
    ],
)
def test_a_schemaless_template_is_accepted_as_koordinator_accepts_it(template: dict[str, Any]) -> None:
    """Koordinator declares spec.template x-kubernetes-preserve-unknown-fields and checks only that
    it is there (util/reservation.ValidateReservation): these are all accepted there."""
    result = admission.review(Reservation, body(template=template))
    assert result.allowed, result.message()


def test_a_template_of_the_wrong_shape_is_refused_naming_the_field() -> None:
    """What Koordinator's typed client could not decode is refused here instead of breaking the
    scheduler's informer."""
    assert problems(template={"spec": "main"}) == "spec.template.spec: Invalid value: str: must be an object"
    assert problems(template={"spec": {"containers": {"name": "m"}}}).startswith(
        "spec.template.spec.containers: Input should be a valid list"
    )


@pytest.mark.parametrize("name", [{"k0": "v"}, ["m"], 7])
def test_a_container_name_that_is_no_string_is_refused_naming_the_field(name: object) -> None:
    """Hypothesis's full profile found a dict as a container's name crashing the webhook (unhashable
    while the unnamed containers were named): it is a denial naming the field, like any bad type."""
    template = {"spec": {"containers": [{"name": name}, {}]}}
    assert problems(template=template).startswith(
        "spec.template.spec.containers[0].name: Input should be a valid string"
    )


def test_negative_and_unparseable_requests_are_rejected() -> None:
    assert problems(template=containers({"requests": {"cpu": "1"}}, {"requests": {"memory": "-1Gi"}})) == (
        "spec.template.spec.containers[1].resources.requests[memory]: Invalid value: '-1Gi': "
        "must be greater than or equal to 0"
    )
    assert problems(template=containers({"requests": {"cpu": "lots"}})).startswith(
        "spec.template.spec.containers[0].resources.requests.cpu: Value error, invalid quantity 'lots'"
    )


def test_empty_owners_and_an_owner_with_no_field_are_rejected() -> None:
    assert problems(owners=[]).startswith("spec.owners: List should have at least 1 item")
    assert problems(owners=[{}]) == (
        "spec.owners[0]: Value error, an owner must set at least one of object, controller, labelSelector"
    )


def test_an_object_owner_needs_a_name_or_uid() -> None:
    assert problems(owners=[{"object": {"namespace": "default"}}]) == (
        "spec.owners[0].object: Required value: name or uid of the owner pod"
    )


def test_a_controller_owner_needs_every_reference_field() -> None:
    missing = problems(owners=[{"controller": {"apiVersion": "apps/v1", "name": "web"}}])
    assert "spec.owners[0].controller.kind: Field required" in missing
    assert "spec.owners[0].controller.uid: Field required" in missing
    empty = problems(
        owners=[{"controller": {"apiVersion": "", "kind": "ReplicaSet", "name": "web", "uid": ""}}]
    )
    why = "a controller owner needs apiVersion, kind, name and uid (it is matched by uid)"
    assert empty.split("; ") == [
        f"spec.owners[0].controller.apiVersion: Required value: {why}",
        f"spec.owners[0].controller.uid: Required value: {why}",
    ]


def test_an_invalid_label_selector_is_rejected() -> None:
    selector = {
        "matchExpressions": [
            {"key": "a", "operator": "Exists", "values": ["x"]},
            {"key": "b", "operator": "Equals", "values": ["x"]},
            {"key": "c", "operator": "In"},
        ]
    }
    found = problems(owners=[*OWNERS, {"labelSelector": selector}]).split("; ")
    assert found == [
        "spec.owners[1].labelSelector.matchExpressions[0].values: Forbidden: may not be specified when "
        "`operator` is 'Exists' or 'DoesNotExist'",
        "spec.owners[1].labelSelector.matchExpressions[1].operator: Invalid value: 'Equals': not a valid "
        "selector operator",
        "spec.owners[1].labelSelector.matchExpressions[2].values: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn'",
    ]


def test_ttl_and_expires_together_are_rejected() -> None:
    assert problems(ttl="1h", expires="2026-11-26T00:00:00Z") == (
        "spec.ttl: Forbidden: ttl '1h' and spec.expires are mutually exclusive; set only one"
    )


def test_an_unparseable_or_negative_ttl_is_rejected() -> None:
    assert problems(ttl="1d").startswith("spec.ttl: Value error, invalid duration '1d'")
    assert (
        problems(ttl="-5m") == "spec.ttl: Invalid value: '-5m': must not be negative ('0s' disables expiry)"
    )


def _bound(**spec: Any) -> Reservation:
    return Reservation.model_validate(
        {**body(**spec), "status": {"phase": "Available", "nodeName": "node-1"}}
    )


def test_a_bound_reservation_keeps_its_template_and_owners() -> None:
    old = _bound()
    assert validate_update(_bound(ttl="2h", allocateOnce=False), old) == []
    assert validate_update(_bound(template=containers({"requests": {"cpu": "2"}})), old) == [
        "spec.template: Forbidden: may not change once the reservation is bound to node node-1"
    ]
    assert validate_update(_bound(owners=[{"object": {"name": "q"}}]), old) == [
        "spec.owners: Forbidden: may not change once the reservation is bound to node node-1"
    ]


def test_an_unbound_reservation_may_change_its_template_and_owners() -> None:
    old = Reservation.model_validate(body())
    new = Reservation.model_validate(
        body(template=containers({"requests": {"cpu": "2"}}), owners=[{"object": {"name": "q"}}])
    )
    assert validate_update(new, old) == []
