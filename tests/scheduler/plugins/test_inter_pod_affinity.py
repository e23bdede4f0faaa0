"""InterPodAffinity against kube-scheduler's documented cases (interpodaffinity filtering_test.go and
scoring_test.go, v1.35): the same pods, nodes and expected outcomes, through the plugin's
PreFilter/Filter and PreScore/Score/NormalizeScore, and through the default profile."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from apis.client.backend import EventType, WatchEvent
from apis.core import Namespace, Node, Pod
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.status import Code
from scheduler.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
    InterPodAffinityArgs,
)
from scheduler.plugins.inter_pod_affinity.existing import ExistingTerms, Kind
from tests.scheduler.builders import expr, make_node, make_pod, make_snapshot
from tests.scheduler.plugins.test_default_profile import framework

AFFINITY = ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING = ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH
UNRESOLVABLE = "unresolvable"


def term(topology_key: str, *expressions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": topology_key, **extra}
    if expressions:
        out["labelSelector"] = {"matchExpressions": list(expressions)}
    return out


def plugin(snapshot: Snapshot, args: InterPodAffinityArgs | None = None) -> InterPodAffinity:
    return InterPodAffinity(
        args or InterPodAffinityArgs(), Handle(backend=MemoryBackend(), snapshot=lambda: snapshot)
    )


def filter_outcomes(pl: InterPodAffinity, pod: Pod, snapshot: Snapshot) -> dict[str, str | tuple[str, str]]:
    """Per node: "ok", or (reason, "unresolvable" / "unschedulable")."""
    state = CycleState()
    info = PodInfo.of(pod)
    pre = pl.pre_filter(state, info, snapshot)
    rows = snapshot.candidate_rows()
    names = [snapshot.table.names[int(r)] for r in rows]
    if pre.status.code == Code.SKIP:
        return dict.fromkeys(names, "ok")
    assert pre.status.ok, pre.status
    result = pl.filter(state, info, snapshot, rows)
    out: dict[str, str | tuple[str, str]] = {}
    for i, name in enumerate(names):
        if result.feasible[i]:
            out[name] = "ok"
            continue
        reasons = [reason for reason, mask in result.rejections if mask[i]]
        assert len(reasons) == 1, reasons  # upstream returns the first failing rule only
        unresolvable = result.unresolvable is not None and bool(result.unresolvable[i])
        out[name] = (reasons[0], UNRESOLVABLE if unresolvable else "unschedulable")
    return out


def node(name: str, **labels: str) -> Node:
    builder = make_node(name).alloc(cpu="8", memory="16Gi")
    for key, value in labels.items():
        builder = builder.label(key.replace("_", "."), value)
    return builder.obj()


# upstream's single-node fixture: node1 with region r1, zone z11, hostname h1
NODE1 = node("node1", region="r1", zone="z11", hostname="h1")
SECURITY_IN = expr("service", "In", "securityscan", "value2")


def single(pod: Pod, existing: list[Pod], nodes: list[Node] | None = None) -> str | tuple[str, str]:
    snapshot = make_snapshot(nodes or [NODE1], existing)
    return filter_outcomes(plugin(snapshot), pod, snapshot)["node1"]


def existing_pod(name: str = "existing", node_name: str = "node1", **labels: str) -> Any:
    builder = make_pod(name).on(node_name)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder


def test_a_pod_without_affinity_fits_a_node_without_pods() -> None:
    assert single(make_pod("p").obj(), []) == "ok"


def test_required_affinity_in_operator_matches_the_existing_pod() -> None:
    pod = make_pod("p").pod_affinity(term("region", SECURITY_IN)).obj()
    assert single(pod, [existing_pod(service="securityscan").obj()]) == "ok"


def test_required_affinity_not_in_operator_matches_the_existing_pod() -> None:
    pod = (
        make_pod("p").pod_affinity(term("region", expr("service", "NotIn", "securityscan3", "value3"))).obj()
    )
    assert single(pod, [existing_pod(service="securityscan").obj()]) == "ok"


def test_affinity_with_another_namespace_does_not_match() -> None:
    pod = make_pod("p").pod_affinity(term("region", SECURITY_IN, namespaces=["DiffNameSpace"])).obj()
    assert single(pod, [existing_pod(service="securityscan").obj()]) == (AFFINITY, UNRESOLVABLE)


def test_affinity_whose_selector_matches_no_existing_pod_fails() -> None:
    pod = make_pod("p").pod_affinity(term("region", expr("service", "In", "antivirusscan", "value2"))).obj()
    assert single(pod, [existing_pod(service="securityscan").obj()]) == (AFFINITY, UNRESOLVABLE)


def test_affinity_with_several_operators_in_several_terms() -> None:
    pod = (
        make_pod("p")
        .pod_affinity(term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")))
        .pod_affinity(
            term("region", expr("service", "In", "securityscan"), expr("service", "NotIn", "WrongValue"))
        )
        .obj()
    )
    assert single(pod, [existing_pod(service="securityscan").obj()]) == "ok"


def test_expressions_of_a_selector_are_anded() -> None:
    pod = (
        make_pod("p")
        .pod_affinity(term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")))
        .pod_affinity(
            term("region", expr("service", "In", "securityscan2"), expr("service", "NotIn", "WrongValue"))
        )
        .obj()
    )
    assert single(pod, [existing_pod(service="securityscan").obj()]) == (AFFINITY, UNRESOLVABLE)


def test_affinity_and_anti_affinity_both_satisfied() -> None:
    pod = (
        make_pod("p")
        .pod_affinity(term("region", SECURITY_IN))
        .pod_affinity(term("node", expr("service", "In", "antivirusscan", "value2")), anti=True)
        .obj()
    )
    assert single(pod, [existing_pod(service="securityscan").obj()]) == "ok"


def test_anti_affinity_matching_the_existing_pod_fails_unschedulable() -> None:
    pod = (
        make_pod("p")
        .pod_affinity(term("region", SECURITY_IN))
        .pod_affinity(term("zone", expr("service", "In", "securityscan", "value2")), anti=True)
        .obj()
    )
    assert single(pod, [existing_pod(service="securityscan").obj()]) == (ANTI, "unschedulable")


def test_existing_pods_anti_affinity_is_respected_symmetrically() -> None:
    existing = (
        existing_pod(service="securityscan")
        .pod_affinity(term("zone", expr("security", "In", "S1")), anti=True)
        .obj()
    )
    pod = make_pod("p").label("security", "S1").obj()
    assert single(pod, [existing]) == (EXISTING, "unschedulable")
    not_selected = make_pod("q").label("security", "S2").obj()
    assert single(not_selected, [existing]) == "ok"


def test_existing_anti_affinity_with_not_in_is_satisfied() -> None:
    existing = (
        existing_pod(service="securityscan")
        .pod_affinity(term("zone", expr("security", "NotIn", "S1")), anti=True)
        .obj()
    )
    assert single(make_pod("p").label("security", "S1").obj(), [existing]) == "ok"


def test_affinity_fails_before_anti_affinity_and_symmetry() -> None:
    """A node failing several rules carries the first, in upstream's order."""
    existing = (
        existing_pod(service="securityscan")
        .pod_affinity(term("zone", expr("security", "In", "S1")), anti=True)
        .obj()
    )
    pod = (
        make_pod("p")
        .label("security", "S1")
        .pod_affinity(term("region", expr("service", "In", "nothing-runs-this")))
        .pod_affinity(term("zone", expr("service", "In", "securityscan")), anti=True)
        .obj()
    )
    assert single(pod, [existing]) == (AFFINITY, UNRESOLVABLE)
    pod_no_affinity = (
        make_pod("q")
        .label("security", "S1")
        .pod_affinity(term("zone", expr("service", "In", "securityscan")), anti=True)
        .obj()
    )
    assert single(pod_no_affinity, [existing]) == (ANTI, "unschedulable")


