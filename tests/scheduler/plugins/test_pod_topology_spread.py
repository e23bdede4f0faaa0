"""PodTopologySpread, ported from kube-scheduler's podtopologyspread filtering_test.go and
scoring_test.go (same clusters, same expected codes and scores), plus the inclusion policies,
minDomains, matchLabelKeys and the default constraints."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod, TopologySpreadConstraint
from apis.meta import OwnerReference
from apis.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import Requirement
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.status import Code
from scheduler.plugins.pod_topology_spread import PodTopologySpreadArgs, new
from scheduler.plugins.pod_topology_spread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
)
from scheduler.plugins.pod_topology_spread.workloads import (
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SERVICES,
    STATEFULSETS,
    Workloads,
)
from tests.scheduler.builders import PodBuilder, expr, make_node, make_pod, make_snapshot

HOSTNAME = "kubernetes.io/hostname"
SUCCESS, UNSCHEDULABLE, UNRESOLVABLE = "Success", "Unschedulable", "UnschedulableAndUnresolvable"
FOO_EXISTS: dict[str, Any] = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR_EXISTS: dict[str, Any] = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(
    pod: PodBuilder | Pod,
    max_skew: int,
    key: str,
    when: str = "DoNotSchedule",
    selector: dict[str, Any] | None = FOO_EXISTS,
    **more: Any,
) -> Pod:
    obj = pod.obj() if isinstance(pod, PodBuilder) else pod
    constraint = TopologySpreadConstraint.model_validate(
        {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": when,
            "labelSelector": selector,
            **more,
        }
    )
    obj.spec.topology_spread_constraints = [*(obj.spec.topology_spread_constraints or []), constraint]
    return obj


def foo_pod(name: str, node: str, namespace: str = "default") -> Pod:
    return make_pod(name).namespace(namespace).uid(f"{namespace}-{name}").label("foo", "").on(node).obj()


def zone_nodes() -> list[Any]:
    return [
        make_node("node-a").label("zone", "zone1").label("node", "node-a").obj(),
        make_node("node-b").label("zone", "zone1").label("node", "node-b").obj(),
        make_node("node-x").label("zone", "zone2").label("node", "node-x").obj(),
        make_node("node-y").label("zone", "zone2").label("node", "node-y").obj(),
    ]


SPREAD_2103 = [foo_pod(name, f"node-{name[2]}") for name in ("p-a1", "p-a2", "p-b1", "p-y1", "p-y2", "p-y3")]
"""Matching pods spread over node-a/b/x/y as 2/1/0/3."""


class _Backend:
    pass


def plugin(args: PodTopologySpreadArgs | None = None) -> PodTopologySpread:
    handle = Handle(backend=_Backend(), snapshot=lambda: make_snapshot([]))  # type: ignore[arg-type]
    built = new(args, handle)
    built.handle_for_tests = handle  # type: ignore[attr-defined]
    return built


def codes(pl: PodTopologySpread, pod: Pod, snapshot: Snapshot) -> dict[str, str]:
    """Node -> kube-scheduler's status code after PreFilter and Filter."""
    state = CycleState()
    info = PodInfo.of(pod)
    result = pl.pre_filter(state, info, snapshot)
    rows = snapshot.candidate_rows()
    if result.status.code == Code.SKIP:
        return {snapshot.table.names[r]: SUCCESS for r in rows.tolist()}
    assert result.status.ok, result.status
    answer = pl.filter(state, info, snapshot, rows)
    out = {}
    for i, row in enumerate(rows.tolist()):
        if answer.feasible[i]:
            code = SUCCESS
        else:
            assert answer.unresolvable is not None
            code = UNRESOLVABLE if answer.unresolvable[i] else UNSCHEDULABLE
        out[snapshot.table.names[row]] = code
    return out


# ---- Filter: filtering_test.go TestSingleConstraint -----------------------------------------------


