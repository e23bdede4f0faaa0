"""InterPodAffinity skips a pod without affinity of its own as soon as it knows no assigned pod
carries a term that could count (``ExistingTerms.carries``), without building the per-domain
state: over random assigned pods (each with terms of any kind or none, selecting the incoming
pod or not) and incoming pods (with or without terms), PreFilter skips exactly when the full
state finds nothing to check, and PreScore's scores are the full computation's."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Pod
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.helper.pod_affinity import weighted_terms
from scheduler.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs
from tests.scheduler.builders import expr, make_node, make_pod, make_snapshot

KINDS = ("required", "required-anti", "preferred", "preferred-anti")
terms = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(["web", "db"])), max_size=2)
"""An assigned or incoming pod's terms: the kind, and the app label their selector asks for."""


def _pod(name: str, app: str, carried: list[tuple[str, str]], node: str | None) -> Pod:
    built = make_pod(name).label("app", app)
    for kind, selected in carried:
        term: dict[str, Any] = {
            "topologyKey": "zone",
            "labelSelector": {"matchExpressions": [expr("app", "In", selected)]},
        }
        built = built.pod_affinity(
            term, anti=kind.endswith("anti"), weight=5 if kind.startswith("preferred") else None
        )
    if node is not None:
        built = built.on(node)
    return built.obj()


@settings(max_examples=150, deadline=None)
@given(
    assigned=st.lists(st.tuples(st.sampled_from(["web", "db"]), terms, st.integers(0, 2)), max_size=4),
    own=terms,
    hard_weight=st.sampled_from([0, 1]),
    ignore_preferred=st.booleans(),
)
def test_the_shortcuts_answer_as_the_full_state_does(
    assigned: list[tuple[str, list[tuple[str, str]], int]],
    own: list[tuple[str, str]],
    hard_weight: int,
    ignore_preferred: bool,
) -> None:
    nodes = [make_node(f"n{i}").alloc(cpu="8").label("zone", f"z{i % 2}").obj() for i in range(3)]
    pods = [_pod(f"a{i}", app, carried, f"n{row}") for i, (app, carried, row) in enumerate(assigned)]
    snapshot = make_snapshot(nodes, pods)
    args = InterPodAffinityArgs(
        hard_pod_affinity_weight=hard_weight, ignore_preferred_terms_of_existing_pods=ignore_preferred
    )
    plugin = InterPodAffinity(args, Handle(backend=MemoryBackend(), snapshot=lambda: snapshot))
    pod = PodInfo.of(_pod("p", "web", own, None))

    full = plugin._filter_state(pod, snapshot)
    nothing = not full.affinity and not full.anti_affinity and full.forbidden_by_existing is None
    assert (plugin.pre_filter(CycleState(), pod, snapshot).status.code is Code.SKIP) == nothing

    affinity = pod.pod.spec.affinity
    preferred = weighted_terms(affinity.pod_affinity if affinity else None, pod)
    preferred_anti = weighted_terms(affinity.pod_anti_affinity if affinity else None, pod)
    scores = plugin._scores(pod, snapshot)
    if ignore_preferred and not preferred and not preferred_anti:
        assert scores is None
        return
    counted = plugin._counted_scores(pod, snapshot, preferred, preferred_anti)
    assert (scores is None) == (counted is None)
    if scores is not None and counted is not None:
        assert np.array_equal(scores, counted)