def test_a_pod_matching_its_own_term_is_not_blocked_when_others_match_elsewhere() -> None:
    """Pods matching the term exist (on node2, another hostname): the first-pod exception does
    not apply, node1 fails."""
    nodes = [NODE1, node("node2", region="r1", zone="z11", hostname="h2")]
    pod = make_pod("p").label("service", "securityscan").pod_affinity(term("hostname", SECURITY_IN)).obj()
    existing = [existing_pod(node_name="node2", service="securityscan").obj()]
    assert single(pod, existing, nodes) == (AFFINITY, UNRESOLVABLE)


def multiple(pod: Pod, existing: list[Pod], nodes: list[Node]) -> dict[str, str | tuple[str, str]]:
    snapshot = make_snapshot(nodes, existing)
    return filter_outcomes(plugin(snapshot), pod, snapshot)


def test_first_pod_of_a_self_affine_collection_fits_anywhere_with_the_key() -> None:
    nodes = [node("nodeA", region="r1", zone="z1"), node("nodeB", region="r1", zone="z2"), node("nodeC")]
    pod = make_pod("p").label("foo", "bar").pod_affinity(term("zone", expr("foo", "In", "bar"))).obj()
    assert multiple(pod, [], nodes) == {"nodeA": "ok", "nodeB": "ok", "nodeC": (AFFINITY, UNRESOLVABLE)}
    # the exception needs the pod to match its own terms
    other = make_pod("q").label("foo", "baz").pod_affinity(term("zone", expr("foo", "In", "bar"))).obj()
    assert multiple(other, [], nodes) == dict.fromkeys(["nodeA", "nodeB", "nodeC"], (AFFINITY, UNRESOLVABLE))


