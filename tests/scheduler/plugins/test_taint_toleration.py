"""TaintToleration: core/v1 toleration matching, kube-scheduler's reason wording, and the reversed
PreferNoSchedule score."""

from __future__ import annotations

from typing import Any

import pytest

from apis.meta import Taint, Toleration
from scheduler.framework.cycle_state import CycleState
from scheduler.plugins import taint_toleration
from scheduler.plugins.taint_toleration import tolerates
from tests.scheduler.builders import make_node, make_pod, make_snapshot
from tests.scheduler.plugins.helpers import filter_reasons, scores


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> Taint:
    return Taint(key=key, value=value, effect=effect)


def tol(**fields: Any) -> Toleration:
    return Toleration.model_validate(fields)


@pytest.mark.parametrize(
    ("toleration", "the_taint", "expected"),
    [
        pytest.param(tol(key="k", value="v"), taint("k", "v"), True, id="equal-by-default"),
        pytest.param(
            tol(key="k", operator="Equal", value="v"), taint("k", "w"), False, id="equal-other-value"
        ),
        pytest.param(tol(key="k", operator="Equal"), taint("k"), True, id="equal-empty-values"),
        pytest.param(
            tol(key="k", operator="Exists"), taint("k", "anything"), True, id="exists-ignores-value"
        ),
        pytest.param(
            tol(operator="Exists"), taint("any", "v", "NoExecute"), True, id="empty-key-exists-matches-all"
        ),
        pytest.param(
            tol(key="k", operator="Exists", effect="NoSchedule"),
            taint("k", effect="NoExecute"),
            False,
            id="effect-differs",
        ),
        pytest.param(
            tol(key="k", operator="Exists"),
            taint("k", effect="PreferNoSchedule"),
            True,
            id="empty-effect-all",
        ),
        pytest.param(tol(key="other", operator="Exists"), taint("k"), False, id="key-differs"),
        pytest.param(tol(key="k", operator="Gt", value="5"), taint("k", "7"), True, id="gt-taint-greater"),
        pytest.param(tol(key="k", operator="Gt", value="5"), taint("k", "5"), False, id="gt-equal"),
        pytest.param(tol(key="k", operator="Lt", value="5"), taint("k", "-3"), True, id="lt-taint-less"),
        pytest.param(
            tol(key="k", operator="Gt", value="five"), taint("k", "7"), False, id="gt-not-an-integer"
        ),
        pytest.param(
            tol(key="k", operator="Gt", value="5"), taint("k", "07"), False, id="gt-taint-not-canonical"
        ),
        pytest.param(
            tol(key="k", operator="Sometimes", value="v"), taint("k", "v"), False, id="unknown-operator"
        ),
    ],
)
def test_tolerates(toleration: Toleration, the_taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, the_taint) is expected


def taint_snapshot() -> Any:
    return make_snapshot(
        [
            make_node("clean").alloc(cpu="1").obj(),
            make_node("infra-1").alloc(cpu="1").taint("dedicated", "infra").obj(),
            make_node("infra-2").alloc(cpu="1").taint("dedicated", "infra").obj(),
            make_node("gpu")
            .alloc(cpu="1")
            .taint("soft", "x", "PreferNoSchedule")
            .taint("gpu", effect="NoExecute")
            .obj(),
            make_node("soft")
            .alloc(cpu="1")
            .taint("soft", "x", "PreferNoSchedule")
            .taint("soft2", "y", "PreferNoSchedule")
            .obj(),
        ]
    )


INFRA = "node(s) had untolerated taint {dedicated: infra}"
GPU = "node(s) had untolerated taint {gpu: }"

FILTER_CASES = [
    pytest.param(
        make_pod("p"),
        {"clean": [], "infra-1": [INFRA], "infra-2": [INFRA], "gpu": [GPU], "soft": []},
        id="no-tolerations",
    ),
    pytest.param(
        make_pod("p").toleration("dedicated", "infra", "NoSchedule"),
        {"clean": [], "infra-1": [], "infra-2": [], "gpu": [GPU], "soft": []},
        id="tolerates-infra",
    ),
    pytest.param(
        make_pod("p").toleration("gpu", operator="Exists"),
        {"clean": [], "infra-1": [INFRA], "infra-2": [INFRA], "gpu": [], "soft": []},
        id="exists-any-effect",
    ),
    pytest.param(
        make_pod("p").toleration(operator="Exists"),
        {"clean": [], "infra-1": [], "infra-2": [], "gpu": [], "soft": []},
        id="tolerates-everything",
    ),
    pytest.param(
        make_pod("p").toleration("dedicated", "infra", operator="Bogus"),
        {"clean": [], "infra-1": [INFRA], "infra-2": [INFRA], "gpu": [GPU], "soft": []},
        id="malformed-toleration-tolerates-nothing",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), FILTER_CASES)
def test_filter(pod: Any, expected: dict[str, list[str]]) -> None:
    assert filter_reasons(taint_toleration.new(None, handle=None), pod.info(), taint_snapshot()) == expected  # type: ignore[arg-type]


def test_filter_rejections_are_unresolvable() -> None:
    snapshot = taint_snapshot()
    rows = snapshot.candidate_rows()
    result = taint_toleration.new(None, None).filter(CycleState(), make_pod("p").info(), snapshot, rows)  # type: ignore[arg-type]
    assert result.unresolvable is not None
    assert result.unresolvable.tolist() == (~result.feasible).tolist() == [False, True, True, True, False]


SCORE_CASES = [
    # intolerable PreferNoSchedule counts: clean 0, infra 0, gpu 1, soft 2 -> 100 - 100*count/2
    pytest.param(
        make_pod("p"), {"clean": 100, "infra-1": 100, "infra-2": 100, "gpu": 50, "soft": 0}, id="counts"
    ),
    pytest.param(
        make_pod("p").toleration("soft", "x", "PreferNoSchedule"),
        {"clean": 100, "infra-1": 100, "infra-2": 100, "gpu": 100, "soft": 0},
        id="one-tolerated",
    ),
    # a NoSchedule-only toleration does not count for PreferNoSchedule
    pytest.param(
        make_pod("p").toleration("soft", "x", "NoSchedule").toleration("soft2", operator="Exists"),
        {"clean": 100, "infra-1": 100, "infra-2": 100, "gpu": 0, "soft": 0},
        id="effect-specific",
    ),
    pytest.param(
        make_pod("p").toleration(operator="Exists"),
        dict.fromkeys(["clean", "infra-1", "infra-2", "gpu", "soft"], 100),
        id="all-zero",
    ),
]


@pytest.mark.parametrize(("pod", "expected"), SCORE_CASES)
@pytest.mark.parametrize("pre_score", [True, False], ids=["with-prescore", "score-only"])
def test_score(pod: Any, expected: dict[str, int], pre_score: bool) -> None:
    plugin = taint_toleration.new(None, handle=None)  # type: ignore[arg-type]
    assert scores(plugin, pod.info(), taint_snapshot(), pre_score=pre_score) == expected


def test_index_follows_node_changes() -> None:
    from scheduler.cache.snapshot import Snapshot
    from tests.scheduler.builders import make_cache

    cache = make_cache([make_node("n").alloc(cpu="1").obj()])
    plugin = taint_toleration.new(None, handle=None)  # type: ignore[arg-type]
    pod = make_pod("p").info()
    assert filter_reasons(plugin, pod, Snapshot(cache)) == {"n": []}
    cache.upsert_node(make_node("n").alloc(cpu="1").taint("k", "v").obj())
    assert filter_reasons(plugin, pod, Snapshot(cache)) == {"n": ["node(s) had untolerated taint {k: v}"]}
