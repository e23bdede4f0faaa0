"""SchedulingHint's PreFilter and preferred nodes, and the args of the plugins Koordinator's shipped
profile adds (SchedulingHintArgs, DefaultPreemptionArgs), against Koordinator's defaults and checks."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from apis.extension.scheduler import ANNOTATION_SCHEDULING_HINT, DEPRECATED_ANNOTATION_SCHEDULING_HINT
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import PreFilterResult
from scheduler.framework.status import Code
from scheduler.plugins.default_preemption import DefaultPreemptionArgs
from scheduler.plugins.scheduling_hint import SchedulingHint, SchedulingHintArgs
from tests.scheduler.builders import make_node, make_pod, make_snapshot

SNAPSHOT = make_snapshot([make_node(f"n{i}").alloc(cpu="4", memory="8Gi").obj() for i in range(4)])


def hinted(annotations: dict[str, str]) -> PodInfo:
    pod = make_pod("p").req(cpu="1").obj()
    pod.metadata.annotations = annotations
    return PodInfo.of(pod)


def prefilter(pod: PodInfo, max_hint_nodes: int = 100) -> tuple[CycleState, SchedulingHint, PreFilterResult]:
    plugin = SchedulingHint(SchedulingHintArgs(max_hint_nodes=max_hint_nodes))
    state = CycleState()
    return state, plugin, plugin.pre_filter(state, pod, SNAPSHOT)


def test_node_names_narrow_the_prefilter_result() -> None:
    _, _, result = prefilter(hinted({ANNOTATION_SCHEDULING_HINT: json.dumps({"nodeNames": ["n1", "n3"]})}))
    assert result.status.ok
    assert result.node_names == frozenset({"n1", "n3"})


def test_the_deprecated_key_is_read_when_the_internal_one_is_empty() -> None:
    pod = hinted(
        {
            ANNOTATION_SCHEDULING_HINT: "",
            DEPRECATED_ANNOTATION_SCHEDULING_HINT: json.dumps({"nodeNames": ["n2"]}),
        }
    )
    _, _, result = prefilter(pod)
    assert result.node_names == frozenset({"n2"})


def test_a_pod_without_a_hint_is_not_narrowed() -> None:
    state, plugin, result = prefilter(hinted({}))
    assert result.node_names is None
    assert list(plugin.prefer_nodes(state, hinted({}), None)) == []


def test_preferred_nodes_are_cut_at_max_hint_nodes_and_kept_within_the_prefilter_result() -> None:
    pod = hinted({ANNOTATION_SCHEDULING_HINT: json.dumps({"preferredNodeNames": ["n3", "n0", "n2", "n1"]})})
    state, plugin, _ = prefilter(pod, max_hint_nodes=3)
    assert list(plugin.prefer_nodes(state, pod, None)) == ["n3", "n0", "n2"]
    assert list(plugin.prefer_nodes(state, pod, frozenset({"n2", "n1"}))) == ["n2"]


@pytest.mark.parametrize("raw", ['{"nodeNames": "n1"}', "{not json", '["n1"]'])
def test_a_malformed_hint_is_unresolvable_and_names_the_key(raw: str) -> None:
    _, _, result = prefilter(hinted({ANNOTATION_SCHEDULING_HINT: raw}))
    status = result.status
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message().startswith(
        f"invalid scheduling hint: invalid value for {ANNOTATION_SCHEDULING_HINT}"
    )


def test_the_args_carry_koordinators_and_kube_schedulers_defaults() -> None:
    assert SchedulingHintArgs().max_hint_nodes == 100
    preemption = DefaultPreemptionArgs()
    assert (preemption.min_candidate_nodes_percentage, preemption.min_candidate_nodes_absolute) == (10, 100)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(lambda: SchedulingHintArgs.model_validate({"maxHintNodes": 0}), id="maxHintNodes-0"),
        pytest.param(
            lambda: DefaultPreemptionArgs.model_validate({"minCandidateNodesPercentage": 101}),
            id="percentage-101",
        ),
        pytest.param(
            lambda: DefaultPreemptionArgs.model_validate(
                {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}
            ),
            id="both-zero",
        ),
    ],
)
def test_invalid_args_are_refused(args: object) -> None:
    with pytest.raises(ValidationError):
        args()  # type: ignore[operator]
