"""A node's CPU normalization ratio: which field of the ratio model, defaultRatio, the [1, 5] range,
the node label, and the 0.01 damping of the annotation."""

from __future__ import annotations

import json

import pytest

from apis.extension.numa import CPUBasicInfo
from apis.slo.sloconfig.cpu_normalization import CPUNormalizationStrategy, parse_cpu_normalization_cfg
from operators.logic.cpu_normalization import DISABLED_RATIO, RatioDecision, decide_ratio, needs_update

MODEL = "Intel Xeon Platinum 8369B CPU @ 2.90GHz"
RATIOS = {
    "baseRatio": 1.69,
    "hyperThreadEnabledRatio": 1.06,
    "turboEnabledRatio": 1.91,
    "hyperThreadTurboEnabledRatio": 1.20,
}


def strategy(**fields: object) -> CPUNormalizationStrategy:
    doc = {"enable": True, "ratioModel": {MODEL: RATIOS}, **fields}
    return parse_cpu_normalization_cfg(json.dumps(doc)).strategy_for({})


def info(ht: bool, turbo: bool, model: str = MODEL) -> CPUBasicInfo:
    return CPUBasicInfo(cpu_model=model, hyper_thread_enabled=ht, turbo_enabled=turbo)


@pytest.mark.parametrize(
    ("ht", "turbo", "expected"),
    [
        (False, False, "1.69"),
        (True, False, "1.06"),
        (False, True, "1.91"),
        (True, True, "1.20"),
    ],
    ids=["base", "hyper-thread", "turbo", "hyper-thread-and-turbo"],
)
def test_each_ht_turbo_combination_reads_its_field(ht: bool, turbo: bool, expected: str) -> None:
    assert decide_ratio(strategy(), None, info(ht, turbo)) == RatioDecision(expected)


def test_a_missing_model_takes_the_default_ratio_else_is_reported_by_name() -> None:
    unknown = info(True, True, model="AMD EPYC 7T83")
    assert decide_ratio(strategy(defaultRatio=1.5), None, unknown) == RatioDecision("1.50")
    decision = decide_ratio(strategy(), None, unknown)
    assert decision.value is None
    assert decision.problem == (
        "cpu-normalization-config: ratioModel has no CPU model 'AMD EPYC 7T83' and there is no defaultRatio"
    )


def test_a_missing_field_takes_the_default_ratio_else_is_reported_by_name() -> None:
    partial = {MODEL: {"baseRatio": 1.69}}
    assert decide_ratio(strategy(ratioModel=partial), None, info(False, False)).value == "1.69"
    # the cluster strategy is merged over the defaults: this model keeps only the base ratio
    lone = CPUNormalizationStrategy.model_validate({"enable": True, "ratioModel": partial})
    decision = decide_ratio(lone, None, info(False, True))
    assert decision.problem is not None
    assert f"ratioModel['{MODEL}'].turboEnabledRatio is not set" in decision.problem
    with_default = lone.model_copy(update={"default_ratio": 1.25})
    assert decide_ratio(with_default, None, info(False, True)).value == "1.25"


@pytest.mark.parametrize(
    ("ratio", "value"),
    [(0.82, None), (0.99, None), (1.0, "1.00"), (5.0, "5.00"), (5.01, None), (3.14159, "3.14")],
    ids=["release-notes-0.82", "below-1", "1", "5", "above-5", "rounded"],
)
def test_only_ratios_within_1_and_5_are_written_with_two_decimals(ratio: float, value: str | None) -> None:
    decision = decide_ratio(
        strategy(ratioModel={MODEL: {"hyperThreadEnabledRatio": ratio}}), None, info(True, False)
    )
    assert decision.value == value
    if value is None:
        assert decision.problem is not None
        assert (
            f"ratioModel['{MODEL}'].hyperThreadEnabledRatio = {ratio:g} is outside [1.0, 5.0]"
            in decision.problem
        )


def test_a_default_ratio_out_of_range_is_refused_too() -> None:
    decision = decide_ratio(strategy(defaultRatio=7), None, info(False, False, model="other"))
    assert decision.value is None
    assert decision.problem is not None
    assert "defaultRatio" in decision.problem
    assert "outside [1.0, 5.0]" in decision.problem


def test_the_node_label_overrides_the_strategy() -> None:
    off = strategy(enable=False)
    assert decide_ratio(off, None, info(True, True)) == RatioDecision(DISABLED_RATIO)
    assert decide_ratio(off, "true", info(True, True)) == RatioDecision("1.20")
    assert decide_ratio(strategy(), "false", info(True, True)) == RatioDecision("1.00")
    assert decide_ratio(strategy(), "0", None) == RatioDecision("1.00")  # needs no basic info
    bad = decide_ratio(strategy(), "yes", info(True, True))
    assert bad.value is None
    assert bad.problem is not None
    assert "node.koordinator.sh/cpu-normalization-enabled" in bad.problem


def test_no_basic_info_leaves_the_annotation_and_says_why() -> None:
    decision = decide_ratio(strategy(), None, None, "node n1 has no NodeResourceTopology")
    assert decision == RatioDecision(None, "node n1 has no NodeResourceTopology")


@pytest.mark.parametrize(
    ("old", "new", "update"),
    [
        (None, None, False),
        (None, "1.00", True),
        ("1.20", None, True),
        ("1.20", "1.20", False),
        ("1.005", "1.00", False),
        ("1.2", "1.20", False),
        ("1.00", "1.01", True),
        ("2.00", "2.01", True),  # float64 gives 2.01 - 2.00 < 0.01: exact decimals do not
        ("1.50", "1.52", True),
        ("1.509", "1.50", False),
        ("abc", "1.00", True),
    ],
)
def test_the_annotation_moves_only_by_a_hundredth_or_more(
    old: str | None, new: str | None, update: bool
) -> None:
    assert needs_update(old, new) is update
