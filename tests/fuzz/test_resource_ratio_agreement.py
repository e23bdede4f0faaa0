"""koord-manager and koord-scheduler read ``spec.resourceRatio`` the same way, hostile input included.

The manager writes a profile's tree total into the tree root quota; the scheduler computes the same
total from its own node view. Both must agree on every ratio, and a ratio that is no number must
stall neither (``"1e999999999"`` did not return within 60 s; ``"Infinity"`` raised OverflowError
in the manager; ``"1_0"`` was 10 in one and 1 in the other).
"""

from __future__ import annotations

import logging
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.errors import InvalidSpec
from apis.extension import quota as quota_ext
from apis.quantity import Quantity
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota
from operators.logic import quota_totals
from scheduler.plugins.elastic_quota.forest import NodeView, compute_totals
from scheduler.plugins.elastic_quota.quotas import QuotaIndex
from tests.examples import examples

ROOT = "amd64-root"
FALLBACK_CPU = 1234  # milli-CPU in the root's own total-resource annotation


def profile(ratio: str | None) -> ElasticQuotaProfile:
    return ElasticQuotaProfile.model_validate(
        {
            "metadata": {"name": "amd64", "namespace": "kube-system"},
            "spec": {
                "quotaName": ROOT,
                "resourceRatio": ratio,
                "nodeSelector": {"matchLabels": {"arch": "amd64"}},
            },
        }
    )


def scheduler_cpu(ratio: str | None) -> int:
    """The milli-CPU the scheduler gives the profile's tree."""
    index = QuotaIndex(namespace="kube-system", default_max={}, system_max={})
    index.replace_quotas(
        [
            ElasticQuota.model_validate(
                {
                    "metadata": {
                        "name": ROOT,
                        "namespace": "kube-system",
                        "labels": {quota_ext.LABEL_QUOTA_IS_ROOT: "true", quota_ext.LABEL_QUOTA_TREE_ID: "t"},
                        "annotations": {quota_ext.ANNOTATION_TOTAL_RESOURCE: f'{{"cpu": "{FALLBACK_CPU}m"}}'},
                    },
                    "spec": {"max": {"cpu": "1000"}},
                }
            )
        ]
    )
    index.replace_profiles([profile(ratio)])
    nodes = [NodeView(f"n{i}", {"arch": "amd64"}, {"cpu": 7000}) for i in range(3)]
    totals = compute_totals(index, nodes)
    return next(t.total for t in totals.trees if t.root == ROOT).get("cpu", 0)


def manager_cpu(ratio: str | None) -> int:
    nodes = [
        quota_totals.NodeCapacity(
            name=f"n{i}", labels={"arch": "amd64"}, allocatable={"cpu": Quantity.parse("7")}, schedulable=True
        )
        for i in range(3)
    ]
    desired = quota_totals.profile_tree_root(profile(ratio), "t", nodes)
    return desired.spec.min["cpu"].milli_value() if desired.spec.min else 0


@pytest.mark.parametrize(
    ("ratio", "cpu"),
    [
        pytest.param(None, 21000, id="unset"),
        pytest.param("0.5", 10500, id="half"),
        pytest.param("0x1p-1", 10500, id="hex-half"),
        pytest.param("1_0", 21000, id="1_0-is-ten-so-1-in-both"),
        pytest.param("0", 21000, id="zero-is-1-in-both"),
        pytest.param("1.5", 21000, id="above-1-is-1-in-both"),
    ],
)
def test_both_components_apply_the_same_ratio(ratio: str | None, cpu: int) -> None:
    assert manager_cpu(ratio) == cpu
    assert scheduler_cpu(ratio) == cpu


@pytest.mark.parametrize("ratio", ["1e999999999", "1e99999", "Infinity", "NaN", "x", "9" * 100_000])
@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_a_malformed_ratio_is_reported_by_the_manager_and_ignored_by_the_scheduler(
    ratio: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InvalidSpec, match=r"^spec\.resourceRatio: "):
        manager_cpu(ratio)
    with caplog.at_level(logging.WARNING, logger="scheduler.plugins.elastic_quota.forest"):
        assert scheduler_cpu(ratio) == FALLBACK_CPU  # the profile is ignored: the root's own total
    assert "ElasticQuotaProfile kube-system/amd64 ignored: spec.resourceRatio: " in caplog.text


@settings(max_examples=examples(200), deadline=1000)
@given(
    st.one_of(st.text(max_size=80), st.from_regex(r"[+-]?[0-9_]{0,8}(\.[0-9_]{0,8})?([eE][+-]?[0-9]{1,12})?"))
)
def test_the_components_agree_or_both_refuse_any_text(ratio: str) -> None:
    try:
        expected = manager_cpu(ratio)
    except InvalidSpec:
        assert scheduler_cpu(ratio) == FALLBACK_CPU
        return
    assert scheduler_cpu(ratio) == expected
    assert 0 <= expected <= 21000
    assert Fraction(expected, 21000) <= 1
