"""The CPU basic info on the NodeResourceTopology and the node's ratio values, as Koordinator writes them."""

from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation, InvalidValue
from apis.extension.amplification import (
    format_amplification_ratios,
    format_ratio,
    format_raw_allocatable,
    get_cpu_normalization_ratio,
    multiply_milli,
    parse_resource_amplification_ratios,
)
from apis.extension.numa import ANNOTATION_CPU_BASIC_INFO, CPUBasicInfo, get_cpu_basic_info
from apis.quantity import Quantity


def test_cpu_basic_info_as_koordlet_writes_it() -> None:
    raw = (
        '{"cpuModel":"Intel Xeon Platinum 8369B CPU @ 2.90GHz","hyperThreadEnabled":true,'
        '"catL3CbmMask":"fff","vendorID":"GenuineIntel"}'
    )
    info = get_cpu_basic_info({ANNOTATION_CPU_BASIC_INFO: raw})
    assert info == CPUBasicInfo(
        cpu_model="Intel Xeon Platinum 8369B CPU @ 2.90GHz",
        hyper_thread_enabled=True,
        turbo_enabled=False,  # omitted: Go's omitempty false
        cat_l3_cbm_mask="fff",
        vendor_id="GenuineIntel",
    )
    assert get_cpu_basic_info({}) is None
    with pytest.raises(InvalidAnnotation, match="turboEnabled: Input should be a valid boolean"):
        get_cpu_basic_info({ANNOTATION_CPU_BASIC_INFO: '{"turboEnabled": "yes"}'})


def test_ratios_are_written_with_two_decimals_as_go_rounds_them() -> None:
    assert [format_ratio(r) for r in (1.0, 1.005, 1.015, 3.1415926, 2.675)] == [
        "1.00",
        "1.00",
        "1.01",
        "3.14",
        "2.67",
    ]
    assert format_amplification_ratios({"memory": 1.5, "cpu": 1.2}) == '{"cpu":1.20,"memory":1.50}'
    assert parse_resource_amplification_ratios('{"cpu":1.20,"memory":1.5}') == {"cpu": 1.2, "memory": 1.5}


@pytest.mark.parametrize("raw", ["0", "-1.2", "abc", "1e999"])
def test_a_ratio_annotation_must_be_a_positive_number(raw: str) -> None:
    with pytest.raises(InvalidAnnotation, match="cpu-normalization-ratio"):
        get_cpu_normalization_ratio({"node.koordinator.sh/cpu-normalization-ratio": raw})


def test_multiplication_truncates_the_float64_product_in_milli_units() -> None:
    assert str(multiply_milli(Quantity.parse("4"), 1.29)) == "5160m"
    assert str(multiply_milli(Quantity.parse("8Gi"), 1.5)) == "12Gi"
    # 0.1 + 0.2 style: 3 x 1.1 is 3.3000000000000003 in float64, 3300m either way
    assert str(multiply_milli(Quantity.parse("3"), 1.1)) == "3300m"
    assert format_raw_allocatable({"memory": Quantity.parse("8Gi"), "cpu": Quantity.parse("4000m")}) == (
        '{"cpu":"4","memory":"8Gi"}'
    )


@pytest.mark.parametrize(
    "raw",
    [
        '{"cpu": 1e308}',
        '{"cpu": Infinity}',
        '{"cpu": -Infinity}',
        '{"cpu": NaN}',
        '{"cpu": 1e309}',
        '{"memory": -1.5}',
        '{"cpu": 0}',
        '{"cpu": 1000.01}',
    ],
)
def test_a_ratio_must_be_finite_positive_and_at_most_1000(raw: str) -> None:
    with pytest.raises(InvalidAnnotation, match="resource-amplification-ratio"):
        parse_resource_amplification_ratios(raw)


def test_ratios_at_or_below_1_and_up_to_1000_are_read() -> None:
    assert parse_resource_amplification_ratios('{"cpu": 0.5, "memory": 1000}') == {
        "cpu": 0.5,
        "memory": 1000.0,
    }


def test_multiply_milli_refuses_a_product_beyond_int64() -> None:
    with pytest.raises(InvalidValue, match="out of range"):
        multiply_milli(Quantity.parse("9E"), 1000.0)
    with pytest.raises(InvalidValue, match="out of range"):
        multiply_milli(Quantity.parse("4"), float("inf"))
