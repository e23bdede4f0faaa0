"""ElasticQuota defaulting at admission (algorithms 4.9 rule 4)."""

from __future__ import annotations

from typing import Any

from apis.extension import quota as keys
from apis.scheduling.elasticquota import ElasticQuota
from operators.logic.quota_defaults import defaults


def eq(
    name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any
) -> ElasticQuota:
    return ElasticQuota.model_validate(
        {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}, "spec": spec}
    )


def test_parent_defaults_to_the_root_and_shared_weight_to_max() -> None:
    changes = defaults(eq("team", max={"cpu": "8", "memory": "16Gi"}), None, [])
    assert changes == {
        "labels": {keys.LABEL_QUOTA_PARENT: keys.ROOT_QUOTA_NAME},
        "annotations": {keys.ANNOTATION_SHARED_WEIGHT: '{"cpu":"8","memory":"16Gi"}'},
    }


def test_the_root_gets_no_parent() -> None:
    assert defaults(eq(keys.ROOT_QUOTA_NAME), None, [])["labels"] == {}


def test_a_new_child_takes_its_parents_tree_id() -> None:
    tree = eq("tree", labels={keys.LABEL_QUOTA_TREE_ID: "42", keys.LABEL_QUOTA_IS_PARENT: "true"})
    child = eq("c", labels={keys.LABEL_QUOTA_PARENT: "tree"})
    assert defaults(child, None, [tree])["labels"] == {keys.LABEL_QUOTA_TREE_ID: "42"}


def test_an_update_keeps_the_previous_tree_id() -> None:
    old = eq("c", labels={keys.LABEL_QUOTA_PARENT: "tree", keys.LABEL_QUOTA_TREE_ID: "7"})
    new = eq("c", labels={keys.LABEL_QUOTA_PARENT: "tree"})
    assert defaults(new, old, [])["labels"] == {keys.LABEL_QUOTA_TREE_ID: "7"}


def test_shared_weight_follows_max_keys_and_keeps_its_values() -> None:
    weight = {keys.ANNOTATION_SHARED_WEIGHT: '{"cpu":"1","gpu":"3"}'}
    quota = eq(
        "t", labels={keys.LABEL_QUOTA_PARENT: "p"}, annotations=weight, max={"cpu": "8", "memory": "1Gi"}
    )
    assert defaults(quota, None, [])["annotations"] == {
        keys.ANNOTATION_SHARED_WEIGHT: '{"cpu":"1","memory":"1Gi"}'
    }


def test_nothing_changes_on_a_defaulted_quota() -> None:
    weight = {keys.ANNOTATION_SHARED_WEIGHT: '{"cpu":"1"}'}
    quota = eq("t", labels={keys.LABEL_QUOTA_PARENT: "p"}, annotations=weight, max={"cpu": "8"})
    assert defaults(quota, None, []) == {"labels": {}, "annotations": {}}


def test_a_malformed_weight_is_left_for_validation() -> None:
    quota = eq(
        "t",
        labels={keys.LABEL_QUOTA_PARENT: "p"},
        annotations={keys.ANNOTATION_SHARED_WEIGHT: "x"},
        max={"cpu": "8"},
    )
    assert defaults(quota, None, [])["annotations"] == {}