def test_affinity_admits_every_node_in_the_matching_domain() -> None:
    nodes = [
        node("nodeA", region="r1", zone="z1"),
        node("nodeB", region="r1", zone="z2"),
        node("nodeC", region="r2", zone="z3"),
    ]
    pod = make_pod("p").pod_affinity(term("region", expr("foo", "In", "bar"))).obj()
    existing = [existing_pod(node_name="nodeA", foo="bar").obj()]
    assert multiple(pod, existing, nodes) == {
        "nodeA": "ok",
        "nodeB": "ok",
        "nodeC": (AFFINITY, UNRESOLVABLE),
    }


def test_anti_affinity_forbids_the_whole_domain_and_ignores_nodes_without_the_key() -> None:
    nodes = [
        node("nodeA", region="r1", zone="z1"),
        node("nodeB", region="r1", zone="z2"),
        node("nodeC", zone="z3"),
    ]
    pod = make_pod("p").pod_affinity(term("region", expr("foo", "In", "bar")), anti=True).obj()
    existing = [existing_pod(node_name="nodeA", foo="bar").obj()]
    assert multiple(pod, existing, nodes) == {
        "nodeA": (ANTI, "unschedulable"),
        "nodeB": (ANTI, "unschedulable"),
        "nodeC": "ok",
    }


def test_affinity_needs_every_term_matched_by_the_same_pod() -> None:
    """Upstream counts pods matching *all* affinity terms: two pods each matching one term do not
    satisfy both."""
    nodes = [node("nodeA", region="r1", zone="z1")]
    pod = (
        make_pod("p")
        .pod_affinity(term("region", expr("foo", "In", "bar")))
        .pod_affinity(term("zone", expr("baz", "In", "qux")))
        .obj()
    )
    apart = [existing_pod("a", "nodeA", foo="bar").obj(), existing_pod("b", "nodeA", baz="qux").obj()]
    assert multiple(pod, apart, nodes) == {"nodeA": (AFFINITY, UNRESOLVABLE)}
    together = [existing_pod("c", "nodeA", foo="bar", baz="qux").obj()]
    assert multiple(pod, together, nodes) == {"nodeA": "ok"}


