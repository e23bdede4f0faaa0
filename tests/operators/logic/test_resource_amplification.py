"""A node's resource amplification ratios: the configured ratios when enabled, the CPU ratio times the
CPU normalization ratio, kept only above 1."""

from __future__ import annotations

import pytest

from apis.slo.sloconfig.cpu_normalization import ResourceAmplificationStrategy
from operators.logic.resource_amplification import amplification_annotation, amplification_ratios

ON = ResourceAmplificationStrategy(enable=True, resource_amplification_ratio={"cpu": 1.5, "memory": 1.25})
OFF = ON.model_copy(update={"enable": False})
MEMORY_ONLY = ResourceAmplificationStrategy(enable=True, resource_amplification_ratio={"memory": 2})


@pytest.mark.parametrize(
    ("strategy", "normalization", "annotation"),
    [
        (OFF, None, None),
        (OFF, 1.0, None),
        (OFF, 1.29, '{"cpu":1.29}'),
        (ON, None, '{"cpu":1.50,"memory":1.25}'),
        (ON, 1.0, '{"cpu":1.50,"memory":1.25}'),
        (ON, 1.2, '{"cpu":1.80,"memory":1.25}'),
        (MEMORY_ONLY, 1.1, '{"cpu":1.10,"memory":2.00}'),
    ],
    ids=[
        "off",
        "off-normalized-1",
        "off-normalized",
        "on",
        "on-normalized-1",
        "on-normalized",
        "memory-only",
    ],
)
def test_ratios(
    strategy: ResourceAmplificationStrategy, normalization: float | None, annotation: str | None
) -> None:
    assert amplification_annotation(amplification_ratios(strategy, normalization)) == annotation


def test_a_configured_cpu_ratio_of_1_without_normalization_stays_as_configured() -> None:
    strategy = ResourceAmplificationStrategy(enable=True, resource_amplification_ratio={"cpu": 1})
    assert amplification_ratios(strategy, 1.0) == {"cpu": 1.0}
    assert amplification_annotation({"cpu": 1.0}) == '{"cpu":1.00}'
