from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import reservation as r


def test_keys() -> None:
    assert r.ANNOTATION_RESERVATION_AFFINITY == "scheduling.koordinator.sh/reservation-affinity"
    assert r.ANNOTATION_EXACT_MATCH_RESERVATION == "scheduling.koordinator.sh/exact-match-reservation"
    assert r.LABEL_RESERVATION_IGNORED == "scheduling.koordinator.sh/reservation-ignored"
    assert r.ANNOTATION_RESERVATION_ALLOCATED == "scheduling.koordinator.sh/reservation-allocated"
    assert (
        r.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS
        == "scheduling.koordinator.sh/reservation-restricted-options"
    )
    assert r.LABEL_RESERVATION_ORDER == "scheduling.koordinator.sh/reservation-order"
    assert r.LABEL_PRE_ALLOCATION_REQUIRED == "scheduling.koordinator.sh/pre-allocation-required"
    assert r.LABEL_POD_PRE_ALLOCATABLE == "pod.koordinator.sh/is-pre-allocatable"
    assert r.ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY == "pod.koordinator.sh/pre-allocatable-priority"
    assert r.LABEL_POD_OPERATING_MODE == "scheduling.koordinator.sh/operating-mode"
    assert r.ANNOTATION_RESERVATION_OWNERS == "scheduling.koordinator.sh/reservation-owners"
    assert r.ANNOTATION_RESERVATION_CURRENT_OWNER == "scheduling.koordinator.sh/reservation-current-owner"


def test_affinity_by_name_from_v16_notes() -> None:
    affinity = r.parse_reservation_affinity('{"name":"test-reservation"}')
    assert affinity.name == "test-reservation"
    assert affinity.to_wire() == {"name": "test-reservation"}


def test_affinity_tolerations_from_v16_notes() -> None:
    affinity = r.parse_reservation_affinity(
        '{"tolerations":[{"key":"test-taint-key","operator":"Equal","value":"test-taint-value","effect":"NoSchedule"}]}'
    )
    assert affinity.tolerations is not None
    toleration = affinity.tolerations[0]
    assert (toleration.key, toleration.operator, toleration.value, toleration.effect) == (
        "test-taint-key",
        "Equal",
        "test-taint-value",
        "NoSchedule",
    )


def test_affinity_selector_terms() -> None:
    affinity = r.parse_reservation_affinity(
        '{"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": '
        '[{"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}]},'
        ' "reservationSelector": {"app": "x"}}'
    )
    terms = affinity.required_during_scheduling_ignored_during_execution
    assert terms is not None
    assert terms.reservation_selector_terms is not None
    assert terms.reservation_selector_terms[0].match_expressions is not None
    assert terms.reservation_selector_terms[0].match_expressions[0].values == ["a"]
    assert affinity.reservation_selector == {"app": "x"}


def test_affinity_empty_and_absent() -> None:
    assert r.get_reservation_affinity({}) is None
    assert r.get_reservation_affinity({r.ANNOTATION_RESERVATION_AFFINITY: ""}) == r.ReservationAffinity()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"name": 1}', "name: Input should be a valid string", id="name-int"),
        pytest.param(
            '{"tolerations": {"key": "a"}}', "tolerations: Input should be a valid array", id="tol-object"
        ),
        pytest.param(
            '{"tolerations": [{"key": "a", "tolerationSeconds": "60"}]}',
            "tolerations[0].tolerationSeconds",
            id="tol-seconds-string",
        ),
        pytest.param('{"reservationSelector": {"app": 1}}', "reservationSelector.app", id="selector-int"),
        pytest.param("{'name': 'x'}", "malformed JSON", id="single-quotes"),
    ],
)
def test_affinity_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_reservation_affinity(raw)
    assert caught.value.key == r.ANNOTATION_RESERVATION_AFFINITY
    assert fragment in caught.value.problem


