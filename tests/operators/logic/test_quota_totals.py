"""Cluster and profile totals for the root quota and the profiles' tree roots."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from apis.errors import InvalidSpec
from apis.extension import quota as keys
from apis.meta import LabelSelector, LabelSelectorRequirement, selects
from apis.quantity import Quantity
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota
from operators.logic import quota_totals
from operators.logic.quota_totals import NodeCapacity


def node(
    name: str, arch: str, cpu: str = "8", memory: str = "16Gi", schedulable: bool = True
) -> NodeCapacity:
    return NodeCapacity(
        name=name,
        labels={"arch": arch},
        allocatable={
            "cpu": Quantity.parse(cpu),
            "memory": Quantity.parse(memory),
            "pods": Quantity.parse("110"),
        },
        schedulable=schedulable,
    )


NODES = [node("a-0", "amd64"), node("a-1", "amd64", cpu="7500m"), node("r-0", "arm64", schedulable=False)]


def profile(ratio: str | None = None, annotations: dict[str, str] | None = None) -> ElasticQuotaProfile:
    return ElasticQuotaProfile.model_validate(
        {
            "metadata": {
                "name": "amd64-profile",
                "namespace": "kube-system",
                "annotations": annotations or {},
            },
            "spec": {
                "quotaName": "amd64-root-quota",
                "quotaLabels": {"team": "infra"},
                "resourceRatio": ratio,
                "nodeSelector": {"matchLabels": {"arch": "amd64"}},
            },
        }
    )


def test_the_root_quota_holds_the_cluster_total() -> None:
    desired = quota_totals.cluster_root_quota(NODES)
    assert json.loads(desired.annotations[keys.ANNOTATION_TOTAL_RESOURCE]) == {
        "cpu": "23500m",
        "memory": "48Gi",
        "pods": "330",
    }
    assert desired.spec.max == desired.spec.min
    assert desired.labels[keys.LABEL_QUOTA_IS_PARENT] == "true"


def test_the_tree_id_is_koordinators_fnv64a() -> None:
    # FNV-64a("kube-system/amd64-profile") in decimal, as Go's hash/fnv New64a gives it.
    assert quota_totals.profile_tree_id("a", "b") == str(_fnv("a/b"))


def _fnv(text: str) -> int:
    h = 14695981039346656037
    for b in text.encode():
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


def test_a_profile_tree_root_counts_only_the_selected_nodes() -> None:
    desired = quota_totals.profile_tree_root(profile("0.5"), "42", NODES)
    assert json.loads(desired.annotations[keys.ANNOTATION_TOTAL_RESOURCE]) == {
        "cpu": "7750m",
        "memory": "16Gi",
        "pods": "110",
    }
    assert desired.spec.min == {"cpu": Quantity.parse("7750m"), "memory": Quantity.parse("16Gi")}
    assert desired.spec.max == {
        "cpu": quota_totals.PROFILE_QUOTA_MAX,
        "memory": quota_totals.PROFILE_QUOTA_MAX,
    }
    assert desired.labels == {
        keys.LABEL_QUOTA_PROFILE: "amd64-profile",
        keys.LABEL_QUOTA_IS_PARENT: "true",
        "team": "infra",
        keys.LABEL_QUOTA_TREE_ID: "42",
        keys.LABEL_QUOTA_IS_ROOT: "true",
    }
    assert json.loads(desired.annotations[keys.ANNOTATION_UNSCHEDULABLE_RESOURCE]) == {}


def test_unschedulable_nodes_are_reported_apart() -> None:
    arm = profile().model_copy(deep=True)
    assert arm.spec is not None
    arm.spec.node_selector = LabelSelector(match_labels={"arch": "arm64"})
    desired = quota_totals.profile_tree_root(arm, "1", NODES)
    assert json.loads(desired.annotations[keys.ANNOTATION_UNSCHEDULABLE_RESOURCE])["cpu"] == "8"


def test_resource_keys_choose_min_and_max() -> None:
    desired = quota_totals.profile_tree_root(
        profile(annotations={keys.ANNOTATION_RESOURCE_KEYS: '["cpu","nvidia.com/gpu"]'}), "1", NODES
    )
    assert desired.spec.min == {"cpu": Quantity.parse("15500m"), "nvidia.com/gpu": Quantity.from_int(0)}


@pytest.mark.parametrize(
    ("raw", "ratio"),
    [
        (None, Fraction(1)),
        ("0.9", Fraction(9, 10)),
        ("1", Fraction(1)),
        ("0", Fraction(1)),
        ("1.5", Fraction(1)),
        ("1_0", Fraction(1)),
    ],
)
def test_ratio_parsing_follows_koordinator(raw: str | None, ratio: Fraction) -> None:
    assert quota_totals.parse_ratio(raw) == ratio


@pytest.mark.parametrize("raw", ["x", "Infinity", "NaN", "1e999999999", "1e9999", "-1"])
@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_a_malformed_ratio_makes_the_profile_invalid_instead_of_a_guess(raw: str) -> None:
    # Koordinator would fall back to 1; a ratio that is no number is reported instead (and
    # "Infinity" used to raise OverflowError, "1e999999999" never to return).
    with pytest.raises(InvalidSpec, match=r"^spec\.resourceRatio: "):
        quota_totals.profile_tree_root(profile(raw), "1", NODES)


def test_scaling_is_exact_and_truncates() -> None:
    scaled = quota_totals.scale(
        {"cpu": Quantity.parse("3"), "memory": Quantity.parse("1Gi")}, Fraction(9, 10)
    )
    assert scaled == {"cpu": Quantity.parse("2700m"), "memory": Quantity.from_int(966367641)}


def test_merge_patch_removes_resources_no_longer_there() -> None:
    desired = quota_totals.cluster_root_quota(NODES[:1])
    current = ElasticQuota.model_validate(
        {"metadata": {"name": "r"}, "spec": {"min": {"gpu": "1"}, "max": {"gpu": "1"}}}
    )
    assert desired.differs_from(current)
    patch = desired.merge_patch(current)
    assert patch["spec"]["max"] == {"gpu": None, "cpu": "8", "memory": "16Gi", "pods": "110"}
    created = desired.new_quota("r", "ns")
    assert not desired.differs_from(created)


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        (LabelSelector(match_labels={"arch": "amd64"}), True),
        (LabelSelector(match_labels={"arch": "arm64"}), False),
        (LabelSelector(), True),
        (None, False),
        (
            LabelSelector(
                match_expressions=[LabelSelectorRequirement(key="arch", operator="In", values=["amd64"])]
            ),
            True,
        ),
        (
            LabelSelector(
                match_expressions=[LabelSelectorRequirement(key="arch", operator="NotIn", values=["amd64"])]
            ),
            False,
        ),
        (
            LabelSelector(match_expressions=[LabelSelectorRequirement(key="zone", operator="DoesNotExist")]),
            True,
        ),
        (LabelSelector(match_expressions=[LabelSelectorRequirement(key="zone", operator="Exists")]), False),
    ],
)
def test_label_selectors(selector: LabelSelector | None, selected: bool) -> None:
    assert selects(selector, {"arch": "amd64"}) is selected


@pytest.mark.parametrize(
    ("ratio", "allowed", "warned"),
    [
        ("0.9", True, False),
        ("1.5", True, True),
        ("0", True, True),
        ("1e999999999", False, False),
        ("1_0", True, True),
        ("1__0", False, False),
    ],
)
def test_admission_reads_resource_ratio_as_the_components_do(ratio: str, allowed: bool, warned: bool) -> None:
    from apis.quota.elasticquotaprofile import ElasticQuotaProfile
    from operators.logic import admission

    body = {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"quotaName": "q", "resourceRatio": ratio, "nodeSelector": {}},
    }
    result = admission.review(ElasticQuotaProfile, body)
    assert result.allowed is allowed, result.errors
    assert bool(result.warnings) is warned, result.warnings
    if not allowed:
        assert result.errors[0].startswith("spec.resourceRatio: ")
