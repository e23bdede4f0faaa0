from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import quota
from apis.quantity import Quantity


def test_keys() -> None:
    assert quota.LABEL_QUOTA_NAME == "quota.scheduling.koordinator.sh/name"
    assert quota.LABEL_PREEMPTIBLE == "quota.scheduling.koordinator.sh/preemptible"
    assert quota.LABEL_QUOTA_IS_PARENT == "quota.scheduling.koordinator.sh/is-parent"
    assert quota.LABEL_ALLOW_LENT_RESOURCE == "quota.scheduling.koordinator.sh/allow-lent-resource"
    assert quota.ANNOTATION_SHARED_WEIGHT == "quota.scheduling.koordinator.sh/shared-weight"
    assert quota.ANNOTATION_NON_PREEMPTIBLE_USED == "quota.scheduling.koordinator.sh/non-preemptible-used"
    assert quota.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS == (
        "quota.scheduling.koordinator.sh/max-strict-check-resource-keys"
    )
    assert quota.custom_limiter_limit_key("gpu") == "quota.scheduling.koordinator.sh/custom-gpu-limit"
    assert quota.custom_limiter_used_key("gpu") == "quota.scheduling.koordinator.sh/custom-gpu-used"
    assert (quota.ROOT_QUOTA_NAME, quota.SYSTEM_QUOTA_NAME, quota.DEFAULT_QUOTA_NAME) == (
        "koordinator-root-quota",
        "koordinator-system-quota",
        "koordinator-default-quota",
    )


@pytest.mark.parametrize(
    ("value", "parent", "lent", "preemptible"),
    [
        pytest.param(None, False, True, True, id="absent"),
        pytest.param("true", True, True, True, id="true"),
        pytest.param("false", False, False, False, id="false"),
        pytest.param("True", False, True, True, id="capitalised-true"),
        pytest.param("False", False, True, True, id="capitalised-false"),
        pytest.param("", False, True, True, id="empty"),
        pytest.param("no", False, True, True, id="other"),
    ],
)
def test_asymmetric_booleans(value: str | None, parent: bool, lent: bool, preemptible: bool) -> None:
    def labels(key: str) -> dict[str, str]:
        return {} if value is None else {key: value}

    assert quota.is_parent(labels(quota.LABEL_QUOTA_IS_PARENT)) is parent
    assert quota.allow_lent_resource(labels(quota.LABEL_ALLOW_LENT_RESOURCE)) is lent
    assert quota.is_preemptible(labels(quota.LABEL_PREEMPTIBLE)) is preemptible
    assert quota.is_tree_root(labels(quota.LABEL_QUOTA_IS_ROOT)) is parent
    assert quota.allow_force_update(labels(quota.LABEL_ALLOW_FORCE_UPDATE)) is parent
    assert quota.ignore_default_tree(labels(quota.LABEL_QUOTA_IGNORE_DEFAULT_TREE)) is parent


def test_v07_release_notes_labels() -> None:
    parent = {quota.LABEL_QUOTA_IS_PARENT: "true", quota.LABEL_ALLOW_LENT_RESOURCE: "true"}
    child = {
        quota.LABEL_QUOTA_IS_PARENT: "false",
        quota.LABEL_QUOTA_PARENT: "parentA",
        quota.LABEL_ALLOW_LENT_RESOURCE: "true",
    }
    assert quota.is_parent(parent)
    assert quota.allow_lent_resource(parent)
    assert not quota.is_parent(child)
    assert quota.parent_quota_name("child", child) == "parentA"


@pytest.mark.parametrize(
    ("name", "labels", "expected"),
    [
        pytest.param("q", {}, "koordinator-root-quota", id="default-root"),
        pytest.param(
            "q", {"quota.scheduling.koordinator.sh/parent": ""}, "koordinator-root-quota", id="empty"
        ),
        pytest.param("q", {"quota.scheduling.koordinator.sh/parent": "p"}, "p", id="explicit"),
        pytest.param("koordinator-root-quota", {}, "", id="root-has-none"),
    ],
)
def test_parent_quota_name(name: str, labels: dict[str, str], expected: str) -> None:
    assert quota.parent_quota_name(name, labels) == expected


