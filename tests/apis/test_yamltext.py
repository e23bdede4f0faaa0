"""``apis.yamltext.load_yaml``: the YAML files a person writes for koordlet (``koordctl simulate``
load files, devices and device-description files, the kubelet configuration) are read with bounded
work, and every bad file is an InvalidValue (a ValueError, which every caller catches), never a
RecursionError, a yaml.YAMLError or a billion laughs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.errors import MESSAGE_LIMIT, InvalidValue
from apis.yamltext import MAX_DEPTH, MAX_NODES, load_yaml
from koordlet.devices.description import load_description, load_devices_file
from koordlet.devices.reporter import DeviceSimulation
from koordlet.simulate.model import load_file
from koordlet.topology.kubelet import load_kubelet_config
from tests.examples import examples
from tests.fuzz.test_hostile_text import any_text, texts


def _laughs(levels: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


HOSTILE = {
    "deep sequences": "[" * 10_000 + "]" * 10_000,
    "deep mappings": "{a: " * 10_000 + "1" + "}" * 10_000,
    "deep block": "".join(" " * i + "- \n" for i in range(2_000)),
    "billion laughs": _laughs(9),
    "undefined alias": "a: *nowhere\n",
    "tab indentation": "a:\n\t- b\n",
    "lone surrogate": "a: \ud800\n",
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_file_is_an_invalid_value(text: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        load_yaml(text, "load.yaml")
    assert str(caught.value).startswith("load.yaml: ")
    assert len(str(caught.value)) <= MESSAGE_LIMIT


def test_nesting_up_to_the_limit_and_aliases_up_to_the_count_are_read() -> None:
    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f") is not None
    with pytest.raises(InvalidValue, match=f"deeper than {MAX_DEPTH} levels"):
        load_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "f")
    laughs = load_yaml(_laughs(4), "f")  # 9**4 values: aliases are fine in moderation
    assert len(laughs["a3"]) == 9
    with pytest.raises(InvalidValue, match=f"more than {MAX_NODES} values"):
        load_yaml(_laughs(8), "f")


def test_ordinary_documents_read_as_yaml_safe_load_reads_them() -> None:
    assert load_yaml("", "f") is None
    assert load_yaml("a: [1, 2.5, x, null, true]\nb: {c: .inf}\n", "f") == {
        "a": [1, 2.5, "x", None, True],
        "b": {"c": float("inf")},
    }


@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(texts, any_text, st.builds(lambda n: "- [" * n + "]" * n, st.integers(1, 3000))))
def test_any_text_is_read_or_an_invalid_value(text: str) -> None:
    refused: InvalidValue | None = None
    try:
        load_yaml(text, "f")
    except InvalidValue as exc:
        refused = exc
    assert refused is None or len(str(refused)) <= MESSAGE_LIMIT


LOADERS = [load_file, load_devices_file, load_description, load_kubelet_config]


@pytest.mark.parametrize("load", LOADERS, ids=[f.__name__ for f in LOADERS])
@pytest.mark.parametrize("text", [HOSTILE["deep sequences"], HOSTILE["billion laughs"], "a: *nowhere\n"])
def test_koordlets_files_refuse_hostile_yaml_with_a_value_error(
    load: object, text: str, tmp_path: Path
) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"file\.yaml: "):
        load(path)  # type: ignore[operator]


def test_a_devices_file_edit_that_is_no_yaml_keeps_the_last_good_file(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text("reportIntervalSeconds: 2\nnodes:\n- names: [a]\n  gpus: {count: 1, memory: 16Gi}\n")
    simulation = DeviceSimulation(path, None)
    path.write_text("nodes: [{names: [a], gpus: *nowhere}]\n")
    os.utime(path, ns=(1, 1))
    simulation.reload()  # raised yaml.ComposerError, which ended the device reporter's loop
    assert simulation.interval() == 2
