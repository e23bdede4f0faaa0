"""Property tests over every label and annotation parser of ``apis.extension``, Go durations and
``spec.resourceRatio``: for any text (or any JSON), a parser returns a value or raises the one error
type of its input (InvalidAnnotation naming the key; InvalidValue / InvalidSpec for durations and
the ratio), quickly, with a message of bounded size. Never a bare ValueError, OverflowError,
RecursionError or a hang.

The parsers are found by signature, so a parser added to ``apis.extension`` is fuzzed without
being listed here: ``parse_*(raw)`` functions get the text, ``get_*`` / label readers get a mapping
holding the text under every key their module declares.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import apis.extension
from apis.core import Node
from apis.duration import parse_go_duration_ns
from apis.errors import MESSAGE_LIMIT, InvalidAnnotation, InvalidSpec, InvalidValue
from apis.meta import ObjectMeta
from apis.quota.elasticquotaprofile import resource_ratio
from apis.scheduling.networktopology import ClusterNetworkTopologySpec
from operators.logic import topology_tree
from tests.examples import examples

Parser = Callable[[str], object]

MODULES: list[ModuleType] = [
    importlib.import_module(f"apis.extension.{m.name}")
    for m in pkgutil.iter_modules(apis.extension.__path__)
    if not m.name.startswith("_")
]

# Extra arguments of readers whose signature is more than (raw) or (annotations/labels).
EXTRA: dict[str, dict[str, object]] = {
    "resolve_gang_match_policy": {"default": "once-satisfied"},
    "resolve_gang_total_number": {"min_available": 2},
    "resolve_shared_weight": {"max_resources": {}},
    "node_cpu_bind_policy": {"kubelet_policy": None},
    "node_numa_allocate_strategy": {"default": "MostAllocated"},
    "scheduler_name_of": {"spec_scheduler_name": None},
    "parent_quota_name": {"quota_name": "q"},
}


def _keys(module: ModuleType) -> list[str]:
    return sorted(
        value
        for name, value in vars(module).items()
        if name.startswith(("ANNOTATION_", "LABEL_")) and isinstance(value, str)
    )


def _parsers() -> list[tuple[str, Parser]]:
    found: list[tuple[str, Parser]] = []
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        keys = _keys(module)
        # Functions taking a key accept only the keys of their family (a wrong key is a bug, not input).
        keyed = sorted(getattr(module, "QUOTA_RESOURCE_LIST_ANNOTATIONS", keys))
        for name, func in inspect.getmembers(module, inspect.isfunction):
            if func.__module__ != module.__name__ or name.startswith("_"):
                continue
            params = list(inspect.signature(func).parameters)
            extra = EXTRA.get(name, {})
            first = params[0] if params else ""
            if params[1:] and not set(params[1:]) <= set(extra) | {"key"}:
                continue
            if first == "raw":
                found.append((f"{short}.{name}", _raw(func, extra)))
            elif first in ("annotations", "labels"):
                found.append((f"{short}.{name}", _mapping(func, keys, keyed, extra, "key" in params)))
            elif name == "parse_quota_resource_list":
                found.append((f"{short}.{name}", _raw_with_key(func, keyed)))
    return found


def _raw(func: Callable[..., object], extra: dict[str, object]) -> Parser:
    return lambda text: func(text, **extra)


def _raw_with_key(func: Callable[..., object], keys: list[str]) -> Parser:
    return lambda text: [func(key, text) for key in keys]


def _mapping(
    func: Callable[..., object], keys: list[str], keyed: list[str], extra: dict[str, object], takes_key: bool
) -> Parser:
    def call(text: str) -> object:
        mapping = dict.fromkeys(keys, text)
        if takes_key:
            return [func(mapping, key=key, **extra) for key in keyed]
        return func(mapping, **extra)

    return call


PARSERS = _parsers()
PARSER_IDS = [name for name, _ in PARSERS]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
texts = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.from_regex(
        r"[+-]?(0[xXoObB])?[0-9a-fA-F_]{0,30}(\.[0-9_]{0,10})?([eEpP][+-]?[0-9]{1,12})?", fullmatch=True
    ),
    st.from_regex(r"([0-9]{0,25}(\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h)){1,4}", fullmatch=True),
    st.sampled_from(["1e999999999", "Infinity", "-Infinity", "NaN", "1_0", "9" * 5000, "0x" + "f" * 5000]),
)


def check(parse: Parser, text: str, error: type[InvalidValue] = InvalidAnnotation) -> None:
    """``parse(text)`` returns, or raises ``error`` with a bounded message; anything else escapes."""
    caught: InvalidValue | None = None
    try:
        parse(text)
    except InvalidValue as exc:
        caught = exc
    if caught is not None:
        assert isinstance(caught, error), f"{type(caught).__name__} is not {error.__name__}: {caught}"
        assert len(str(caught)) <= MESSAGE_LIMIT


def test_every_parser_is_found() -> None:
    assert len(PARSERS) > 100
    for expected in (
        "networktopology.parse_network_topology_spec",
        "gang.get_gang_groups",
        "quota.get_resource_keys",
    ):
        assert expected in PARSER_IDS


@pytest.mark.parametrize("parse", [p for _, p in PARSERS], ids=PARSER_IDS)
@settings(max_examples=examples(15, full=200), deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_a_parser_returns_or_raises_the_annotation_error(parse: Parser, text: str) -> None:
    check(parse, text)


HOSTILE = [
    "x" * 1_000_000,
    "9" * 1_000_000,
    "[" * 100_000,
    '{"a":' * 50_000,
    "[" + ",".join(["1e999999999"] * 10_000) + "]",
    '{"' + "k" * 500_000 + '": 1}',
    '["' + "a/" * 300_000 + '"]',
    "1h" * 300_000,
]


@pytest.mark.parametrize("parse", [p for _, p in PARSERS], ids=PARSER_IDS)
@pytest.mark.timeout(120)
def test_a_megabyte_of_hostile_input_is_refused_quickly_and_briefly(parse: Parser) -> None:
    """Quickly: guarded by the timeout, not by a wall-clock assertion (a loaded machine made a 5 s
    bound fail at 5.2 s): a parser quadratic in its input takes hours on a megabyte, linear ones
    take well under a second each."""
    for text in HOSTILE:
        check(parse, text)


@settings(max_examples=examples(300), deadline=500)
@given(text=texts)
def test_durations_return_or_raise_invalid_value(text: str) -> None:
    check(parse_go_duration_ns, text, InvalidValue)


@settings(max_examples=examples(300), deadline=500)
@given(text=texts)
def test_resource_ratio_returns_or_raises_invalid_spec(text: str) -> None:
    check(resource_ratio, text, InvalidSpec)


@pytest.mark.timeout(60)  # bounded work: a blow-up on hostile input hangs; no wall-clock bound
def test_pinned_regressions() -> None:
    for text in ("1e999999999", "Infinity"):
        with pytest.raises(InvalidSpec):
            resource_ratio(text)
    assert resource_ratio("1_0") == 1  # ten, which Koordinator applies as 1
    with pytest.raises(InvalidValue, match="overflows int64"):
        parse_go_duration_ns("9" * 5000 + "s")
    # 480 layers: admission allows them; the status tree's recursion did not.
    items: list[dict[str, object]] = [{"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "L0"}]
    items += [
        {"topologyLayer": f"L{i}", "parentTopologyLayer": f"L{i + 1}", "labelKey": [f"k{i}"]}
        for i in range(479)
    ]
    items[-1].pop("parentTopologyLayer")
    spec = ClusterNetworkTopologySpec.model_validate({"networkTopologySpec": items})
    assert len(spec.layer_chain()) == 480
    node = Node(metadata=ObjectMeta(name="n", labels={f"k{i}": "v" for i in range(479)}))
    assert len(topology_tree.build_detail_status(spec, [node])) == 480
