"""Hostile values in every key of ``slo-controller-config`` that koord-manager parses: each key's
parser returns, or raises :class:`InvalidValue` with a message of bounded size, never a TypeError,
RecursionError, OverflowError or MemoryError (which would end the ConfigMap handler instead of
keeping the last good value and saying why).

The values are the documented samples (``docs/colocation.md``, ``docs/examples``), one field at a
time replaced by a hostile value: text of every Unicode category (lone surrogates included),
non-ASCII digits, 1e308, Infinity, NaN, 10**400, nesting 10,000 levels deep, one element repeated
thousands of times; and raw hostile text in place of the whole value. Work is bounded by sizes and
counts, never by time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.errors import MESSAGE_LIMIT, InvalidValue
from apis.slo.sloconfig.colocation import parse_colocation_config
from apis.slo.sloconfig.cpu_normalization import parse_cpu_normalization_cfg, parse_resource_amplification_cfg
from apis.slo.sloconfig.names import (
    KEY_COLOCATION,
    KEY_CPU_BURST,
    KEY_CPU_NORMALIZATION,
    KEY_HOST_APPLICATION,
    KEY_RESOURCE_AMPLIFICATION,
    KEY_RESOURCE_QOS,
    KEY_RESOURCE_THRESHOLD,
    KEY_SYSTEM,
)
from apis.slo.sloconfig.nodeslo_config import (
    parse_cpu_burst_cfg,
    parse_host_application_cfg,
    parse_resource_qos_cfg,
    parse_resource_threshold_cfg,
    parse_system_cfg,
)
from operators.logic.sloconfig_key import LastGoodKey
from tests.examples import examples
from tests.fuzz.test_hostile_admission import hostile_values
from tests.fuzz.test_hostile_text import texts

DOCS = Path(__file__).resolve().parents[2] / "docs"

PARSERS: dict[str, Callable[[str | None], object]] = {
    KEY_COLOCATION: parse_colocation_config,
    KEY_RESOURCE_THRESHOLD: parse_resource_threshold_cfg,
    KEY_RESOURCE_QOS: parse_resource_qos_cfg,
    KEY_CPU_BURST: parse_cpu_burst_cfg,
    KEY_SYSTEM: parse_system_cfg,
    KEY_HOST_APPLICATION: parse_host_application_cfg,
    KEY_CPU_NORMALIZATION: parse_cpu_normalization_cfg,
    KEY_RESOURCE_AMPLIFICATION: parse_resource_amplification_cfg,
}
"""Every key of the ConfigMap and the parser koord-manager's controllers read it with."""

KEYS = sorted(PARSERS)


def _config_maps() -> Iterator[dict[str, Any]]:
    docs: list[Any] = []
    for path in sorted(DOCS.rglob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.DOTALL):
            docs += list(yaml.safe_load_all(block))
    for path in sorted((DOCS / "examples").rglob("*.yaml")):
        docs += list(yaml.safe_load_all(path.read_text()))
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and isinstance(doc.get("data"), dict):
            yield doc["data"]


def _samples() -> dict[str, Any]:
    samples: dict[str, Any] = {}
    for data in _config_maps():
        for key, text in data.items():
            if key in PARSERS and key not in samples:
                samples[key] = json.loads(text)
    return samples


SAMPLES = _samples()


def test_every_key_has_a_documented_sample_that_parses() -> None:
    assert sorted(SAMPLES) == KEYS
    for key in KEYS:
        PARSERS[key](json.dumps(SAMPLES[key]))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*path, i))


PATHS = [(key, path) for key in KEYS for path in _paths(SAMPLES.get(key, {})) if path]

PLACEHOLDER = "\x00HOSTILE\x00"


def _with_text_at(sample: Any, path: tuple[Any, ...], raw: str) -> str:
    """``sample`` as JSON with the raw text ``raw`` (not necessarily JSON) at ``path``."""
    doc = json.loads(json.dumps(sample))
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = PLACEHOLDER
    return json.dumps(doc).replace(json.dumps(PLACEHOLDER), raw)


def _json(value: Any) -> str:
    # ensure_ascii=False keeps lone surrogates as they are; NaN and Infinity written as Python does.
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def check(key: str, text: str) -> None:
    message = ""
    try:
        PARSERS[key](text)
    except InvalidValue as exc:
        message = str(exc)
    assert len(message) <= MESSAGE_LIMIT
    outcome = LastGoodKey(key, PARSERS[key]).apply({key: text})
    assert outcome.error is None or len(outcome.error) <= MESSAGE_LIMIT + len(key) + 8


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(PATHS), value=hostile_values)
def test_a_hostile_value_at_any_field_is_parsed_or_refused_with_a_bounded_message(
    where: tuple[str, tuple[Any, ...]], value: Any
) -> None:
    key, path = where
    check(key, _with_text_at(SAMPLES[key], path, _json(value)))


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), text=texts)
def test_hostile_text_as_the_whole_value_is_parsed_or_refused_with_a_bounded_message(
    key: str, text: str
) -> None:
    check(key, text)


DEEP = 10_000

RAW = [
    "[" * DEEP + "]" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
    "1e308",
    "-1e309",
    "Infinity",
    "NaN",
    "1" + "0" * 400,
    "\ud800",
    '"\udfff"',
    "\u0663\u0660",
    "[" + ",".join(["{}"] * 20_000) + "]",
]
"""Raw text placed at every field (and as the whole value)."""


@pytest.mark.parametrize("key", KEYS)
def test_raw_hostile_text_at_every_field_is_parsed_or_refused_with_a_bounded_message(key: str) -> None:
    for raw in RAW:
        check(key, raw)
        for path in _paths(SAMPLES[key]):
            if path:
                check(key, _with_text_at(SAMPLES[key], path, raw))


def _many_node_entries(key: str, count: int) -> str:
    """``count`` copies of the sample's first ``nodeConfigs``/``nodeStrategies`` entry, each with an
    empty selector (a problem apiece where the parser checks them)."""
    sample = json.loads(json.dumps(SAMPLES[key]))
    field = "nodeStrategies" if "nodeStrategies" in sample else "nodeConfigs"
    entry = (sample.get(field) or [{}])[0]
    entry["nodeSelector"] = {}
    sample[field] = [entry] * count
    return json.dumps(sample)


@pytest.mark.parametrize("key", KEYS)
def test_a_value_with_5000_bad_entries_gets_a_bounded_message(key: str) -> None:
    check(key, _many_node_entries(key, 5_000))