def test_symmetry_uses_the_existing_pods_namespace_and_topology() -> None:
    nodes = [node("nodeA", zone="z1"), node("nodeB", zone="z1"), node("nodeC", zone="z2")]
    existing = (
        make_pod("e")
        .namespace("team-a")
        .on("nodeA")
        .pod_affinity(term("zone", expr("app", "In", "web")), anti=True)
        .obj()
    )
    same_ns = make_pod("p").namespace("team-a").label("app", "web").obj()
    assert multiple(same_ns, [existing], nodes) == {
        "nodeA": (EXISTING, "unschedulable"),
        "nodeB": (EXISTING, "unschedulable"),
        "nodeC": "ok",
    }
    other_ns = make_pod("q").namespace("team-b").label("app", "web").obj()
    assert set(multiple(other_ns, [existing], nodes).values()) == {"ok"}


def namespace_event(*namespaces: tuple[str, dict[str, str]]) -> WatchEvent[Namespace]:
    objects = [
        Namespace.model_validate({"metadata": {"name": n, "labels": labels}}) for n, labels in namespaces
    ]
    return WatchEvent(EventType.REPLACED, objects=objects)


def test_namespace_selector_selects_namespaces_by_their_labels() -> None:
    nodes = [node("nodeA", zone="z1"), node("nodeB", zone="z2")]
    existing = [make_pod("e").namespace("team-a").label("app", "db").on("nodeA").obj()]
    snapshot = make_snapshot(nodes, existing)
    pl = plugin(snapshot)
    pl.namespaces.on_event(namespace_event(("team-a", {"team": "a"}), ("team-b", {"team": "b"})))
    selected = term("zone", expr("app", "In", "db"), namespaceSelector={"matchLabels": {"team": "a"}})
    pod = make_pod("p").namespace("team-b").pod_affinity(selected).obj()
    assert filter_outcomes(pl, pod, snapshot) == {"nodeA": "ok", "nodeB": (AFFINITY, UNRESOLVABLE)}
    not_selected = term("zone", expr("app", "In", "db"), namespaceSelector={"matchLabels": {"team": "b"}})
    pod = make_pod("q").namespace("team-b").pod_affinity(not_selected).obj()
    assert filter_outcomes(pl, pod, snapshot)["nodeA"] == (AFFINITY, UNRESOLVABLE)
    everywhere = term("zone", expr("app", "In", "db"), namespaceSelector={})
    pod = make_pod("r").namespace("team-b").pod_affinity(everywhere).obj()
    assert filter_outcomes(pl, pod, snapshot)["nodeA"] == "ok"
    # the namespace's labels change: the selector follows
    pl.namespaces.on_event(namespace_event(("team-a", {"team": "b"})))
    pod = make_pod("s").namespace("team-b").pod_affinity(not_selected).obj()
    assert filter_outcomes(pl, pod, snapshot)["nodeA"] == "ok"


def test_existing_terms_namespace_selector_is_matched_against_the_incoming_pods_namespace() -> None:
    nodes = [node("nodeA", zone="z1"), node("nodeB", zone="z2")]
    existing = (
        make_pod("e")
        .namespace("team-a")
        .on("nodeA")
        .pod_affinity(
            term("zone", expr("app", "In", "web"), namespaceSelector={"matchLabels": {"env": "prod"}}),
            anti=True,
        )
        .obj()
    )
    snapshot = make_snapshot(nodes, [existing])
    pl = plugin(snapshot)
    pl.namespaces.on_event(namespace_event(("prod-1", {"env": "prod"}), ("dev-1", {"env": "dev"})))
    prod = make_pod("p").namespace("prod-1").label("app", "web").obj()
    assert filter_outcomes(pl, prod, snapshot) == {"nodeA": (EXISTING, "unschedulable"), "nodeB": "ok"}
    dev = make_pod("q").namespace("dev-1").label("app", "web").obj()
    assert set(filter_outcomes(pl, dev, snapshot).values()) == {"ok"}