@pytest.mark.parametrize("key", sorted(quota.QUOTA_RESOURCE_LIST_ANNOTATIONS))
def test_resource_list_annotations(key: str) -> None:
    parsed = quota.parse_quota_resource_list(key, '{"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 2}')
    assert parsed == {
        "cpu": Quantity.parse("4"),
        "memory": Quantity.parse("8Gi"),
        "nvidia.com/gpu": Quantity.parse("2"),
    }
    assert quota.get_quota_resource_list({key: '{"cpu": 1}'}, key) == {"cpu": Quantity.parse("1")}
    assert quota.get_quota_resource_list({}, key) is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"cpu": "four"}', "cpu: ", id="bad-quantity"),
        pytest.param('{"cpu": 4.5e}', "malformed JSON", id="malformed"),
        pytest.param('["cpu"]', "object", id="list"),
        pytest.param('{"cpu": null}', "cpu: ", id="null-quantity"),
    ],
)
def test_resource_list_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        quota.parse_quota_resource_list(quota.ANNOTATION_RUNTIME, raw)
    assert caught.value.key == quota.ANNOTATION_RUNTIME
    assert fragment in caught.value.problem


def test_parse_quota_resource_list_refuses_other_keys() -> None:
    with pytest.raises(ValueError, match="not a quota ResourceList"):
        quota.parse_quota_resource_list(quota.ANNOTATION_QUOTA_NAMESPACES, "{}")


MAX = {"cpu": Quantity.parse("10"), "memory": Quantity.parse("20Gi")}


@pytest.mark.parametrize(
    ("annotations", "expected", "warns"),
    [
        pytest.param({}, MAX, False, id="missing"),
        pytest.param(
            {quota.ANNOTATION_SHARED_WEIGHT: '{"cpu": "2"}'}, {"cpu": Quantity.parse("2")}, False, id="set"
        ),
        pytest.param(
            {quota.ANNOTATION_SHARED_WEIGHT: '{"cpu": "0", "memory": 0}'}, MAX, False, id="all-zero"
        ),
        pytest.param({quota.ANNOTATION_SHARED_WEIGHT: "{}"}, MAX, False, id="empty-object"),
        pytest.param({quota.ANNOTATION_SHARED_WEIGHT: "not json"}, MAX, True, id="malformed"),
    ],
)
def test_resolve_shared_weight(
    annotations: dict[str, str], expected: dict[str, Quantity], warns: bool
) -> None:
    resolved = quota.resolve_shared_weight(annotations, MAX)
    assert resolved.value == expected
    assert (resolved.warning is not None) is warns


def test_namespaces_and_resource_keys() -> None:
    assert quota.parse_quota_namespaces('["ns-a", "ns-b"]') == ["ns-a", "ns-b"]
    assert quota.get_quota_namespaces({}) is None
    assert quota.get_resource_keys({}) == ["cpu", "memory"]
    assert quota.get_resource_keys({quota.ANNOTATION_RESOURCE_KEYS: '["cpu","nvidia.com/gpu"]'}) == [
        "cpu",
        "nvidia.com/gpu",
    ]
    assert quota.parse_max_strict_check_resource_keys('["cpu"]') == ["cpu"]


@pytest.mark.parametrize(
    ("parser", "key", "raw"),
    [
        pytest.param(quota.parse_quota_namespaces, quota.ANNOTATION_QUOTA_NAMESPACES, "ns-a", id="ns-bare"),
        pytest.param(quota.parse_quota_namespaces, quota.ANNOTATION_QUOTA_NAMESPACES, "[1]", id="ns-int"),
        pytest.param(
            quota.parse_resource_keys, quota.ANNOTATION_RESOURCE_KEYS, '{"cpu": 1}', id="keys-object"
        ),
        pytest.param(
            quota.parse_max_strict_check_resource_keys,
            quota.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS,
            '"cpu"',
            id="strict-keys-string",
        ),
    ],
)
def test_name_lists_reject(parser: object, key: str, raw: str) -> None:
    assert callable(parser)
    with pytest.raises(InvalidAnnotation) as caught:
        parser(raw)
    assert caught.value.key == key
