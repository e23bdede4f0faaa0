"""The parity checker (e2e/parity/checker.py) against placements whose verdict Kubernetes'
documented semantics fix: each rule flags the violating placement and accepts the valid one."""

from __future__ import annotations

from typing import Any

from apis.core import Node, Pod
from e2e.parity.checker import Violation, check, soft_scores
from e2e.parity.volumes import PersistentVolume, PersistentVolumeClaim

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(
    name: str, zone: str | None = None, cpu: str = "4", taints: list[dict[str, str]] | None = None
) -> Node:
    labels = {HOST: name, **({ZONE: zone} if zone else {})}
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }
    )


def pod(name: str, on: str, labels: dict[str, str] | None = None, cpu: str = "100m", **spec: Any) -> Pod:
    container = {"name": "main", "resources": {"requests": {"cpu": cpu}}, "ports": spec.pop("ports", [])}
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", "labels": labels or {}},
            "spec": {"nodeName": on, "containers": [container], **spec},
        }
    )


def term(app: str, topology_key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}


def anti(app: str, topology_key: str = HOST) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app, topology_key)]}}


def affinity(app: str, topology_key: str = ZONE) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app, topology_key)]}}


def spread(app: str, max_skew: int = 1, min_domains: int | None = None) -> list[dict[str, Any]]:
    constraint: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
    }
    if min_domains is not None:
        constraint["minDomains"] = min_domains
    return [constraint]


NODES = [node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c"), node("bare")]


def kinds(violations: list[Violation]) -> list[tuple[str, str]]:
    return sorted({(v.constraint, v.pod) for v in violations})


def test_required_anti_affinity_forbids_sharing_the_domain() -> None:
    web = {"app": "web"}
    together = [pod("w0", "a1", web, affinity=anti("web")), pod("w1", "a1", web, affinity=anti("web"))]
    apart = [pod("w0", "a1", web, affinity=anti("web")), pod("w1", "a2", web, affinity=anti("web"))]

    assert kinds(check(together, NODES)) == [("anti-affinity", "ns/w0"), ("anti-affinity", "ns/w1")]
    assert check(apart, NODES) == []


def test_an_existing_pods_anti_affinity_keeps_others_out_of_its_zone() -> None:
    guard = pod("guard", "b1", {"app": "guard"}, affinity=anti("intruder", ZONE))

    assert kinds(check([guard, pod("x", "b1", {"app": "intruder"})], NODES)) == [
        ("anti-affinity", "ns/guard")
    ]
    assert check([guard, pod("x", "a1", {"app": "intruder"})], NODES) == []
    # a node without the zone label is in no zone: the term cannot apply there
    assert check([guard, pod("x", "bare", {"app": "intruder"})], NODES) == []


def test_required_affinity_needs_a_selected_pod_in_the_same_domain() -> None:
    db = pod("db", "b1", {"app": "db"})
    steps = {"ns/db": 0, "ns/client": 1}

    wrong = check([db, pod("client", "a1", affinity=affinity("db"))], NODES, step_of=steps)
    assert kinds(wrong) == [("affinity", "ns/client")]
    assert check([db, pod("client", "b1", affinity=affinity("db"))], NODES, step_of=steps) == []
    lacking = check([db, pod("client", "bare", affinity=affinity("db"))], NODES, step_of=steps)
    assert "lacks topology label" in lacking[0].detail


def test_only_the_first_pod_of_a_self_affine_series_may_start_a_domain() -> None:
    cache = {"app": "cache"}

    def member(name: str, on: str) -> Pod:
        return pod(name, on, cache, affinity=affinity("cache"))

    assert check([member("c0", "a1")], NODES) == []
    assert check([member("c0", "a1"), member("c1", "a2"), member("c2", "a1")], NODES) == []
    split = check([member("c0", "a1"), member("c1", "a2"), member("c2", "b1"), member("c3", "b1")], NODES)
    assert kinds(split) == [("affinity", f"ns/c{i}") for i in range(4)]
    assert "2 separate" in split[0].detail


def test_no_series_starts_where_an_earlier_step_left_a_selected_pod() -> None:
    anchor = pod("anchor", "b1", {"app": "cache"})
    steps = {"ns/anchor": 0, "ns/c0": 1}

    alone = pod("c0", "a1", {"app": "cache"}, affinity=affinity("cache"))
    assert kinds(check([anchor, alone], NODES, step_of=steps)) == [("affinity", "ns/c0")]
    joined = pod("c0", "b1", {"app": "cache"}, affinity=affinity("cache"))
    assert check([anchor, joined], NODES, step_of=steps) == []


def test_do_not_schedule_spread_keeps_each_domain_within_max_skew_of_the_minimum() -> None:
    def zs(name: str, on: str, **kw: Any) -> Pod:
        return pod(name, on, {"app": "zs"}, topologySpreadConstraints=spread("zs", **kw))

    ok = [zs("p0", "a1"), zs("p1", "a2"), zs("p2", "b1"), zs("p3", "c1")]
    assert check(ok, NODES) == []
    skewed = [*ok, zs("p4", "a1")]
    assert kinds(check(skewed, NODES)) == [("spread", f"ns/p{i}") for i in (0, 1, 4)]
    # the node without a zone is not a domain, and a pod there breaks the constraint outright
    assert kinds(check([zs("p0", "bare")], NODES)) == [("spread", "ns/p0")]


def test_min_domains_counts_the_global_minimum_as_zero_while_domains_are_fewer() -> None:
    def md(name: str, on: str) -> Pod:
        return pod(name, on, {"app": "md"}, topologySpreadConstraints=spread("md", min_domains=4))

    assert check([md("m0", "a1"), md("m1", "b1"), md("m2", "c1")], NODES) == []
    assert kinds(check([md("m0", "a1"), md("m1", "a2")], NODES)) == [("spread", "ns/m0"), ("spread", "ns/m1")]


def test_a_domain_holding_pods_without_the_constraint_is_not_judged() -> None:
    constrained = [
        pod(f"p{i}", "a1", {"app": "zs"}, topologySpreadConstraints=spread("zs")) for i in range(2)
    ]
    assert check([*constrained, pod("plain", "a2", {"app": "zs"})], NODES) == []


def test_host_ports_conflict_on_protocol_port_and_overlapping_ips() -> None:
    def hp(name: str, port: int, protocol: str = "TCP", ip: str | None = None) -> Pod:
        claim: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if ip:
            claim["hostIP"] = ip
        return pod(name, "b1", ports=[claim])

    assert check([hp("t", 80), hp("u", 80, "UDP")], NODES) == []
    assert check([hp("i1", 90, ip="10.0.0.1"), hp("i2", 90, ip="10.0.0.2")], NODES) == []
    assert kinds(check([hp("t0", 80), hp("t1", 80)], NODES)) == [("host-port", "ns/t1")]
    assert kinds(check([hp("i1", 90, ip="10.0.0.1"), hp("w", 90)], NODES)) == [("host-port", "ns/w")]


def test_node_selection_taints_and_resources() -> None:
    tainted = node("t", "c", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}])
    soft = node("s", "c", taints=[{"key": "edge", "value": "true", "effect": "PreferNoSchedule"}])
    nodes = [*NODES, tainted, soft]
    tolerates = [{"key": "dedicated", "operator": "Exists"}]
    name_not_a1 = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a1"]}]}
                ]
            }
        }
    }

    assert kinds(check([pod("p", "t")], nodes)) == [("taint", "ns/p")]
    assert check([pod("p", "t", tolerations=tolerates), pod("q", "s")], nodes) == []
    assert kinds(check([pod("p", "a1", nodeSelector={ZONE: "b"})], nodes)) == [("node-selection", "ns/p")]
    assert kinds(check([pod("p", "a1", affinity=name_not_a1)], nodes)) == [("node-selection", "ns/p")]
    assert check([pod("p", "a2", affinity=name_not_a1)], nodes) == []
    assert kinds(check([pod("p", "c1", cpu="3"), pod("q", "c1", cpu="2")], nodes)) == [("resources", "ns/q")]