def test_match_label_keys_and_mismatch_label_keys_take_values_from_the_pods_labels() -> None:
    nodes = [node("nodeA", zone="z1"), node("nodeB", zone="z2")]
    existing = [
        existing_pod("v1", "nodeA", app="web", version="v1").obj(),
        existing_pod("v2", "nodeB", app="web", version="v2").obj(),
    ]
    same_version = term("zone", expr("app", "In", "web"), matchLabelKeys=["version"])
    pod = make_pod("p").label("app", "web").label("version", "v2").pod_affinity(same_version, anti=True).obj()
    assert multiple(pod, existing, nodes) == {"nodeA": "ok", "nodeB": (ANTI, "unschedulable")}
    other_version = term("zone", expr("app", "In", "web"), mismatchLabelKeys=["version"])
    pod = (
        make_pod("q").label("app", "web").label("version", "v2").pod_affinity(other_version, anti=True).obj()
    )
    assert multiple(pod, existing, nodes) == {"nodeA": (ANTI, "unschedulable"), "nodeB": "ok"}
    # an existing pod's matchLabelKeys use that pod's own labels
    carrier = existing_pod("c", "nodeA", app="web", version="v1").pod_affinity(same_version, anti=True).obj()
    v1 = make_pod("r").label("app", "web").label("version", "v1").obj()
    v2 = make_pod("s").label("app", "web").label("version", "v2").obj()
    assert multiple(v1, [carrier], nodes)["nodeA"] == (EXISTING, "unschedulable")
    assert multiple(v2, [carrier], nodes)["nodeA"] == "ok"


def test_null_label_selector_matches_no_pod_and_empty_matches_every_pod() -> None:
    nodes = [node("nodeA", zone="z1"), node("nodeB", zone="z2")]
    existing = [existing_pod("e", "nodeA", app="web").obj()]
    null = make_pod("p").pod_affinity({"topologyKey": "zone"}, anti=True).obj()
    assert set(multiple(null, existing, nodes).values()) == {"ok"}
    empty = make_pod("q").pod_affinity({"topologyKey": "zone", "labelSelector": {}}, anti=True).obj()
    assert multiple(empty, existing, nodes) == {"nodeA": (ANTI, "unschedulable"), "nodeB": "ok"}


def test_pre_filter_skips_a_pod_with_nothing_to_check() -> None:
    snapshot = make_snapshot([NODE1], [existing_pod(service="securityscan").obj()])
    state = CycleState()
    assert plugin(snapshot).pre_filter(state, make_pod("p").info(), snapshot).status.code == Code.SKIP


def test_the_symmetry_index_keeps_one_entry_per_distinct_term() -> None:
    nodes = [node(f"n{i}", zone="z1") for i in range(3)]
    pods = [
        make_pod(f"w{i}")
        .on(f"n{i}")
        .label("app", "web")
        .pod_affinity(term("zone", expr("app", "In", "web")), anti=True)
        .obj()
        for i in range(3)
    ]
    snapshot = make_snapshot(nodes, pods)
    index = InterPodAffinity.existing_terms(snapshot)
    entries = list(index.terms(Kind.REQUIRED_ANTI_AFFINITY, snapshot.table.row_count))
    assert len(entries) == 1
    assert entries[0][1].tolist() == [1, 1, 1]
    assert isinstance(index, ExistingTerms)
    restore = snapshot.simulate_removal([PodInfo.of(pods[0]), PodInfo.of(pods[1]), PodInfo.of(pods[2])])
    assert len(index) == 0
    restore()
    assert len(index) == 1


# ---- the default profile: messages and outcomes as a user sees them -----------------------------


