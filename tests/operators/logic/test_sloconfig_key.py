import json

from apis.slo.nodeslo import ResourceThresholdStrategy
from apis.slo.sloconfig import merge_cfg
from operators.logic.sloconfig_key import LastGoodKey

DEFAULT = ResourceThresholdStrategy.model_validate({"enable": False, "cpuSuppressThresholdPercent": 65})


def parse(text: str | None) -> ResourceThresholdStrategy:
    return merge_cfg(DEFAULT, None if text is None else json.loads(text))


def test_missing_key_means_defaults() -> None:
    key = LastGoodKey("resource-threshold-config", parse)
    assert not key.loaded
    outcome = key.apply({})
    assert outcome.changed
    assert outcome.error is None
    assert key.value == DEFAULT


def test_bad_value_keeps_the_last_good_and_names_the_key() -> None:
    key = LastGoodKey("resource-threshold-config", parse)
    key.apply({"resource-threshold-config": '{"enable": true}'})
    good = key.value
    assert good is not None
    assert good.enable is True
    outcome = key.apply({"resource-threshold-config": '{"enable": '})
    assert not outcome.changed
    assert outcome.error is not None
    assert outcome.error.startswith("resource-threshold-config: ")
    assert key.value == good
    outcome = key.apply({"resource-threshold-config": '{"cpuSuppressThresholdPercent": "x"}'})
    assert outcome.error is not None
    assert "cpuSuppressThresholdPercent" in outcome.error
    assert key.value == good
    assert key.apply({"resource-threshold-config": '{"enable": false}'}).changed
    assert key.error is None


def test_first_error_either_uses_defaults_or_waits() -> None:
    bad = {"resource-threshold-config": "not json"}
    with_defaults = LastGoodKey("resource-threshold-config", parse)
    assert with_defaults.apply(bad).error is not None
    assert with_defaults.value == DEFAULT
    waiting = LastGoodKey("resource-threshold-config", parse, defaults_on_first_error=False)
    assert waiting.apply(bad).error is not None
    assert not waiting.loaded


def test_merge_cfg_overlays_present_fields_only() -> None:
    merged = merge_cfg(DEFAULT, {"enable": True})
    assert merged.enable is True
    assert merged.cpu_suppress_threshold_percent == 65
    assert merge_cfg(DEFAULT, ResourceThresholdStrategy(enable=True)).cpu_suppress_threshold_percent == 65
