"""Properties of PodTopologySpread through the whole default profile: pods with a DoNotSchedule
zone constraint, scheduled one by one (PreFilter, Filter, PreScore, Score, then assumed into the
cache as the loop does), never leave the zones more than maxSkew apart; and the vectorised Filter
agrees with a per-node transcription of upstream's algorithm."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Pod, TopologySpreadConstraint
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import Selector
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.profile import ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.pod_topology_spread import PodTopologySpreadArgs, new
from tests.examples import examples
from tests.scheduler.builders import PodBuilder, make_node, make_pod

ZONE = "zone"


def constrained(name: str, app: str, max_skew: int, builder: PodBuilder | None = None, **more: Any) -> Pod:
    pod = (builder or make_pod(name)).label("app", app).req(cpu="100m").obj()
    pod.spec.topology_spread_constraints = [
        TopologySpreadConstraint.model_validate(
            {
                "maxSkew": max_skew,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
                **more,
            }
        )
    ]
    return pod


def schedule_one(fw: Framework, cache: Cache, pod: PodInfo) -> str | None:
    snapshot = Snapshot(cache)
    state = CycleState()
    status, _ = fw.run_pre_filter(state, pod, snapshot)
    if not status.ok:
        return None
    rows, status = fw.run_filter(state, pod, snapshot, snapshot.candidate_rows(), Diagnosis())
    if not status.ok or rows.size == 0:
        return None
    assert fw.run_pre_score(state, pod, snapshot, rows).ok
    total, _, status = fw.run_score(state, pod, snapshot, rows)
    assert status.ok
    node = snapshot.table.names[int(rows[int(np.argmax(total))])]
    cache.assume(pod, node)
    return node


@settings(max_examples=examples(60), deadline=None)
@given(
    zones=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=4),
    max_skew=st.integers(min_value=1, max_value=2),
    pods=st.integers(min_value=1, max_value=14),
    others=st.lists(st.integers(min_value=0, max_value=5), max_size=4),
    cpus=st.integers(min_value=1, max_value=3),
)
def test_skew_never_exceeds_max_skew_after_do_not_schedule_placements(
    zones: list[int], max_skew: int, pods: int, others: list[int], cpus: int
) -> None:
    cache = Cache()
    nodes: list[str] = []
    for z, count in enumerate(zones):
        for i in range(count):
            name = f"z{z}-n{i}"
            cache.upsert_node(make_node(name).alloc(cpu=str(cpus), memory="8Gi").label(ZONE, f"z{z}").obj())
            nodes.append(name)
    for i, n in enumerate(others):  # pods of another app, which the selector does not match
        cache.upsert_pod(
            PodInfo.of(make_pod(f"other-{i}").label("app", "db").on(nodes[n % len(nodes)]).obj())
        )
    handle = Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache))
    fw = Framework(
        ResolvedProfile(scheduler_name="koord-scheduler", plugins=DEFAULT_PLUGINS), DEFAULT_REGISTRY, handle
    )
    per_zone = dict.fromkeys((f"z{z}" for z in range(len(zones))), 0)
    for i in range(pods):
        node = schedule_one(fw, cache, PodInfo.of(constrained(f"web-{i}", "web", max_skew)))
        if node is None:
            continue  # full: it would stay pending
        per_zone[node.split("-")[0]] += 1
        assert max(per_zone.values()) - min(per_zone.values()) <= max_skew, per_zone


# ---- the Filter against a per-node transcription of upstream's calPreFilterState + Filter ---------


def upstream_filter(pod: Pod, nodes: list[Any], assigned: list[Pod]) -> dict[str, bool]:
    info = PodInfo.of(pod)
    (c,) = pod.spec.topology_spread_constraints or []
    selector = Selector.of(c.label_selector)
    node_selector = pod.spec.node_selector or {}
    tolerations = pod.spec.tolerations or []
    counts: dict[str, int] = {}
    for node in nodes:
        labels = node.metadata.labels or {}
        if ZONE not in labels:
            continue
        if c.node_affinity_policy != "Ignore" and any(labels.get(k) != v for k, v in node_selector.items()):
            continue
        if c.node_taints_policy == "Honor" and any(
            not any(t.key == taint.key and t.operator == "Exists" for t in tolerations)
            for taint in node.spec.taints or ()
        ):
            continue
        value = labels[ZONE]
        counts[value] = counts.get(value, 0) + sum(
            1
            for p in assigned
            if p.spec.node_name == node.metadata.name
            and p.metadata.namespace == pod.metadata.namespace
            and selector.matches(p.metadata.labels or {})
        )
    low = min(counts.values()) if counts else 0
    if len(counts) < (c.min_domains or 1):
        low = 0
    self_match = 1 if selector.matches(info.labels) else 0
    out = {}
    for node in nodes:
        labels = node.metadata.labels or {}
        out[node.metadata.name] = (
            ZONE in labels and counts.get(labels[ZONE], 0) + self_match - low <= c.max_skew
        )
    return out


@settings(max_examples=examples(300), deadline=None)
@given(
    layout=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(), st.sampled_from(["x", "y"])),
        min_size=1,
        max_size=7,
    ),
    placed=st.lists(
        st.tuples(
            st.integers(0, 6),
            st.sampled_from(["web", "web", "db"]),
            st.sampled_from(["default", "default", "other"]),
        ),
        max_size=20,
    ),
    max_skew=st.integers(1, 3),
    min_domains=st.none() | st.integers(1, 4),
    affinity=st.sampled_from([None, "Honor", "Ignore"]),
    taints=st.sampled_from([None, "Honor", "Ignore"]),
    select_x=st.booleans(),
    tolerate=st.booleans(),
    own_label=st.sampled_from(["web", "db"]),
)
def test_filter_agrees_with_upstreams_algorithm(
    layout: list[tuple[str | None, bool, str]],
    placed: list[tuple[int, str, str]],
    max_skew: int,
    min_domains: int | None,
    affinity: str | None,
    taints: str | None,
    select_x: bool,
    tolerate: bool,
    own_label: str,
) -> None:
    nodes = []
    for i, (zone, tainted, kind) in enumerate(layout):
        builder = make_node(f"n{i}").label("kind", kind)
        if zone is not None:
            builder = builder.label(ZONE, zone)
        if tainted:
            builder = builder.taint("gpu", "true")
        nodes.append(builder.obj())
    assigned = [
        make_pod(f"p{j}").namespace(ns).uid(f"p{j}").label("app", app).on(f"n{n % len(nodes)}").obj()
        for j, (n, app, ns) in enumerate(placed)
    ]
    more: dict[str, Any] = {}
    if min_domains is not None:
        more["minDomains"] = min_domains
    if affinity is not None:
        more["nodeAffinityPolicy"] = affinity
    if taints is not None:
        more["nodeTaintsPolicy"] = taints
    pod_builder = make_pod("p")
    if select_x:
        pod_builder = pod_builder.node_selector(kind="x")
    if tolerate:
        pod_builder = pod_builder.toleration("gpu", operator="Exists")
    pod = constrained("p", "web", max_skew, pod_builder, **more)
    pod.metadata.labels = {"app": own_label}

    cache = Cache()
    for node in nodes:
        cache.upsert_node(node)
    for p in assigned:
        cache.upsert_pod(PodInfo.of(p))
    snapshot = Snapshot(cache)
    plugin = new(
        PodTopologySpreadArgs(defaulting_type="List"),
        Handle(backend=MemoryBackend(), snapshot=lambda: snapshot),
    )
    state, info = CycleState(), PodInfo.of(pod)
    assert plugin.pre_filter(state, info, snapshot).status.ok
    rows = snapshot.candidate_rows()
    answer = plugin.filter(state, info, snapshot, rows)
    got = {
        snapshot.table.names[r]: bool(f) for r, f in zip(rows.tolist(), answer.feasible.tolist(), strict=True)
    }
    assert got == upstream_filter(pod, nodes, assigned)