def test_default_profile_reports_upstream_messages() -> None:
    nodes = [
        make_node(f"n{i}").alloc(cpu="8", memory="16Gi").label("kubernetes.io/hostname", f"n{i}").obj()
        for i in range(2)
    ]
    spread = term("kubernetes.io/hostname", expr("app", "In", "web"))
    existing = [
        make_pod(f"web-{i}").label("app", "web").on(f"n{i}").pod_affinity(spread, anti=True).obj()
        for i in range(2)
    ]
    snapshot = make_snapshot(nodes, existing)
    fw = framework(snapshot)
    pod = PodInfo.of(make_pod("web-2").label("app", "web").pod_affinity(spread, anti=True).obj())
    state = CycleState()
    status, _ = fw.run_pre_filter(state, pod, snapshot)
    assert status.ok
    diagnosis = Diagnosis(node_count=2)
    rows, status = fw.run_filter(state, pod, snapshot, snapshot.candidate_rows(), diagnosis)
    assert rows.size == 0
    assert diagnosis.message() == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    assert not diagnosis.unresolvable_rows  # preemption may help
    assert diagnosis.rejecting_plugins == {"InterPodAffinity"}


# ---- scoring ---------------------------------------------------------------------------------------


def scores(pl: InterPodAffinity, pod: Pod, snapshot: Snapshot) -> dict[str, int]:
    state = CycleState()
    info = PodInfo.of(pod)
    rows = snapshot.candidate_rows()
    names = [snapshot.table.names[int(r)] for r in rows]
    if pl.pre_score(state, info, snapshot, rows).code == Code.SKIP:
        return dict.fromkeys(names, 0)
    raw = pl.score(state, info, snapshot, rows)
    normalized = pl.normalize_scores(state, info, raw)
    return dict(zip(names, normalized.tolist(), strict=True))


S1 = {"security": "S1"}
S2 = {"security": "S2"}


def labelled(name: str, node_name: str, labels: dict[str, str]) -> Any:
    builder = make_pod(name).on(node_name)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder


def stay_with(value: str, key: str = "region") -> dict[str, Any]:
    return term(key, expr("security", "In", value))


def run_scores(
    pod: Pod, existing: list[Pod], nodes: list[Node], args: InterPodAffinityArgs | None = None
) -> dict[str, int]:
    snapshot = make_snapshot(nodes, existing)
    return scores(plugin(snapshot, args), pod, snapshot)


CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}


def score_node(name: str, *label_sets: dict[str, str]) -> Node:
    builder = make_node(name).alloc(cpu="8", memory="16Gi")
    for labels in label_sets:
        for key, value in labels.items():
            builder = builder.label(key, value)
    return builder.obj()


def test_scores_are_all_zero_without_affinity() -> None:
    nodes = [score_node("node1", CHINA), score_node("node2", INDIA), score_node("node3", AZ1)]
    assert run_scores(make_pod("p").obj(), [], nodes) == {"node1": 0, "node2": 0, "node3": 0}


def test_preferred_affinity_scores_the_matching_domain_highest() -> None:
    nodes = [score_node("node1", CHINA), score_node("node2", INDIA), score_node("node3", AZ1)]
    existing = [
        labelled("a", "node1", S1).obj(),
        labelled("b", "node2", S2).obj(),
        labelled("c", "node3", S1).obj(),
    ]
    pod = make_pod("p").label("security", "S1").pod_affinity(stay_with("S1"), weight=5).obj()
    assert run_scores(pod, existing, nodes) == {"node1": 100, "node2": 0, "node3": 0}


def test_every_node_of_the_matching_domain_scores_the_same() -> None:
    nodes = [score_node("node1", CHINA), score_node("node2", CHINA, AZ1), score_node("node3", INDIA)]
    existing = [labelled("a", "node1", S1).obj()]
    pod = make_pod("p").label("security", "S1").pod_affinity(stay_with("S1"), weight=5).obj()
    assert run_scores(pod, existing, nodes) == {"node1": 100, "node2": 100, "node3": 0}


