"""``--feature-gates``: Koordinator's gate names; what cannot be honoured stops the start."""

from __future__ import annotations

import pytest

from apis.errors import InvalidValue
from apis.features import FeatureGates, feature_gate_notes, parse_feature_gates


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
        ("DisableDefaultQuota=maybe", "invalid value of 'DisableDefaultQuota'='maybe'"),
        ("DisableDefaultQuota", "missing bool value for 'DisableDefaultQuota'"),
    ],
)
def test_what_cannot_be_honoured_is_an_error_naming_the_gate(text: str, message: str) -> None:
    with pytest.raises(InvalidValue, match=message.replace("(", r"\(")):
        parse_feature_gates(text)


def test_koordinators_gates_we_do_not_build_are_accepted_with_a_note() -> None:
    assert parse_feature_gates("MultiQuotaTree=true") == FeatureGates()
    (note,) = feature_gate_notes("MultiQuotaTree=true,DisableDefaultQuota=true")
    assert "MultiQuotaTree" in note
    assert "no effect" in note


def test_all_alpha_and_all_beta_set_every_gate_of_their_stage_but_explicit_names_win() -> None:
    gates = parse_feature_gates("DisableDefaultQuota=false,AllAlpha=true")
    assert gates.elastic_quota_guarantee_usage
    assert gates.node_mutating_webhook
    assert not gates.disable_default_quota
    assert feature_gate_notes("AllAlpha=true,AllBeta=true") == []
    assert parse_feature_gates("AllBeta=true") == FeatureGates()  # our gates are all alpha
