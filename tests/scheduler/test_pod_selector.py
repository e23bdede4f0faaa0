"""The per-row counts of pods matching a selector stay equal to a recount through every change."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.core import Node, Pod
from apis.meta import LabelSelector, LabelSelectorRequirement
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import PodMatcher, PodSelectorCounts, Requirement, Selector
from scheduler.cache.snapshot import Snapshot
from tests.examples import examples

NODES = ("n0", "n1", "n2")


def node(name: str, **labels: str) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "64", "pods": "110"}},
        }
    )


def pod(
    name: str, namespace: str, labels: dict[str, str], node_name: str | None, terminating: bool = False
) -> PodInfo:
    meta: dict[str, object] = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}/{name}",
        "labels": labels,
    }
    if terminating:
        meta["deletionTimestamp"] = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return PodInfo.of(
        Pod.model_validate({"metadata": meta, "spec": {"nodeName": node_name, "containers": [{"name": "c"}]}})
    )


APP_WEB = PodMatcher(Selector.of(LabelSelector(match_labels={"app": "web"})), frozenset({"default"}))
ANY_TIER = PodMatcher(
    Selector.of(LabelSelector(match_expressions=[LabelSelectorRequirement(key="tier", operator="Exists")])),
    skip_terminating=True,
)
NOT_DB = PodMatcher(
    Selector.of(
        LabelSelector(
            match_expressions=[LabelSelectorRequirement(key="app", operator="NotIn", values=["db"])]
        )
    )
)
WEB_OR_DB_TIER_1 = PodMatcher(
    Selector.of(
        LabelSelector(
            match_labels={"tier": "1"},
            match_expressions=[LabelSelectorRequirement(key="app", operator="In", values=["web", "db"])],
        )
    ),
    frozenset({"default", "other"}),
)
MATCHERS = (APP_WEB, ANY_TIER, NOT_DB, WEB_OR_DB_TIER_1)


def recount(cache: Cache, matcher: PodMatcher) -> list[int]:
    counts = [0] * cache.table.row_count
    for info in cache.nodes.values():
        for p in info.pods.values():
            if matcher.matches(p):
                counts[info.row] += 1
    return counts


def test_selectors_follow_label_selector_semantics() -> None:
    assert Selector.of(None).matches({}) is False
    assert Selector.of(LabelSelector()).matches({"any": "thing"}) is True
    bad = LabelSelector(match_expressions=[LabelSelectorRequirement(key="a", operator="Gt", values=["1"])])
    assert Selector.of(bad).matches({"a": "2"}) is False
    web = Selector.of(LabelSelector(match_labels={"app": "web"}))
    assert web.adding([Requirement("v", "In", frozenset({"1"}))]).matches({"app": "web", "v": "1"})
    assert not web.adding([Requirement("v", "In", frozenset({"1"}))]).matches({"app": "web", "v": "2"})
    assert Selector.of(LabelSelector(match_labels={"b": "1", "a": "2"})) == Selector.of(
        LabelSelector(match_labels={"a": "2", "b": "1"})
    )


def test_counts_are_per_row_and_respect_namespaces_and_terminating_pods() -> None:
    cache = Cache()
    for name in NODES:
        cache.upsert_node(node(name))
    cache.upsert_pod(pod("a", "default", {"app": "web", "tier": "1"}, "n0"))
    cache.upsert_pod(pod("b", "other", {"app": "web"}, "n0"))
    cache.upsert_pod(pod("c", "default", {"app": "web", "tier": "2"}, "n1", terminating=True))
    snap = Snapshot(cache)
    row = cache.table.row
    web = snap.matching_pod_counts(APP_WEB)
    assert (web[row["n0"]], web[row["n1"]], web[row["n2"]]) == (1, 1, 0)
    tier = snap.matching_pod_counts(ANY_TIER)
    assert (tier[row["n0"]], tier[row["n1"]]) == (1, 0)
    undo = snap.simulate_removal([cache.pod("default/a")])  # type: ignore[list-item]
    assert snap.matching_pod_counts(APP_WEB)[row["n0"]] == 0
    undo()
    assert snap.matching_pod_counts(APP_WEB)[row["n0"]] == 1


def test_label_domains_number_each_value_and_mark_nodes_without_the_label() -> None:
    cache = Cache()
    cache.upsert_node(node("n0", zone="b"))
    cache.upsert_node(node("n1", zone="a"))
    cache.upsert_node(node("n2"))
    ids, values = Snapshot(cache).label_domains("zone")
    row = cache.table.row
    assert values == ("a", "b")
    assert (ids[row["n0"]], ids[row["n1"]], ids[row["n2"]]) == (1, 0, -1)
    cache.upsert_node(node("n2", zone="c"))
    ids, values = Snapshot(cache).label_domains("zone")
    assert values == ("a", "b", "c")
    assert ids[row["n2"]] == 2


_labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db", "1"]), max_size=2)
_op = st.tuples(
    st.sampled_from(
        ["bind", "assume", "confirm", "forget", "delete", "relabel", "remove_node", "add_node", "simulate"]
    ),
    st.integers(0, 7),
    st.sampled_from(NODES),
    st.sampled_from(["default", "other"]),
    _labels,
    st.booleans(),
)


@settings(max_examples=examples(150), deadline=None)
@given(ops=st.lists(_op, max_size=40), early=st.booleans(), capacity=st.sampled_from([1, 2, 512]))
def test_counts_equal_a_recount_after_any_sequence_of_changes(
    ops: list[tuple[str, int, str, str, dict[str, str], bool]], early: bool, capacity: int
) -> None:
    """Also with room for fewer matchers than are asked for: dropped ones are rebuilt right."""
    cache = Cache()
    cache.pod_selector_counts = PodSelectorCounts(capacity)
    cache.observe(cache.pod_selector_counts)
    for name in NODES:
        cache.upsert_node(node(name))
    snap = Snapshot(cache)
    if early:  # matchers asked for before the pods arrive are kept up to date incrementally
        for matcher in MATCHERS:
            snap.matching_pod_counts(matcher)
    for action, i, where, ns, labels, terminating in ops:
        name = f"p{i}"
        uid = f"{ns}/{name}"
        if action == "bind":
            cache.upsert_pod(pod(name, ns, labels, where, terminating))
        elif action == "assume" and cache.pod(uid) is None:
            cache.assume(pod(name, ns, labels, None, terminating), where)
        elif action == "forget":
            cache.forget(uid)
        elif action == "delete":
            cache.remove_pod(uid)
        elif action == "confirm" and (held := cache.pod(uid)) is not None:
            # A new version that changes nothing a matcher reads (a binding confirmed): the
            # counts keep the entries swapped (``PodSelectorCounts.pod_replaced``).
            gone = held.pod.metadata.deletion_timestamp is not None
            cache.upsert_pod(pod(name, ns, dict(held.labels), cache.node_of(uid), gone))
        elif action == "relabel" and cache.node_of(uid) is not None:
            cache.upsert_pod(pod(name, ns, labels, cache.node_of(uid), terminating))
        elif action == "remove_node":
            cache.remove_node(where)
        elif action == "add_node":
            cache.upsert_node(node(where))
        elif action == "simulate":
            victims = [p for p in cache.assigned_pods() if p.namespace == ns]
            undo = snap.simulate_removal(victims)
            for matcher in MATCHERS:
                counts = snap.matching_pod_counts(matcher)
                assert int(counts.sum()) == sum(recount(cache, matcher)) - sum(
                    1 for v in victims if matcher.matches(v)
                )
            undo()
    for matcher in MATCHERS:
        counts = snap.matching_pod_counts(matcher)
        assert counts.size == cache.table.row_count
        assert np.array_equal(counts, np.array(recount(cache, matcher), dtype=np.int64))


def test_a_new_version_on_the_same_node_is_counted_by_what_it_carries() -> None:
    """A confirmed binding swaps the entries (``pod_replaced``); a version whose labels,
    namespace or termination changed is counted again."""
    cache = Cache()
    for name in NODES:
        cache.upsert_node(node(name))
    snap = Snapshot(cache)
    row = cache.table.row["n0"]
    cache.assume(pod("a", "default", {"app": "web", "tier": "1"}, None), "n0")
    assert snap.matching_pod_counts(APP_WEB)[row] == 1
    confirmed = pod("a", "default", {"app": "web", "tier": "1"}, "n0")
    cache.upsert_pod(confirmed)
    assert snap.matching_pod_counts(APP_WEB)[row] == 1
    assert snap.matching_pod_counts(ANY_TIER)[row] == 1
    cache.upsert_pod(pod("a", "default", {"app": "db", "tier": "1"}, "n0"))
    assert snap.matching_pod_counts(APP_WEB)[row] == 0
    assert snap.matching_pod_counts(WEB_OR_DB_TIER_1)[row] == 1
    cache.upsert_pod(pod("a", "default", {"app": "db", "tier": "1"}, "n0", terminating=True))
    assert snap.matching_pod_counts(ANY_TIER)[row] == 0
    cache.remove_pod("default/a")
    assert [int(snap.matching_pod_counts(m)[row]) for m in MATCHERS] == [0, 0, 0, 0]
    fresh = PodSelectorCounts()  # rebuilt from the kept entries: none left behind
    cache.observe(fresh)
    assert not fresh.counts(NOT_DB, cache.table.row_count).any()
