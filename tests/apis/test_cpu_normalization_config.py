"""The cpu-normalization-config and resource-amplification-config keys: defaults, the overlay of
node entries on the cluster strategy, and errors naming the path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from apis.slo.sloconfig import KEY_CPU_NORMALIZATION, KEY_RESOURCE_AMPLIFICATION
from apis.slo.sloconfig.cpu_normalization import (
    ModelRatioCfg,
    parse_cpu_normalization_cfg,
    parse_resource_amplification_cfg,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "v1.4" / "04-slo-controller-config.yaml"


def test_missing_keys_mean_koordinators_defaults() -> None:
    normalization = parse_cpu_normalization_cfg(None)
    assert normalization.enable is False
    assert normalization.ratio_model == {}
    assert normalization.default_ratio is None
    amplification = parse_resource_amplification_cfg(None)
    assert amplification.enable is False
    assert amplification.resource_amplification_ratio is None


def test_the_v1_4_release_notes_example_parses() -> None:
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    [cm] = [d for d in docs if d["kind"] == "ConfigMap"]
    cfg = parse_cpu_normalization_cfg(cm["data"][KEY_CPU_NORMALIZATION])
    assert cfg.enable is True
    assert cfg.ratio_model is not None
    assert cfg.ratio_model["Intel Xeon Platinum 8369B CPU @ 2.90GHz"] == ModelRatioCfg(
        base_ratio=1.69,
        hyper_thread_enabled_ratio=1.06,
        turbo_enabled_ratio=1.91,
        hyper_thread_turbo_enabled_ratio=1.2,
    )


def test_node_entries_are_laid_over_the_cluster_strategy_and_the_first_match_wins() -> None:
    doc = {
        "enable": True,
        "defaultRatio": 1.1,
        "ratioModel": {"A": {"baseRatio": 1.5, "turboEnabledRatio": 2}},
        "nodeConfigs": [
            {
                "name": "pool-b",
                "nodeSelector": {"matchLabels": {"pool": "b"}},
                "ratioModel": {"A": {"baseRatio": 1.7}},
            },
            {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}, "enable": False},
            {"name": "no-selector-matches-nothing", "enable": False},
        ],
    }
    cfg = parse_cpu_normalization_cfg(json.dumps(doc))
    b = cfg.strategy_for({"pool": "b"})
    assert (b.enable, b.default_ratio) == (True, 1.1)
    assert b.ratio_model == {
        "A": ModelRatioCfg(base_ratio=1.7, turbo_enabled_ratio=2)
    }  # merged field by field
    assert cfg.strategy_for({"pool": "c"}).enable is False
    cluster = cfg.strategy_for({})
    assert cluster.enable is True
    assert cluster.ratio_model == {"A": ModelRatioCfg(base_ratio=1.5, turbo_enabled_ratio=2)}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"enable": "yes"}', "enable: Input should be a valid boolean"),
        (
            '{"ratioModel": {"A": {"baseRatio": "1.2"}}}',
            "ratioModel.A.baseRatio: Input should be a valid number",
        ),
        (
            '{"nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]}',
            "nodeConfigs[0]: nodeSelector.matchExpressions[0]: operator In needs values",
        ),
        ("{", "malformed JSON"),
    ],
)
def test_a_bad_cpu_normalization_key_names_the_path(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_cpu_normalization_cfg(text)


def test_amplification_ratios_below_1_are_refused() -> None:
    cfg = parse_resource_amplification_cfg(
        json.dumps(
            {
                "enable": True,
                "resourceAmplificationRatio": {"cpu": 1.5},
                "nodeConfigs": [{"nodeSelector": {}, "resourceAmplificationRatio": {"memory": 2}}],
            }
        )
    )
    assert cfg.strategy_for({"any": "node"}).resource_amplification_ratio == {"cpu": 1.5, "memory": 2.0}
    with pytest.raises(
        ValueError, match=r"resourceAmplificationRatio\.memory: Input should be greater than or equal to 1"
    ):
        parse_resource_amplification_cfg('{"resourceAmplificationRatio": {"memory": 0.8}}')
    assert KEY_RESOURCE_AMPLIFICATION == "resource-amplification-config"
