"""The generic validating webhook (``operators.logic.admission`` behind ``operators.handlers.admission``)
answers every body with a bounded denial: fixed cases of what tests/fuzz/test_hostile_admission.py
found."""

from __future__ import annotations

from typing import Any

import kopf
import pytest

from apis.errors import MESSAGE_LIMIT
from apis.scheduling.elasticquota import ElasticQuota
from apis.scheduling.podgroup import PodGroup
from operators.handlers.admission import _validator
from operators.logic import admission


def _podgroup(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default", **metadata},
        "spec": {"minMember": 1},
    }


def _quota(cpu: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"max": {"cpu": cpu}},
    }


@pytest.mark.parametrize("annotations", ["\ud800", ["a"], 7])
def test_annotations_that_are_no_object_are_denied_by_the_model_not_a_crash(annotations: Any) -> None:
    result = admission.review(PodGroup, _podgroup(annotations=annotations))
    assert not result.allowed
    assert result.message().startswith("metadata.annotations: Input should be a valid dictionary")


def test_an_annotation_value_that_is_no_string_is_left_to_the_model() -> None:
    result = admission.review(PodGroup, _podgroup(annotations={"gang.scheduling.koordinator.sh/groups": 5}))
    assert [e.split(":")[0] for e in result.errors] == [
        "metadata.annotations.gang.scheduling.koordinator.sh/groups"
    ]


def test_a_body_whose_metadata_is_no_object_gets_a_denial_naming_it() -> None:
    body = _podgroup()
    body["metadata"] = "\u0663"
    with pytest.raises(kopf.AdmissionError, match=r"^PodGroup '' is invalid: metadata: Input should be"):
        _validator(PodGroup)(body=body, warnings=[])


def test_a_hundred_thousand_bad_items_get_a_denial_of_bounded_size() -> None:
    quota = _quota("1")
    quota["spec"]["max"] = {f"r{i}": "\u0663" for i in range(100_000)}
    with pytest.raises(kopf.AdmissionError) as denial:
        _validator(ElasticQuota)(body=quota, warnings=[])
    message = str(denial.value)
    assert len(message) <= 2 * MESSAGE_LIMIT
    assert message.startswith("ElasticQuota 'q' is invalid: spec.max.r0: ")
    assert message.endswith(" more problems")


def test_a_long_name_is_cut_in_the_denial() -> None:
    quota = _quota("\u0663")
    quota["metadata"]["name"] = "n" * 100_000
    with pytest.raises(kopf.AdmissionError) as denial:
        _validator(ElasticQuota)(body=quota, warnings=[])
    assert len(str(denial.value)) <= 2 * MESSAGE_LIMIT


def _nested(depth: int) -> Any:
    value: Any = "1"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [900, 5_000])
def test_a_deeply_nested_quantity_is_denied_with_a_short_echo_never_a_recursion_error(depth: int) -> None:
    result = admission.review(ElasticQuota, _quota(_nested(depth)))
    assert [e.split(":")[0] for e in result.errors] == ["spec.max.cpu"]
    assert len(result.message()) < 400
