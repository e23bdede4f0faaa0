"""spec.resourceRatio of an ElasticQuotaProfile: one reading for koord-manager and koord-scheduler."""

from __future__ import annotations

from fractions import Fraction

import pytest

from apis.errors import MESSAGE_LIMIT, InvalidSpec
from apis.quota.elasticquotaprofile import (
    RESOURCE_RATIO_FIELD,
    ElasticQuotaProfileSpec,
    parse_resource_ratio,
    resource_ratio,
)


@pytest.mark.parametrize(
    ("raw", "ratio"),
    [
        pytest.param(None, Fraction(1), id="unset"),
        pytest.param("", Fraction(1), id="empty"),
        pytest.param("0.9", Fraction(9, 10), id="decimal"),
        pytest.param("0.5e0", Fraction(1, 2), id="exponent"),
        pytest.param("1", Fraction(1), id="one"),
        # Koordinator applies a ratio only when 0 < ratio <= 1.
        pytest.param("0", Fraction(1), id="zero-counts-as-1"),
        pytest.param("1.5", Fraction(1), id="above-1-counts-as-1"),
        pytest.param("1_0", Fraction(1), id="underscore-ten-counts-as-1"),
        pytest.param("0.0_5", Fraction(1, 20), id="underscore-in-fraction"),
    ],
)
def test_resource_ratio(raw: str | None, ratio: Fraction) -> None:
    assert resource_ratio(raw) == ratio
    spec = ElasticQuotaProfileSpec.model_validate(
        {"quotaName": "q", "nodeSelector": {}, "resourceRatio": raw}
    )
    assert spec.ratio() == ratio


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param("1e999999999", "exponent out of range", id="1e999999999"),
        pytest.param("1e300", "outside 0 to 1000000", id="beyond-the-sane-range"),
        pytest.param("Infinity", "not a finite number", id="infinity"),
        pytest.param("NaN", "not a finite number", id="nan"),
        pytest.param("-0.5", "outside 0 to 1000000", id="negative"),
        pytest.param("x", "not a number", id="garbage"),
        pytest.param(" 0.9", "not a number", id="spaces"),
        pytest.param("9" * 1_000_000, "longer than 64 characters", id="megabyte"),
    ],
)
@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_a_malformed_ratio_is_an_invalid_spec_naming_the_field(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec, match=fragment) as error:
        resource_ratio(raw)
    assert error.value.path == RESOURCE_RATIO_FIELD
    assert str(error.value).startswith("spec.resourceRatio: ")
    assert len(str(error.value)) <= MESSAGE_LIMIT


def test_parse_resource_ratio_keeps_the_written_value() -> None:
    assert parse_resource_ratio("2") == 2
    assert parse_resource_ratio("1000000") == 10**6
