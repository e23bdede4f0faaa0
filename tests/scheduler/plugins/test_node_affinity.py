"""NodeAffinity: nodeSelector and required terms with every operator, matchFields, malformed terms,
scheduler-enforced affinity, and the preferred-terms score normalized by the best node."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins import node_affinity
from scheduler.plugins.node_affinity import NodeAffinityArgs
from tests.scheduler.builders import expr, make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons, scores

MISMATCH = "node(s) didn't match Pod's node affinity/selector"
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
NODES = ("a", "b", "c", "d")


def affinity_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("a").alloc(cpu="1").label("zone", "z1").label("gen", "3").label("gpu", "true").obj(),
            make_node("b").alloc(cpu="1").label("zone", "z2").label("gen", "5").obj(),
            make_node("c").alloc(cpu="1").label("zone", "z3").label("gen", "x").obj(),
            make_node("d").alloc(cpu="1").obj(),
        ]
    )


def fits(*names: str) -> dict[str, list[str]]:
    return {n: [] if n in names else [MISMATCH] for n in NODES}


FILTER_CASES = [
    pytest.param(make_pod("p"), fits(*NODES), id="nothing-to-check"),
    pytest.param(make_pod("p").node_selector(zone="z1"), fits("a"), id="node-selector"),
    pytest.param(make_pod("p").node_selector(zone="z1", gen="5"), fits(), id="node-selector-all-labels"),
    pytest.param(make_pod("p").required_term(expr("zone", "In", "z1", "z2")), fits("a", "b"), id="in"),
    pytest.param(
        make_pod("p").required_term(expr("zone", "NotIn", "z1")),
        fits("b", "c", "d"),
        id="notin-includes-unlabeled",
    ),
    pytest.param(make_pod("p").required_term(expr("gpu", "Exists")), fits("a"), id="exists"),
    pytest.param(
        make_pod("p").required_term(expr("gpu", "DoesNotExist")), fits("b", "c", "d"), id="does-not-exist"
    ),
    pytest.param(
        make_pod("p").required_term(expr("gen", "Gt", "3")), fits("b"), id="gt-skips-non-integer-labels"
    ),
    pytest.param(make_pod("p").required_term(expr("gen", "Lt", "4")), fits("a"), id="lt"),
    pytest.param(
        make_pod("p").required_term(expr("gen", "Gt", "-1"), expr("zone", "In", "z2")),
        fits("b"),
        id="expressions-anded",
    ),
    pytest.param(
        make_pod("p").required_term(expr("zone", "In", "z1")).required_term(expr("zone", "In", "z3")),
        fits("a", "c"),
        id="terms-ored",
    ),
    pytest.param(
        make_pod("p").node_selector(gpu="true").required_term(expr("zone", "In", "z1", "z2")),
        fits("a"),
        id="selector-and-affinity",
    ),
    pytest.param(
        make_pod("p").required_term(fields=[expr("metadata.name", "NotIn", "b")]),
        fits("a", "c", "d"),
        id="match-fields-notin",
    ),
    pytest.param(
        make_pod("p").required_term(expr("zone", "Exists"), fields=[expr("metadata.name", "In", "c")]),
        fits("c"),
        id="fields-and-labels",
    ),
    # a malformed term matches nothing, the other terms still apply (kube-scheduler's behaviour)
    pytest.param(
        make_pod("p").required_term(expr("gen", "Gt", "three")).required_term(expr("zone", "In", "z2")),
        fits("b"),
        id="malformed-term-ignored",
    ),
    pytest.param(make_pod("p").required_term(), fits(), id="empty-term-selects-nothing"),
]


@pytest.mark.parametrize(("pod", "expected"), FILTER_CASES)
def test_filter(pod: Any, expected: dict[str, list[str]]) -> None:
    plugin = node_affinity.new(None, handle=None)  # type: ignore[arg-type]
    assert filter_reasons(plugin, pod.info(), affinity_snapshot()) == expected


@pytest.mark.parametrize("pre_filter", [True, False], ids=["with-prefilter", "filter-only"])
def test_filter_without_prefilter_state(pre_filter: bool) -> None:
    snapshot = affinity_snapshot()
    plugin = node_affinity.new(None, handle=None)  # type: ignore[arg-type]
    pod = make_pod("p").required_term(expr("zone", "In", "z2")).info()
    state = CycleState()
    if pre_filter:
        plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter(state, pod, snapshot, snapshot.candidate_rows())
    assert result.feasible.tolist() == [False, True, False, False]
    assert result.unresolvable is not None
    assert result.unresolvable.tolist() == [True, False, True, True]


@pytest.mark.parametrize(
    ("pod", "code", "message", "node_names"),
    [
        pytest.param(make_pod("p"), Code.SKIP, "", None, id="skip-without-selectors"),
        pytest.param(make_pod("p").node_selector(zone="z1"), Code.SUCCESS, "", None, id="selector-only"),
        pytest.param(
            make_pod("p")
            .required_term(fields=[expr("metadata.name", "In", "a")])
            .required_term(fields=[expr("metadata.name", "In", "c")]),
            Code.SUCCESS,
            "",
            frozenset({"a", "c"}),
            id="node-names-from-match-fields",
        ),
        pytest.param(
            make_pod("p").required_term(
                fields=[expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]
            ),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "pod affinity terms conflict",
            None,
            id="conflicting-names",
        ),
        pytest.param(
            make_pod("p").required_term(expr("gen", "Gt", "three")),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "invalid node affinity: nodeSelectorTerms[0].matchExpressions[0].values[0]: "
            "Invalid value: 'three': for 'Gt', 'Lt' operators, the value must be an integer",
            None,
            id="every-term-malformed",
        ),
        pytest.param(
            make_pod("p").required_term(expr("zone", "Near", "z1")),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "invalid node affinity: nodeSelectorTerms[0].matchExpressions[0].operator: "
            "Unsupported value: 'Near'",
            None,
            id="unknown-operator",
        ),
        pytest.param(
            make_pod("p").required_term(expr("zone", "In")),
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "invalid node affinity: nodeSelectorTerms[0].matchExpressions[0].values: Required value: "
            "for 'in', 'notin' operators, values set can't be empty",
            None,
            id="in-without-values",
        ),
    ],
)
def test_pre_filter(pod: Any, code: Code, message: str, node_names: frozenset[str] | None) -> None:
    plugin = node_affinity.new(None, handle=None)  # type: ignore[arg-type]
    result = plugin.pre_filter(CycleState(), pod.info(), affinity_snapshot())
    assert result.status.code == code
    assert result.status.message() == message
    assert result.node_names == node_names


def test_added_affinity_is_enforced_first() -> None:
    args = NodeAffinityArgs.model_validate(
        {
            "addedAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "z1", "z2")]}]
                }
            }
        }
    )
    plugin = node_affinity.new(args, handle=None)  # type: ignore[arg-type]
    pod = make_pod("p").node_selector(zone="z2").info()
    assert filter_reasons(plugin, pod, affinity_snapshot()) == {
        "a": [MISMATCH],
        "b": [],
        "c": [ENFORCED],
        "d": [ENFORCED],
    }
    assert filter_reasons(plugin, make_pod("q").info(), affinity_snapshot()) == {
        "a": [],
        "b": [],
        "c": [ENFORCED],
        "d": [ENFORCED],
    }


def test_added_affinity_must_be_well_formed() -> None:
    raw = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr("gen", "Lt", "x")]}]
            }
        }
    }
    with pytest.raises(ValidationError, match="the value must be an integer"):
        NodeAffinityArgs.model_validate(raw)


SCORE_CASES = [
    # raw sums: a 10+5 = 15, b 5, c 0, d 0 -> normalized 100*s/15
    pytest.param(
        make_pod("p").preferred_term(10, expr("zone", "In", "z1")).preferred_term(5, expr("gen", "Gt", "2")),
        {"a": 100, "b": 33, "c": 0, "d": 0},
        id="weights-summed-and-normalized",
    ),
    pytest.param(
        make_pod("p").preferred_term(7, expr("zone", "NotIn", "z1")),
        {"a": 0, "b": 100, "c": 100, "d": 100},
        id="notin",
    ),
    pytest.param(make_pod("p"), {"a": 0, "b": 0, "c": 0, "d": 0}, id="no-preferences"),
    pytest.param(
        make_pod("p").preferred_term(3, expr("gen", "Gt", "bad")).preferred_term(4, expr("gpu", "Exists")),
        {"a": 100, "b": 0, "c": 0, "d": 0},
        id="malformed-preference-ignored",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), SCORE_CASES)
@pytest.mark.parametrize("pre_score", [True, False], ids=["with-prescore", "score-only"])
def test_score(pod: Any, expected: dict[str, int], pre_score: bool) -> None:
    plugin = node_affinity.new(None, handle=None)  # type: ignore[arg-type]
    assert scores(plugin, pod.info(), affinity_snapshot(), pre_score=pre_score) == expected


def test_added_preferred_terms_score_every_pod() -> None:
    args = NodeAffinityArgs.model_validate(
        {
            "addedAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 2, "preference": {"matchExpressions": [expr("zone", "In", "z3")]}}
                ]
            }
        }
    )
    plugin = node_affinity.new(args, handle=None)  # type: ignore[arg-type]
    pod = make_pod("p").preferred_term(1, expr("zone", "In", "z1")).info()
    assert scores(plugin, pod, affinity_snapshot()) == {"a": 50, "b": 0, "c": 100, "d": 0}


def test_label_masks_are_shared_between_pods() -> None:
    snapshot = affinity_snapshot()
    first = snapshot.label_mask("zone", frozenset({"z1"}))
    plugin = node_affinity.new(None, handle=None)  # type: ignore[arg-type]
    filter_reasons(plugin, make_pod("p").node_selector(zone="z1").info(), snapshot)
    assert snapshot.label_mask("zone", frozenset({"z1"})) is first