def test_exact_match_corrected_v16_example() -> None:
    spec = r.parse_exact_match_reservation('{"resourceNames":["cpu","memory","nvidia.com/gpu"]}')
    assert spec.resource_names == ["cpu", "memory", "nvidia.com/gpu"]
    assert r.get_exact_match_reservation({}) is None
    assert r.get_exact_match_reservation({r.ANNOTATION_EXACT_MATCH_RESERVATION: ""}) is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            '{"resourceNames":{"cpu","memory","nvidia.com/gpu"}}',
            "malformed JSON",
            id="v1.6-notes-as-published",
        ),
        pytest.param('{"resourceNames":"cpu"}', "resourceNames: Input should be a valid array", id="string"),
        pytest.param(
            '{"resourceNames":{"cpu":1}}', "resourceNames: Input should be a valid array", id="object"
        ),
    ],
)
def test_exact_match_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_exact_match_reservation(raw)
    assert caught.value.key == r.ANNOTATION_EXACT_MATCH_RESERVATION
    assert fragment in caught.value.problem


def test_reservation_ignored_label() -> None:
    assert r.is_reservation_ignored({r.LABEL_RESERVATION_IGNORED: "true"})
    assert not r.is_reservation_ignored({r.LABEL_RESERVATION_IGNORED: "True"})
    assert not r.is_reservation_ignored(None)


def test_allocated() -> None:
    allocated = r.parse_reservation_allocated('{"name":"r1","uid":"123-456"}')
    assert (allocated.name, allocated.uid) == ("r1", "123-456")
    assert r.get_reservation_allocated({}) is None
    with pytest.raises(InvalidAnnotation, match="uid"):
        r.parse_reservation_allocated('{"name":"r1","uid":123}')


def test_restricted_options() -> None:
    assert r.parse_reservation_restricted_options('{"resources": ["cpu", "memory"]}').resources == [
        "cpu",
        "memory",
    ]
    assert r.get_reservation_restricted_options({}).resources is None
    assert (
        r.get_reservation_restricted_options({r.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS: ""}).resources
        is None
    )
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_reservation_restricted_options('{"resources": "cpu"}')
    assert caught.value.key == r.ANNOTATION_RESERVATION_RESTRICTED_OPTIONS


@pytest.mark.parametrize(("raw", "expected"), [("1", 1), ("0", 0), ("10", 10), ("-1", -1)])
def test_reservation_order(raw: str, expected: int) -> None:
    assert r.get_reservation_order({r.LABEL_RESERVATION_ORDER: raw}) == expected


@pytest.mark.parametrize("raw", ["first", "1.5", "0x1"])
def test_reservation_order_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_reservation_order(raw)
    assert caught.value.key == r.LABEL_RESERVATION_ORDER


def test_operating_mode() -> None:
    assert r.is_reservation_operating_mode({r.LABEL_POD_OPERATING_MODE: "Reservation"})
    assert not r.is_reservation_operating_mode({r.LABEL_POD_OPERATING_MODE: "Runnable"})
    assert not r.is_reservation_operating_mode({})


def test_owners() -> None:
    owners = r.parse_reservation_owners(
        '[{"object": {"kind": "Pod", "name": "p", "namespace": "default"}},'
        ' {"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",'
        ' "controller": true, "namespace": "other"}},'
        ' {"labelSelector": {"matchLabels": {"app": "x"}}}]'
    )
    assert owners[0].object is not None
    assert owners[0].object.name == "p"
    assert owners[1].controller is not None
    assert owners[1].controller.namespace == "other"
    assert owners[2].label_selector is not None
    assert owners[2].label_selector.match_labels == {"app": "x"}
    assert r.get_reservation_owners({}) is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"object": {}}', "Input should be a valid array", id="not-a-list"),
        pytest.param(
            '[{"controller": {"kind": "ReplicaSet"}}]', "[0].controller.apiVersion: Field required", id="ctrl"
        ),
        pytest.param(
            '[{"labelSelector": {"matchLabels": []}}]', "[0].labelSelector.matchLabels", id="selector"
        ),
    ],
)
def test_owners_reject(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_reservation_owners(raw)
    assert caught.value.key == r.ANNOTATION_RESERVATION_OWNERS
    assert fragment in caught.value.problem


def test_current_owner() -> None:
    owner = r.parse_reservation_current_owner('{"namespace": "default", "name": "pod-1", "uid": "u1"}')
    assert (owner.namespace, owner.name, owner.uid) == ("default", "pod-1", "u1")
    assert r.get_reservation_current_owner({r.ANNOTATION_RESERVATION_CURRENT_OWNER: ""}) is None
    with pytest.raises(InvalidAnnotation) as caught:
        r.parse_reservation_current_owner('{"name": ["pod-1"]}')
    assert caught.value.problem.startswith("name: ")
