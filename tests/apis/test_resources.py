"""Resource-list helpers: parsing, the missing-means-zero rule, and the scheduler's integer units."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from apis.errors import InvalidValue
from apis.quantity import Format, Quantity
from apis.resources import (
    BATCH_CPU,
    MID_CPU,
    ResourceList,
    add,
    fits,
    format_resource_list,
    from_int_units,
    insufficient,
    is_zero,
    max_of,
    min_of,
    parse_resource_list,
    subtract,
    to_int_units,
    zero_filled,
)


def rl(**raw: str) -> ResourceList:
    return parse_resource_list({name.replace("_", "-"): value for name, value in raw.items()})


def test_parse_accepts_strings_ints_and_quantities() -> None:
    parsed = parse_resource_list({"cpu": "500m", "pods": 110, "memory": Quantity.parse("1Gi")})
    assert format_resource_list(parsed) == {"cpu": "500m", "pods": "110", "memory": "1Gi"}


def test_parse_error_names_the_resource() -> None:
    with pytest.raises(InvalidValue, match=r"resource 'memory': invalid quantity '12GB'"):
        parse_resource_list({"cpu": "1", "memory": "12GB"})


def test_format_is_canonical() -> None:
    assert format_resource_list(rl(cpu="1.5", memory="1024Mi")) == {"cpu": "1500m", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("request_", "free", "missing"),
    [
        pytest.param(rl(cpu="1", memory="1Gi"), rl(cpu="2", memory="1Gi"), [], id="fits-exactly"),
        pytest.param(rl(cpu="1500m"), rl(cpu="1"), ["cpu"], id="cpu-short"),
        pytest.param(
            rl(cpu="1", memory="2Gi"), rl(cpu="500m", memory="1Gi"), ["cpu", "memory"], id="both-short"
        ),
        pytest.param(rl(nvidia_com_gpu="1"), rl(cpu="8"), ["nvidia-com-gpu"], id="missing-in-free"),
        pytest.param(rl(nvidia_com_gpu="0"), rl(cpu="8"), [], id="zero-request-of-missing"),
        pytest.param(rl(memory="1073741824"), rl(memory="1Gi"), [], id="across-formats"),
        pytest.param({}, {}, [], id="empty"),
    ],
)
def test_fits_and_insufficient(request_: ResourceList, free: ResourceList, missing: list[str]) -> None:
    assert insufficient(request_, free) == missing
    assert fits(request_, free) is (not missing)


def test_add_and_subtract_treat_missing_as_zero() -> None:
    a, b = rl(cpu="1", memory="1Gi"), rl(cpu="500m", pods="3")
    assert format_resource_list(add(a, b)) == {"cpu": "1500m", "memory": "1Gi", "pods": "3"}
    assert format_resource_list(subtract(a, b)) == {"cpu": "500m", "memory": "1Gi", "pods": "-3"}
    assert list(add(a, b)) == ["cpu", "memory", "pods"]


def test_helpers_do_not_mutate_inputs() -> None:
    a, b = rl(cpu="1"), rl(memory="1Gi")
    before = (dict(a), dict(b))
    for result in (add(a, b), subtract(a, b), max_of(a, b), min_of(a, b), zero_filled(a, ["memory"])):
        assert result is not a
        assert result is not b
    assert (a, b) == before


def test_max_and_min_of() -> None:
    a, b = rl(cpu="2", memory="1Gi"), rl(cpu="3", pods="1")
    assert format_resource_list(max_of(a, b)) == {"cpu": "3", "memory": "1Gi", "pods": "1"}
    assert format_resource_list(min_of(a, b)) == {"cpu": "2", "memory": "0", "pods": "0"}


def test_zero_filled_and_is_zero() -> None:
    filled = zero_filled(rl(cpu="1"), ["cpu", "memory"])
    assert format_resource_list(filled) == {"cpu": "1", "memory": "0"}
    assert not is_zero(filled)
    assert is_zero(zero_filled({}, ["cpu", "memory"]))
    assert is_zero({})
    assert is_zero(subtract(rl(cpu="1"), rl(cpu="1000m")))


@pytest.mark.parametrize(
    ("name", "text", "units", "back"),
    [
        pytest.param("cpu", "1.5", 1500, "1500m", id="cpu-millicores"),
        pytest.param("cpu", "1n", 1, "1m", id="cpu-rounds-up"),
        pytest.param(BATCH_CPU, "4000", 4000, "4k", id="batch-cpu-already-milli"),
        pytest.param(MID_CPU, "1500", 1500, "1500", id="mid-cpu-already-milli"),
        pytest.param("memory", "1.5Gi", 3 * 2**29, "1536Mi", id="memory-bytes"),
        pytest.param("memory", "100m", 1, "1", id="memory-rounds-up"),
        pytest.param("hugepages-2Mi", "4Mi", 4 * 2**20, "4Mi", id="hugepages-binary"),
        pytest.param("ephemeral-storage", "10G", 10**10, "9765625Ki", id="storage-binary-format"),
        pytest.param("nvidia.com/gpu", "2", 2, "2", id="extended-resource"),
    ],
)
def test_int_units(name: str, text: str, units: int, back: str) -> None:
    assert to_int_units(name, Quantity.parse(text)) == units
    assert str(from_int_units(name, units)) == back


def test_from_int_units_formats() -> None:
    assert from_int_units("memory", 1).format is Format.BINARY_SI
    assert from_int_units("pods", 1).format is Format.DECIMAL_SI


class _Container(BaseModel):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


def test_pydantic_resource_list_round_trip() -> None:
    raw = {"requests": {"cpu": "250m", "memory": 536870912}, "limits": {"cpu": "1.5", "memory": "1Gi"}}
    container = _Container.model_validate(raw)
    assert container.requests == rl(cpu="250m", memory="512Mi")
    dumped = container.model_dump()
    assert dumped == {
        "requests": {"cpu": "250m", "memory": "536870912"},
        "limits": {"cpu": "1500m", "memory": "1Gi"},
    }
    assert _Container.model_validate_json(container.model_dump_json()) == container
    assert fits(container.requests, container.limits)