SINGLE = [
    pytest.param(
        spread(make_pod("p").label("foo", ""), 1, "zone"),
        [],
        {"node-a": SUCCESS, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": SUCCESS},
        id="no existing pods",
    ),
    pytest.param(
        spread(make_pod("p").label("foo", ""), 1, "zone", selector=BAR_EXISTS),
        [],
        {"node-a": SUCCESS, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": SUCCESS},
        id="no existing pods, incoming pod doesn't match itself",
    ),
    pytest.param(
        spread(make_pod("p").label("foo", ""), 1, "zone"),
        [
            foo_pod("p-a1", "node-a", "ns1"),
            foo_pod("p-b1", "node-a", "ns2"),
            foo_pod("p-x1", "node-x"),
            foo_pod("p-y1", "node-y"),
        ],
        {"node-a": SUCCESS, "node-b": SUCCESS, "node-x": UNSCHEDULABLE, "node-y": UNSCHEDULABLE},
        id="existing pods in a different namespace do not count",
    ),
    pytest.param(
        spread(make_pod("p").label("foo", ""), 1, "zone"),
        SPREAD_2103,
        {"node-a": SUCCESS, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": SUCCESS},
        id="pods spread across zones as 3/3, all nodes fit",
    ),
    pytest.param(
        spread(make_pod("p").label("foo", ""), 1, "node"),
        SPREAD_2103,
        {"node-a": UNSCHEDULABLE, "node-b": UNSCHEDULABLE, "node-x": SUCCESS, "node-y": UNSCHEDULABLE},
        id="pods spread across nodes as 2/1/0/3, only node-x fits",
    ),
    pytest.param(
        spread(make_pod("p").label("foo", ""), 2, "node"),
        SPREAD_2103,
        {"node-a": UNSCHEDULABLE, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": UNSCHEDULABLE},
        id="pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
    ),
    pytest.param(
        spread(make_pod("p").label("bar", ""), 1, "node"),
        SPREAD_2103,
        {"node-a": UNSCHEDULABLE, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": UNSCHEDULABLE},
        id="pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
    ),
    pytest.param(
        spread(
            make_pod("p").label("foo", "").required_term(expr("node", "In", "node-a", "node-y")), 1, "node"
        ),
        SPREAD_2103,
        # only node-a and node-y take part (2/~1~/~0~/3); NodeAffinity, not run here, rejects b and x
        {"node-a": SUCCESS, "node-b": SUCCESS, "node-x": SUCCESS, "node-y": UNSCHEDULABLE},
        id="incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
    ),
]


@pytest.mark.parametrize(("pod", "existing", "want"), SINGLE)
def test_single_constraint(pod: Pod, existing: list[Pod], want: dict[str, str]) -> None:
    snapshot = make_snapshot(zone_nodes(), existing)
    assert codes(plugin(), pod, snapshot) == want


def test_a_node_lacking_the_topology_key_is_unresolvable_with_upstreams_reason() -> None:
    nodes = zone_nodes()
    nodes[1] = make_node("node-b").label("zon", "zone1").label("node", "node-b").obj()
    existing = [
        foo_pod("p-a1", "node-a"),
        foo_pod("p-b1", "node-b"),
        foo_pod("p-x1", "node-x"),
        foo_pod("p-y1", "node-y"),
    ]
    snapshot = make_snapshot(nodes, existing)
    pod = spread(make_pod("p").label("foo", ""), 1, "zone")
    # pods spread across zones as 1/2 due to absence of label 'zone' on node-b
    assert codes(plugin(), pod, snapshot) == {
        "node-a": SUCCESS,
        "node-b": UNRESOLVABLE,
        "node-x": UNSCHEDULABLE,
        "node-y": UNSCHEDULABLE,
    }
    state, info = CycleState(), PodInfo.of(pod)
    pl = plugin()
    pl.pre_filter(state, info, snapshot)
    answer = pl.filter(state, info, snapshot, snapshot.candidate_rows())
    reasons = {reason: int(np.count_nonzero(mask)) for reason, mask in answer.rejections}
    assert reasons == {ERR_REASON_NODE_LABEL_NOT_MATCH: 1, ERR_REASON_CONSTRAINTS_NOT_MATCH: 2}
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == (
        "node(s) didn't match pod topology spread constraints (missing required label)"
    )


def test_no_node_has_the_key_rack() -> None:
    nodes = [zone_nodes()[0], zone_nodes()[2]]
    pod = spread(make_pod("p").label("foo", ""), 1, "rack")
    assert codes(plugin(), pod, make_snapshot(nodes)) == {"node-a": UNRESOLVABLE, "node-x": UNRESOLVABLE}


def test_terminating_pods_are_excluded() -> None:
    nodes = [
        make_node("node-a").label("node", "node-a").obj(),
        make_node("node-b").label("node", "node-b").obj(),
    ]
    terminating = foo_pod("p-a", "node-a")
    terminating.metadata.deletion_timestamp = datetime(2026, 1, 1, tzinfo=UTC)
    snapshot = make_snapshot(nodes, [terminating, foo_pod("p-b", "node-b")])
    pod = spread(make_pod("p").label("foo", ""), 1, "node")
    assert codes(plugin(), pod, snapshot) == {"node-a": SUCCESS, "node-b": UNSCHEDULABLE}


# ---- Filter: TestMultipleConstraints, minDomains, inclusion policies, matchLabelKeys ---------------


def test_two_constraints_intersect() -> None:
    """spreads = [3/3, 2/1/0/3]: any zone fits the zone constraint, only node-x the node one."""
    existing = SPREAD_2103
    pod = spread(spread(make_pod("p").label("foo", ""), 1, "zone"), 1, "node")
    assert codes(plugin(), pod, make_snapshot(zone_nodes(), existing)) == {
        "node-a": UNSCHEDULABLE,
        "node-b": UNSCHEDULABLE,
        "node-x": SUCCESS,
        "node-y": UNSCHEDULABLE,
    }


def test_two_constraints_zone_fails_first() -> None:
    """spreads = [3/1, 1/1/0/1] (zone1 3 pods, zone2 1): only zone2 nodes pass the zone constraint."""
    existing = [foo_pod(name, f"node-{name[2]}") for name in ("p-a1", "p-a2", "p-b1", "p-y1")]
    pod = spread(spread(make_pod("p").label("foo", ""), 1, "zone"), 1, "node")
    assert codes(plugin(), pod, make_snapshot(zone_nodes(), existing)) == {
        "node-a": UNSCHEDULABLE,
        "node-b": UNSCHEDULABLE,
        "node-x": SUCCESS,
        "node-y": UNSCHEDULABLE,
    }


def test_min_domains_treats_the_global_minimum_as_zero_when_domains_are_fewer() -> None:
    existing = [foo_pod("p-a1", "node-a"), foo_pod("p-x1", "node-x")]
    snapshot = make_snapshot(zone_nodes(), existing)
    pod = make_pod("p").label("foo", "")
    # 2 zones, 1/1: with minDomains 2 the min is 1 and every zone fits (1 + 1 - 1 <= 1)
    assert set(codes(plugin(), spread(pod.obj(), 1, "zone", minDomains=2), snapshot).values()) == {SUCCESS}
    # minDomains 3 > 2 zones: the min is 0, and 1 + 1 - 0 > 1 everywhere
    assert set(codes(plugin(), spread(pod.obj(), 1, "zone", minDomains=3), snapshot).values()) == {
        UNSCHEDULABLE
    }


def test_node_affinity_policy_honor_and_ignore() -> None:
    existing = [foo_pod("p-a1", "node-a"), foo_pod("p-a2", "node-b")]
    snapshot = make_snapshot(zone_nodes(), existing)
    pod = make_pod("p").label("foo", "").node_selector(zone="zone1")
    # Honor (the default): only zone1 takes part, min = 2, 2 + 1 - 2 <= 1
    assert codes(plugin(), spread(pod.obj(), 1, "zone"), snapshot)["node-a"] == SUCCESS
    # Ignore: zone2 (0 pods) takes part, 2 + 1 - 0 > 1
    ignored = spread(pod.obj(), 1, "zone", nodeAffinityPolicy="Ignore")
    assert codes(plugin(), ignored, snapshot)["node-a"] == UNSCHEDULABLE


def test_node_taints_policy_honor_leaves_untolerated_nodes_out() -> None:
    nodes = zone_nodes()
    nodes[2] = make_node("node-x").label("zone", "zone2").label("node", "node-x").taint("k", "v").obj()
    nodes[3] = make_node("node-y").label("zone", "zone2").label("node", "node-y").taint("k", "v").obj()
    snapshot = make_snapshot(nodes, [foo_pod("p-a1", "node-a")])
    pod = make_pod("p").label("foo", "")
    # Ignore (the default): zone2 counts with 0 pods, so zone1 (1 + 1 - 0) is rejected
    assert codes(plugin(), spread(pod.obj(), 1, "zone"), snapshot)["node-a"] == UNSCHEDULABLE
    # Honor: zone2's nodes have an untolerated taint, zone1 is the only domain, min = 1
    assert (
        codes(plugin(), spread(pod.obj(), 1, "zone", nodeTaintsPolicy="Honor"), snapshot)["node-a"] == SUCCESS
    )
    # Honor, tolerated: zone2 counts again
    tolerating = make_pod("p").label("foo", "").toleration("k", "v", "NoSchedule")
    assert (
        codes(plugin(), spread(tolerating.obj(), 1, "zone", nodeTaintsPolicy="Honor"), snapshot)["node-a"]
        == UNSCHEDULABLE
    )


def test_match_label_keys_narrow_the_selector_to_the_pods_revision() -> None:
    old = [make_pod(f"old-{i}").label("foo", "").label("rev", "1").on("node-a").obj() for i in range(3)]
    snapshot = make_snapshot(zone_nodes(), old)
    pod = make_pod("p").label("foo", "").label("rev", "2")
    # without matchLabelKeys, the old revision's 3 pods in zone1 push the pod to zone2
    assert codes(plugin(), spread(pod.obj(), 1, "zone"), snapshot)["node-a"] == UNSCHEDULABLE
    # with it, only rev=2 pods count: none anywhere
    assert (
        codes(plugin(), spread(pod.obj(), 1, "zone", matchLabelKeys=["rev"]), snapshot)["node-a"] == SUCCESS
    )


def test_a_pod_without_constraints_skips_filter() -> None:
    snapshot = make_snapshot(zone_nodes())
    result = plugin().pre_filter(CycleState(), make_pod("p").info(), snapshot)
    assert result.status.code == Code.SKIP


def test_a_malformed_selector_is_an_error() -> None:
    pod = spread(make_pod("p"), 1, "zone", selector={"matchExpressions": [{"key": "foo", "operator": "In"}]})
    result = plugin().pre_filter(CycleState(), PodInfo.of(pod), make_snapshot(zone_nodes()))
    assert result.status.code == Code.ERROR
    assert "values set can't be empty" in result.status.message()


# ---- Score: scoring_test.go TestPodTopologySpreadScore --------------------------------------------


def score(pl: PodTopologySpread, pod: Pod, snapshot: Snapshot, candidates: list[str]) -> dict[str, int]:
    """Normalized scores of the candidate nodes (the others failed Filter)."""
    state, info = CycleState(), PodInfo.of(pod)
    rows = np.array([snapshot.table.row[n] for n in candidates], dtype=np.int64)
    status = pl.pre_score(state, info, snapshot, rows)
    if status.code == Code.SKIP:
        return {}
    raw = pl.score(state, info, snapshot, rows)
    normalized = pl.normalize_scores(state, info, raw)
    return dict(zip(candidates, normalized.tolist(), strict=True))


def hostname_nodes(*names: str) -> list[Any]:
    return [make_node(n).label(HOSTNAME, n).obj() for n in names]


def foo_pods(spec: str) -> list[Pod]:
    """``"a2 b1 d3"``: 2 foo pods on node-a, 1 on node-b, 3 on node-d."""
    pods: list[Pod] = []
    for item in spec.split():
        node, count = item[0], int(item[1:])
        pods.extend(foo_pod(f"p-{node}{i}", f"node-{node}") for i in range(count))
    return pods


@pytest.mark.parametrize(
    ("max_skew", "existing", "want"),
    [
        pytest.param(1, "a2 b1 d3", {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}, id="2/1/0/3"),
        pytest.param(
            2, "a2 b1 d3", {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}, id="maxSkew=2"
        ),
        pytest.param(
            3, "a4 b3 c2 d1", {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}, id="maxSkew=3"
        ),
    ],
)
def test_one_constraint_on_node_all_4_nodes_are_candidates(
    max_skew: int, existing: str, want: dict[str, int]
) -> None:
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b", "node-c", "node-d"), foo_pods(existing))
    pod = spread(make_pod("p").label("foo", ""), max_skew, HOSTNAME, "ScheduleAnyway")
    assert score(plugin(), pod, snapshot, ["node-a", "node-b", "node-c", "node-d"]) == want


def test_score_no_existing_pods_and_a_single_candidate() -> None:
    pod = spread(make_pod("p").label("foo", ""), 1, HOSTNAME, "ScheduleAnyway")
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b"))
    assert score(plugin(), pod, snapshot, ["node-a", "node-b"]) == {"node-a": 100, "node-b": 100}
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b"), foo_pods("a2 b1"))
    assert score(plugin(), pod, snapshot, ["node-a"]) == {"node-a": 100}


def test_score_null_selector_matches_nothing() -> None:
    pod = spread(make_pod("p").label("foo", ""), 1, HOSTNAME, "ScheduleAnyway", selector=None)
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b", "node-c", "node-d"), foo_pods("a2 b1 d3"))
    assert set(score(plugin(), pod, snapshot, ["node-a", "node-b", "node-c", "node-d"]).values()) == {100}


def test_score_3_out_of_4_nodes_are_candidates() -> None:
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b", "node-x", "node-y"), foo_pods("a4 b2 x1 y3"))
    pod = spread(make_pod("p").label("foo", ""), 1, HOSTNAME, "ScheduleAnyway")
    assert score(plugin(), pod, snapshot, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33,
        "node-b": 83,
        "node-x": 100,
    }


def test_score_a_candidate_lacking_the_key_scores_0() -> None:
    nodes = [*hostname_nodes("node-a", "node-x", "node-y"), make_node("node-b").label("n", "node-b").obj()]
    snapshot = make_snapshot(nodes, foo_pods("a4 b2 x1 y3"))
    pod = spread(make_pod("p").label("foo", ""), 1, HOSTNAME, "ScheduleAnyway")
    assert score(plugin(), pod, snapshot, ["node-a", "node-b", "node-x"]) == {
        "node-a": 16,
        "node-b": 0,
        "node-x": 100,
    }


def test_score_one_constraint_on_zone_3_out_of_4_nodes_are_candidates() -> None:
    nodes = [
        make_node("node-a").label("zone", "zone1").label(HOSTNAME, "node-a").obj(),
        make_node("node-b").label("zone", "zone1").label(HOSTNAME, "node-b").obj(),
        make_node("node-x").label("zone", "zone2").label(HOSTNAME, "node-x").obj(),
        make_node("node-y").label("zone", "zone2").label(HOSTNAME, "node-y").obj(),
    ]
    snapshot = make_snapshot(nodes, foo_pods("a4 b2 x1 y3"))
    pod = spread(make_pod("p").label("foo", ""), 1, "zone", "ScheduleAnyway")
    assert score(plugin(), pod, snapshot, ["node-a", "node-b", "node-x"]) == {
        "node-a": 75,
        "node-b": 75,
        "node-x": 100,
    }


# ---- default constraints ------------------------------------------------------------------------------


def feed(pl: PodTopologySpread, resource: Any, obj: Any) -> None:
    handle: Handle = pl.handle_for_tests  # type: ignore[attr-defined]
    for listener in handle.informers.listeners(resource):
        listener(WatchEvent(EventType.ADDED, obj))


def test_system_defaulting_spreads_by_hostname_the_pods_of_a_service() -> None:
    """'system defaulting, nodes don't have zone, pods match service': same scores as one
    hostname constraint with maxSkew 3."""
    snapshot = make_snapshot(hostname_nodes("node-a", "node-b", "node-c", "node-d"), foo_pods("a4 b3 c2 d1"))
    pl = plugin()
    pod = make_pod("p").label("foo", "").obj()
    candidates = ["node-a", "node-b", "node-c", "node-d"]
    assert score(pl, pod, snapshot, candidates) == {}  # no Service selects it yet: no default
    feed(
        pl,
        SERVICES,
        Service.model_validate(
            {"metadata": {"name": "s", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}
        ),
    )
    assert score(pl, pod, snapshot, candidates) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_list_defaulting_with_a_replicaset_owner() -> None:
    args = PodTopologySpreadArgs.model_validate(listed(ZONE_HARD))
    pl = plugin(args)
    owner = OwnerReference(api_version="apps/v1", kind="ReplicaSet", name="rs", uid="u", controller=True)
    pod = make_pod("p").label("foo", "").obj()
    pod.metadata.owner_references = [owner]
    snapshot = make_snapshot(zone_nodes(), [foo_pod("p-a1", "node-a")])
    assert set(codes(pl, pod, snapshot).values()) == {SUCCESS}  # the ReplicaSet is not known yet
    feed(
        pl,
        REPLICASETS,
        ReplicaSet.model_validate(
            {
                "metadata": {"name": "rs", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"foo": ""}}},
            }
        ),
    )
    assert codes(pl, pod, snapshot) == {
        "node-a": UNSCHEDULABLE,
        "node-b": UNSCHEDULABLE,
        "node-x": SUCCESS,
        "node-y": SUCCESS,
    }


def test_list_defaulting_with_no_constraints_subscribes_to_nothing() -> None:
    pl = plugin(PodTopologySpreadArgs(defaulting_type="List"))
    handle: Handle = pl.handle_for_tests  # type: ignore[attr-defined]
    assert handle.informers.resources() == []
    assert len(plugin().handle_for_tests.informers.resources()) == 4  # type: ignore[attr-defined]


ZONE_HARD: dict[str, Any] = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}


def listed(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"defaultingType": "List", "defaultConstraints": list(constraints)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"defaultConstraints": [ZONE_HARD]},
            'when .defaultingType is "System", must be empty',
            id="system-with-constraints",
        ),
        pytest.param(
            listed({**ZONE_HARD, "maxSkew": 0}),
            "defaultConstraints[0].maxSkew: Invalid value: 0",
            id="max-skew",
        ),
        pytest.param(
            listed({**ZONE_HARD, "labelSelector": {}}),
            "must not define a selector",
            id="selector",
        ),
        pytest.param(
            listed({**ZONE_HARD, "whenUnsatisfiable": "Sometimes"}),
            "whenUnsatisfiable: Unsupported value",
            id="when",
        ),
        pytest.param(
            listed(ZONE_HARD, ZONE_HARD),
            "defaultConstraints[1]: Duplicate value",
            id="duplicate",
        ),
        pytest.param({"defaultingType": "Sometimes"}, "defaultingType", id="type"),
        pytest.param({"defaultConstraint": []}, "defaultConstraint", id="typo"),
    ],
)
def test_args_are_validated_as_kube_scheduler_does(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace(".", r"\.")):
        PodTopologySpreadArgs.model_validate(args)


