"""``--feature-gates``: Koordinator's gate names; what cannot be honoured stops the start."""

from __future__ import annotations

import pytest

from apis.errors import InvalidValue
from apis.features import FeatureGates, parse_feature_gates


def test_no_gates_are_every_default() -> None:
    assert parse_feature_gates("") == FeatureGates()
    assert FeatureGates() == FeatureGates(
        elastic_quota_ignore_pod_overhead=False, disable_default_quota=False
    )


def test_koordinators_gate_names_turn_the_features_on() -> None:
    gates = parse_feature_gates("ElasticQuotaIgnorePodOverhead=true, DisableDefaultQuota=True")
    assert gates == FeatureGates(elastic_quota_ignore_pod_overhead=True, disable_default_quota=True)
    assert parse_feature_gates("DisableDefaultQuota=false") == FeatureGates()


def test_the_guarantee_gate_turns_the_guarantee_on() -> None:
    assert parse_feature_gates("ElasticQuotaGuaranteeUsage=true").elastic_quota_guarantee_usage
    assert parse_feature_gates("ElasticQuotaGuaranteeUsage=false") == FeatureGates()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: 'NoSuchGate'"),
        ("MultiQuotaTree=true", "unrecognized feature gate: 'MultiQuotaTree'"),  # Koordinator's, not built
        ("DisableDefaultQuota=maybe", "invalid value of 'DisableDefaultQuota'='maybe'"),
        ("DisableDefaultQuota", "missing bool value for 'DisableDefaultQuota'"),
    ],
)
def test_what_cannot_be_honoured_is_an_error_naming_the_gate(text: str, message: str) -> None:
    with pytest.raises(InvalidValue, match=message.replace("(", r"\(")):
        parse_feature_gates(text)