def test_more_matching_pods_in_a_domain_score_higher_min_max_normalized() -> None:
    nodes = [
        score_node("node1", CHINA),
        score_node("node2", INDIA),
        score_node("node3", CHINA),
        score_node("node4", CHINA),
        score_node("node5", INDIA),
        score_node("node6", AZ1),
    ]
    existing = [
        labelled("a", "node1", S2).obj(),
        labelled("b", "node1", S2).obj(),
        labelled("c", "node2", S2).obj(),
        labelled("d", "node3", S2).obj(),
        labelled("e", "node4", S2).obj(),
        labelled("f", "node5", S2).obj(),
    ]
    pod = make_pod("p").pod_affinity(stay_with("S2"), weight=6).obj()
    # China holds 4 matching pods (24), India 2 (12), node6 none (0): 100 * (s - 0) / 24
    assert run_scores(pod, existing, nodes) == {
        "node1": 100,
        "node2": 50,
        "node3": 100,
        "node4": 100,
        "node5": 50,
        "node6": 0,
    }


def test_preferred_anti_affinity_scores_the_matching_domain_lowest() -> None:
    nodes = [score_node("node1", AZ1), score_node("node2", CHINA)]
    existing = [labelled("a", "node1", S1).obj(), labelled("b", "node2", S2).obj()]
    avoid = term("az", expr("security", "In", "S1"))
    pod = make_pod("p").pod_affinity(avoid, anti=True, weight=5).obj()
    assert run_scores(pod, existing, nodes) == {"node1": 0, "node2": 100}


def test_existing_pods_required_affinity_attracts_by_hard_pod_affinity_weight() -> None:
    nodes = [score_node("node1", CHINA), score_node("node2", INDIA), score_node("node3", AZ1)]
    attracted = labelled("a", "node1", {}).pod_affinity(term("region", expr("security", "In", "S1"))).obj()
    pod = make_pod("p").label("security", "S1").obj()
    assert run_scores(pod, [attracted], nodes) == {"node1": 100, "node2": 0, "node3": 0}
    assert run_scores(pod, [attracted], nodes, InterPodAffinityArgs(hard_pod_affinity_weight=0)) == {
        "node1": 0,
        "node2": 0,
        "node3": 0,
    }


def test_existing_pods_preferred_terms_count_unless_ignored() -> None:
    nodes = [score_node("node1", CHINA), score_node("node2", INDIA)]
    avoiding = (
        labelled("a", "node1", {})
        .pod_affinity(term("region", expr("security", "In", "S1")), anti=True, weight=10)
        .obj()
    )
    pod = make_pod("p").label("security", "S1").obj()
    assert run_scores(pod, [avoiding], nodes) == {"node1": 0, "node2": 100}
    ignore = InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True)
    assert run_scores(pod, [avoiding], nodes, ignore) == {"node1": 0, "node2": 0}
    # a pod with preferred terms of its own still sees the existing pods' terms
    own = (
        make_pod("q")
        .label("security", "S1")
        .pod_affinity(term("region", expr("x", "In", "y")), weight=1)
        .obj()
    )
    assert run_scores(own, [avoiding], nodes, ignore) == {"node1": 0, "node2": 100}


def test_normalization_truncates_like_go() -> None:
    snapshot = make_snapshot([])
    pl = plugin(snapshot)
    out = pl.normalize_scores(CycleState(), make_pod("p").info(), np.array([-5, 0, 10], dtype=np.int64))
    assert out.tolist() == [0, 33, 100]


def test_args_are_strict_and_range_checked() -> None:
    assert InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": 100}).hard_pod_affinity_weight == 100
    with pytest.raises(ValidationError, match=r"not in valid range \[0, 100\]"):
        InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": 101})
    with pytest.raises(ValidationError):
        InterPodAffinityArgs.model_validate({"hardPodAffinityWeigth": 1})
