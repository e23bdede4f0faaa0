"""``node.koordinator.sh/cpu-basic-info`` on the NodeResourceTopology: Koordinator's JSON both ways."""

from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension.numa import ANNOTATION_CPU_BASIC_INFO, CPUBasicInfo, get_cpu_basic_info


def test_koordinators_json_reads_and_writes_back_with_empty_fields_left_out() -> None:
    raw = '{"cpuModel":"Intel(R) Xeon(R) Platinum 8369B","hyperThreadEnabled":true,"vendorID":"GenuineIntel"}'
    info = get_cpu_basic_info({ANNOTATION_CPU_BASIC_INFO: raw})
    assert info == CPUBasicInfo(
        cpu_model="Intel(R) Xeon(R) Platinum 8369B", hyper_thread_enabled=True, vendor_id="GenuineIntel"
    )
    assert info.to_wire() == {
        "cpuModel": "Intel(R) Xeon(R) Platinum 8369B",
        "hyperThreadEnabled": True,
        "vendorID": "GenuineIntel",
    }
    assert get_cpu_basic_info({}) is None


def test_a_malformed_value_names_the_annotation_and_the_field() -> None:
    with pytest.raises(InvalidAnnotation, match="turboEnabled") as caught:
        get_cpu_basic_info({ANNOTATION_CPU_BASIC_INFO: '{"turboEnabled":"yes"}'})
    assert caught.value.key == ANNOTATION_CPU_BASIC_INFO
