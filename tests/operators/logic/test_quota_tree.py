"""ElasticQuota tree validation (algorithms 4.9), table-driven over small trees."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.extension import quota as keys
from apis.scheduling.elasticquota import ElasticQuota
from operators.logic import quota_tree


def eq(
    name: str,
    *,
    parent: str | None = None,
    is_parent: bool | None = None,
    min: dict[str, Any] | None = None,
    max: dict[str, Any] | None = None,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    used: dict[str, Any] | None = None,
) -> ElasticQuota:
    all_labels = dict(labels or {})
    if parent is not None:
        all_labels[keys.LABEL_QUOTA_PARENT] = parent
    if is_parent is not None:
        all_labels[keys.LABEL_QUOTA_IS_PARENT] = str(is_parent).lower()
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": all_labels,
            "annotations": annotations or {},
        },
        "spec": {"min": min or {}, "max": max or {}},
    }
    if used is not None:
        body["status"] = {"used": used}
    return ElasticQuota.model_validate(body)


CM = {"cpu": 100, "memory": "200Gi"}
PARENT = eq("parent-a", is_parent=True, min=CM, max=CM)
CHILD = eq(
    "child-a1",
    parent="parent-a",
    is_parent=False,
    min={"cpu": 20, "memory": "40Gi"},
    max={"cpu": 40, "memory": "100Gi"},
)


def test_the_v07_release_note_tree_is_valid() -> None:
    assert quota_tree.validate(PARENT, None, []) == []
    assert quota_tree.validate(CHILD, None, [PARENT]) == []


@pytest.mark.parametrize(
    ("quota", "expected"),
    [
        pytest.param(
            eq("team-a", min={"cpu": 10}, max={"cpu": 8}),
            "spec.min.cpu (10) exceeds spec.max.cpu (8)",
            id="min-over-max",
        ),
        pytest.param(
            eq("team-a", min={"gpu": 1}, max={"cpu": 8}),
            "spec.min.gpu is set but spec.max has no gpu",
            id="min-key-not-in-max",
        ),
        pytest.param(eq("team-a", max={"cpu": "-1"}), "spec.max.cpu (-1) is negative", id="negative-max"),
        pytest.param(
            eq("team-a", min={"memory": "-1Gi"}, max={"memory": "1Gi"}),
            "spec.min.memory (-1Gi) is negative",
            id="negative-min",
        ),
        pytest.param(
            eq("team-a", max={"cpu": 8}, annotations={keys.ANNOTATION_SHARED_WEIGHT: '{"cpu":"-2"}'}),
            f"metadata.annotations[{keys.ANNOTATION_SHARED_WEIGHT}].cpu (-2) is negative",
            id="negative-shared-weight",
        ),
        pytest.param(
            eq(
                "team-a",
                max={"cpu": 8},
                used={"cpu": 9},
                annotations={keys.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS: '["cpu"]'},
            ),
            "spec.max.cpu (8) is below status.used.cpu (9), which strict check forbids",
            id="max-strict-check",
        ),
    ],
)
def test_a_quota_on_its_own(quota: ElasticQuota, expected: str) -> None:
    assert expected in quota_tree.validate(quota, None, [])


def test_used_over_max_is_fine_without_strict_check() -> None:
    assert quota_tree.validate(eq("team-a", max={"cpu": 8}, used={"cpu": 9}), None, []) == []


def test_a_missing_parent_is_named() -> None:
    problems = quota_tree.validate(CHILD, None, [])
    assert problems == [f"metadata.labels[{keys.LABEL_QUOTA_PARENT}]: parent quota 'parent-a' does not exist"]


def test_a_parent_that_is_not_is_parent_is_refused() -> None:
    leaf = eq("parent-a", min=CM, max=CM)
    problems = quota_tree.validate(CHILD, None, [leaf])
    assert problems == [
        f"metadata.labels[{keys.LABEL_QUOTA_PARENT}]: parent quota 'parent-a' is not labelled "
        f'{keys.LABEL_QUOTA_IS_PARENT}: "true"'
    ]


def test_children_min_may_not_exceed_the_parent_min() -> None:
    second = eq("child-a2", parent="parent-a", min={"cpu": 90, "memory": "1Gi"}, max=CM)
    problems = quota_tree.validate(second, None, [PARENT, CHILD])
    assert problems == [
        "spec.min.cpu: the children of 'parent-a' (this quota included) sum to 110, more than "
        "spec.min.cpu of parent quota 'parent-a' (100)"
    ]


def test_allow_force_update_and_tree_roots_skip_the_min_sum() -> None:
    forced = eq(
        "child-a2", parent="parent-a", min={"cpu": 90}, max=CM, labels={keys.LABEL_ALLOW_FORCE_UPDATE: "true"}
    )
    assert quota_tree.validate(forced, None, [PARENT, CHILD]) == []


def test_children_of_the_root_are_not_summed() -> None:
    a = eq("a", min={"cpu": 10**6}, max={"cpu": 10**6})
    b = eq("b", min={"cpu": 10**6}, max={"cpu": 10**6})
    assert quota_tree.validate(b, None, [a]) == []


def test_lowering_a_parent_min_below_its_children_sum_is_refused() -> None:
    lowered = eq("parent-a", is_parent=True, min={"cpu": 10, "memory": "200Gi"}, max=CM)
    problems = quota_tree.validate(lowered, PARENT, [PARENT, CHILD])
    assert problems == [
        "spec.min.cpu: the children of 'parent-a' sum to 20, more than spec.min.cpu of this quota (10)"
    ]


def test_a_parent_with_children_cannot_become_a_leaf() -> None:
    leaf = eq("parent-a", is_parent=False, min=CM, max=CM)
    problems = quota_tree.validate(leaf, PARENT, [PARENT, CHILD])
    assert (
        f"{keys.LABEL_QUOTA_IS_PARENT}]: cannot change from \"true\" while quota 'parent-a' "
        "has child quotas: child-a1" in problems[0]
    )


def test_a_parent_without_children_may_become_a_leaf() -> None:
    leaf = eq("parent-a", is_parent=False, min=CM, max=CM)
    assert quota_tree.validate(leaf, PARENT, [PARENT]) == []


def test_a_cycle_is_refused() -> None:
    x = eq("x", parent="y", is_parent=True, max={"cpu": 1})
    y = eq("y", is_parent=True, max={"cpu": 1})
    # y moves under x, while x is under y.
    moved = eq("y", parent="x", is_parent=True, max={"cpu": 1})
    problems = quota_tree.validate(moved, y, [x, y])
    assert problems == [f"metadata.labels[{keys.LABEL_QUOTA_PARENT}]: 'x' would make a cycle: y -> x -> y"]


def test_a_quota_cannot_be_its_own_parent() -> None:
    me = eq("me", parent="me", is_parent=True, max={"cpu": 1})
    assert "would make a cycle: me -> me" in quota_tree.validate(me, None, [])[0]


def test_max_keys_must_equal_the_parent_max_keys() -> None:
    child = eq("child-a1", parent="parent-a", max={"cpu": 1})
    problems = quota_tree.validate(child, None, [PARENT])
    assert problems == [
        "spec.max names [cpu] but spec.max of parent quota 'parent-a' names [cpu, memory]: "
        "they must be the same resources"
    ]


def test_min_keys_must_be_in_the_parent_min() -> None:
    parent = eq("p", is_parent=True, min={"cpu": 10}, max={"cpu": 10, "gpu": 8})
    child = eq("c", parent="p", min={"gpu": 1}, max={"cpu": 1, "gpu": 1})
    problems = quota_tree.validate(child, None, [parent])
    assert problems[0] == "spec.min.gpu is not in spec.min of parent quota 'p'"
    # A min resource the parent's min lacks also counts against a parent min of zero.
    assert problems[1:] == [
        "spec.min.gpu: the children of 'p' (this quota included) sum to 1, more than spec.min.gpu of "
        "parent quota 'p' (0)"
    ]


def test_a_parent_changing_its_max_keys_is_checked_against_its_children() -> None:
    widened = eq("parent-a", is_parent=True, min=CM, max={**CM, "gpu": 8})
    problems = quota_tree.validate(widened, PARENT, [PARENT, CHILD])
    assert problems == [
        "child quota 'child-a1': spec.max names [cpu, memory] but spec.max of this quota names "
        "[cpu, gpu, memory]: "
        "they must be the same resources"
    ]


def test_a_leaf_under_the_root_skips_the_tree_rules() -> None:
    assert quota_tree.validate(eq("solo", max={"cpu": 1}), None, [PARENT]) == []


def test_tree_id_is_immutable_and_follows_the_parent() -> None:
    tid = {keys.LABEL_QUOTA_TREE_ID: "123"}
    root = eq(
        "tree",
        is_parent=True,
        max={"cpu": 10},
        min={"cpu": 10},
        labels={**tid, keys.LABEL_QUOTA_IS_ROOT: "true"},
    )
    child = eq("c", parent="tree", max={"cpu": 1})
    assert quota_tree.validate(child, None, [root]) == [
        f"metadata.labels[{keys.LABEL_QUOTA_TREE_ID}]: '' differs from '123' of parent quota 'tree'"
    ]
    good = eq("c", parent="tree", max={"cpu": 1}, labels=tid)
    assert quota_tree.validate(good, None, [root]) == []
    changed = eq("c", parent="tree", max={"cpu": 1}, labels={keys.LABEL_QUOTA_TREE_ID: "9"})
    assert (
        f"metadata.labels[{keys.LABEL_QUOTA_TREE_ID}]: cannot change ('123' -> '9')"
        in quota_tree.validate(changed, good, [root, good])
    )


def test_a_namespace_is_claimed_by_one_quota_only() -> None:
    claims = {keys.ANNOTATION_QUOTA_NAMESPACES: json.dumps(["ns-1", "ns-2"])}
    first = eq("first", max={"cpu": 1}, annotations=claims)
    second = eq("second", max={"cpu": 1}, annotations={keys.ANNOTATION_QUOTA_NAMESPACES: '["ns-2"]'})
    assert quota_tree.validate(second, None, [first]) == [
        f"metadata.annotations[{keys.ANNOTATION_QUOTA_NAMESPACES}]: "
        "namespace 'ns-2' is already claimed by quota 'first'"
    ]
    # Updating the quota that holds the claim is fine.
    assert quota_tree.validate(first, first, [first]) == []


def test_a_malformed_namespaces_annotation_is_reported() -> None:
    bad = eq("q", max={"cpu": 1}, annotations={keys.ANNOTATION_QUOTA_NAMESPACES: "ns-1"})
    assert quota_tree.validate(bad, None, [])[0].startswith(
        f"metadata.annotations[{keys.ANNOTATION_QUOTA_NAMESPACES}]: "
    )


def test_a_name_is_unique_across_namespaces() -> None:
    elsewhere = eq("team", max={"cpu": 1}, namespace="other")
    problems = quota_tree.validate(eq("team", max={"cpu": 1}), None, [elsewhere])
    assert problems == [
        "metadata.name: quota 'team' already exists in namespace 'other' "
        "(quota names are unique across namespaces)"
    ]


def test_the_root_is_checked_on_its_own_only() -> None:
    root = eq(keys.ROOT_QUOTA_NAME, is_parent=True, min={"cpu": 5}, max={"cpu": 5})
    assert quota_tree.validate(root, None, [PARENT, CHILD]) == []


@pytest.mark.parametrize("name", sorted(quota_tree.BUILT_IN_QUOTAS))
def test_built_in_quotas_cannot_be_deleted(name: str) -> None:
    assert quota_tree.validate_delete(eq(name, namespace="koordinator-system"), []) == [
        f"{name!r} is a built-in quota and cannot be deleted"
    ]


def test_a_quota_with_children_cannot_be_deleted() -> None:
    assert quota_tree.validate_delete(PARENT, [PARENT, CHILD]) == [
        "quota 'parent-a' has child quotas (child-a1): delete them first"
    ]
    assert quota_tree.validate_delete(CHILD, [PARENT, CHILD]) == []


def test_a_quota_that_pods_name_cannot_be_deleted() -> None:
    pods = [f"p{i}" for i in range(7)]
    assert quota_tree.validate_delete(CHILD, [PARENT, CHILD], pods) == [
        "pods still charge quota 'child-a1' (p0, p1, p2, p3, p4 and 2 more): delete them or move them to "
        "another quota first (delete quota failed, quota child-a1 has 7 child pods: p0, p1, ...)"
    ]
    assert quota_tree.validate_delete(CHILD, [PARENT, CHILD], ["only"])[0].endswith(
        "(delete quota failed, quota child-a1 has 1 child pods: only)"
    )


def test_only_a_quota_with_pods_turning_is_parent_on_is_refused() -> None:
    leaf = eq("leaf", labels={"quota.scheduling.koordinator.sh/is-parent": "false"})
    parent = eq("leaf", labels={"quota.scheduling.koordinator.sh/is-parent": "true"})
    assert quota_tree.is_parent_with_pods(parent, leaf, has_pods=True) == [
        'metadata.labels[quota.scheduling.koordinator.sh/is-parent]: cannot change to "true" while pods '
        "charge quota 'leaf' (quota has bound pods, isParent is forbidden to modify as true, quotaName: leaf)"
    ]
    assert quota_tree.is_parent_with_pods(parent, leaf, has_pods=False) == []
    assert quota_tree.is_parent_with_pods(parent, None, has_pods=True) == []  # a new quota
    assert quota_tree.is_parent_with_pods(parent, parent, has_pods=True) == []  # no change


def guaranteed_quota(
    name: str, min: dict[str, Any], guaranteed: dict[str, Any], **kwargs: Any
) -> ElasticQuota:
    labels = {keys.LABEL_QUOTA_TREE_ID: "tree1", **kwargs.pop("labels", {})}
    annotations = {keys.ANNOTATION_GUARANTEED: json.dumps(guaranteed)}
    return eq(
        name, min=min, max={"cpu": 120, "memory": 1048576}, labels=labels, annotations=annotations, **kwargs
    )


# Koordinator's TestQuotaTopology_checkGuaranteeForMin, translated.
TEMP = guaranteed_quota(
    "temp",
    {"cpu": 10, "memory": 51200},
    {"cpu": "10", "memory": "51200"},
    is_parent=True,
    labels={keys.LABEL_QUOTA_IS_ROOT: "true"},
)


@pytest.mark.parametrize(
    ("quota_min", "sibling_guaranteed", "refused"),
    [
        ({"cpu": 5, "memory": 25600}, {"cpu": "2", "memory": "10000"}, False),  # normal
        ({"cpu": 7, "memory": 25600}, {"cpu": "3", "memory": "10000"}, False),  # not exceed guarantee
        ({"cpu": 8, "memory": 25600}, {"cpu": "3", "memory": "10000"}, True),  # exceed guarantee
    ],
    ids=["normal", "not-exceed-guarantee", "exceed-guarantee"],
)
def test_a_min_above_the_guaranteed_must_be_guaranteed_by_the_ancestors(
    quota_min: dict[str, Any], sibling_guaranteed: dict[str, Any], refused: bool
) -> None:
    quota = guaranteed_quota("test1", quota_min, {"cpu": "6", "memory": "35600"}, parent="temp")
    sibling = guaranteed_quota("test2", {"cpu": 2, "memory": 10000}, sibling_guaranteed, parent="temp")
    problems = quota_tree.guarantee_for_min(quota, [TEMP, quota, sibling])
    if refused:
        assert problems == [
            "spec.min: quota 'test1' asks for more than it is guaranteed (cpu: 6, memory: 35600), and up to "
            "the tree root 'temp' (cpu: 10, memory: 51200 guaranteed) no quota can guarantee cpu: 11, "
            "memory: 51200 (tree root quota temp can't guarantee for min)"
        ]
    else:
        assert problems == []


def test_the_guarantee_rule_skips_what_koordinator_skips() -> None:
    big = {"cpu": 100, "memory": 1}
    assert quota_tree.guarantee_for_min(guaranteed_quota("t", big, {}, parent="temp"), [TEMP]) != []
    forced = guaranteed_quota("t", big, {}, parent="temp", labels={keys.LABEL_ALLOW_FORCE_UPDATE: "true"})
    assert quota_tree.guarantee_for_min(forced, [TEMP]) == []
    no_tree = eq("t", min=big, max=big, parent="temp")
    assert quota_tree.guarantee_for_min(no_tree, [TEMP]) == []
    assert quota_tree.guarantee_for_min(TEMP, []) == []  # a tree root may change its min