def test_soft_scores_measure_preferred_terms_and_schedule_anyway_skew() -> None:
    preferred = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term("pref", HOST)}
            ]
        }
    }
    anyway = [{**spread("sa")[0], "whenUnsatisfiable": "ScheduleAnyway"}]
    pods = [
        pod("p0", "a1", {"app": "pref"}, affinity=preferred),
        pod("p1", "a1", {"app": "pref"}, affinity=preferred),
        pod("p2", "b1", {"app": "pref"}, affinity=preferred),
        pod("s0", "a1", {"app": "sa"}, topologySpreadConstraints=anyway),
        pod("s1", "a2", {"app": "sa"}, topologySpreadConstraints=anyway),
    ]

    scores = soft_scores(pods, NODES)

    assert scores == {"preferred weight satisfied": round(1 / 3, 3), "ScheduleAnyway max skew": 2.0}
    assert check(pods, NODES) == []


def test_a_pods_claims_must_be_bound_to_a_volume_that_admits_its_node() -> None:
    def claim(volume: str | None) -> PersistentVolumeClaim:
        return PersistentVolumeClaim.model_validate(
            {"metadata": {"name": "data", "namespace": "ns"}, "spec": {"volumeName": volume}}
        )

    on_a1 = {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["a1"]}]}
    local = PersistentVolume.model_validate(
        {
            "metadata": {"name": "pv-a1"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [on_a1]}}},
        }
    )

    def user(on: str) -> Pod:
        return pod("db", on, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])

    assert check([user("a1")], NODES, claims=[claim("pv-a1")], volumes=[local]) == []
    assert kinds(check([user("a2")], NODES, claims=[claim("pv-a1")], volumes=[local])) == [
        ("volume", "ns/db")
    ]
    (unbound,) = check([user("a1")], NODES, claims=[claim(None)], volumes=[local])
    assert "not bound" in unbound.detail
    (missing,) = check([user("a1")], NODES)
    assert "does not exist" in missing.detail