def test_the_default_selector_follows_upstreams_default_selector() -> None:
    workloads = Workloads()
    services = workloads.listener(SERVICES)
    services(
        WatchEvent(
            EventType.REPLACED,
            objects=[
                Service.model_validate(
                    {
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {"selector": {"app": "web"}},
                    }
                ),
                Service.model_validate(
                    {
                        "metadata": {"name": "tier", "namespace": "default"},
                        "spec": {"selector": {"tier": "fe"}},
                    }
                ),
                Service.model_validate(
                    {
                        "metadata": {"name": "other", "namespace": "other"},
                        "spec": {"selector": {"app": "web"}},
                    }
                ),
                Service.model_validate(
                    {"metadata": {"name": "headless", "namespace": "default"}, "spec": {}}
                ),
                Service.model_validate(
                    {"metadata": {"name": "db", "namespace": "default"}, "spec": {"selector": {"app": "db"}}}
                ),
            ],
        )
    )
    pod = make_pod("p").label("app", "web").label("tier", "fe").label("rev", "1")
    web_fe = {Requirement("app", "In", frozenset({"web"})), Requirement("tier", "In", frozenset({"fe"}))}
    assert workloads.default_selector(pod.info()).requirements == web_fe
    services(
        WatchEvent(
            EventType.DELETED, Service.model_validate({"metadata": {"name": "tier", "namespace": "default"}})
        )
    )
    assert workloads.default_selector(pod.info()).requirements == {
        Requirement("app", "In", frozenset({"web"}))
    }

    # a ReplicationController's map is merged into the services' set
    workloads.listener(REPLICATIONCONTROLLERS)(
        WatchEvent(
            EventType.ADDED,
            ReplicationController.model_validate(
                {"metadata": {"name": "rc", "namespace": "default"}, "spec": {"selector": {"rev": "1"}}}
            ),
        )
    )
    owned = pod.obj()
    owned.metadata.owner_references = [
        OwnerReference(api_version="v1", kind="ReplicationController", name="rc", uid="u", controller=True)
    ]
    assert workloads.default_selector(PodInfo.of(owned)).requirements == {
        Requirement("app", "In", frozenset({"web"})),
        Requirement("rev", "In", frozenset({"1"})),
    }
    # a StatefulSet's selector requirements are ANDed; an owner that is not the controller is not used
    workloads.listener(STATEFULSETS)(
        WatchEvent(
            EventType.ADDED,
            StatefulSet.model_validate(
                {
                    "metadata": {"name": "ss", "namespace": "default"},
                    "spec": {"selector": {"matchExpressions": [{"key": "rev", "operator": "Exists"}]}},
                }
            ),
        )
    )
    owned.metadata.owner_references = [
        OwnerReference(api_version="apps/v1", kind="StatefulSet", name="ss", uid="u", controller=True)
    ]
    assert workloads.default_selector(PodInfo.of(owned)).requirements == {
        Requirement("app", "In", frozenset({"web"})),
        Requirement("rev", "Exists"),
    }
    owned.metadata.owner_references = [
        OwnerReference(api_version="apps/v1", kind="StatefulSet", name="ss", uid="u")
    ]
    assert workloads.default_selector(PodInfo.of(owned)).requirements == {
        Requirement("app", "In", frozenset({"web"}))
    }


# ---- what a gang placement must keep ---------------------------------------------------------------


def test_gang_spread_describes_each_shared_constraint_once() -> None:
    snapshot = make_snapshot(
        zone_nodes(), [foo_pod("p-a1", "node-a"), foo_pod("p-x1", "node-x"), foo_pod("p-x2", "node-y")]
    )
    members = [
        PodInfo.of(spread(make_pod(f"w{i}").uid(f"w{i}").label("foo", "").label("index", str(i)), 1, "zone"))
        for i in range(3)
    ]
    helper = PodInfo.of(make_pod("helper").uid("helper").label("foo", "").obj())  # counted, not constrained
    (constraint,) = plugin().gang_spread([*members, helper], snapshot)
    assert constraint.max_skew == 1
    assert constraint.domains == {"node-a": "zone1", "node-b": "zone1", "node-x": "zone2", "node-y": "zone2"}
    assert constraint.existing == {"zone1": 1, "zone2": 2}
    assert constraint.constrained == {"w0", "w1", "w2"}  # per-pod labels do not split them
    assert constraint.matching == {"w0", "w1", "w2", "helper"}
