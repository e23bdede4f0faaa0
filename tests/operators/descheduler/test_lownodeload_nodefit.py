"""NodeFit: selector and required affinity, NoSchedule/NoExecute taints, requests, schedulable."""

from __future__ import annotations

from collections.abc import Mapping

from apis.core import Pod
from operators.descheduler.lownodeload.nodefit import node_fits, requested_on
from tests.operators.descheduler.fakes import make_node, make_pod


def _with_affinity(pod: Pod, *expressions: Mapping[str, object], fields: bool = False) -> Pod:
    key = "matchFields" if fields else "matchExpressions"
    return pod.model_copy(
        update={
            "spec": pod.spec.model_copy(
                update={
                    "affinity": Pod.model_validate(
                        {
                            "spec": {
                                "affinity": {
                                    "nodeAffinity": {
                                        "requiredDuringSchedulingIgnoredDuringExecution": {
                                            "nodeSelectorTerms": [{key: list(expressions)}]
                                        }
                                    }
                                }
                            }
                        }
                    ).spec.affinity
                }
            )
        }
    )


def test_node_selector() -> None:
    pod = make_pod("p", "x", node_selector={"zone": "a"})
    assert node_fits(pod, make_node("n", labels={"zone": "a"}), {})
    assert not node_fits(pod, make_node("n", labels={"zone": "b"}), {})


def test_required_affinity_operators_and_fields() -> None:
    node = make_node("n1", labels={"zone": "a", "gen": "5"})
    pod = make_pod("p", "x")
    assert node_fits(_with_affinity(pod, {"key": "zone", "operator": "In", "values": ["a", "b"]}), node, {})
    assert not node_fits(_with_affinity(pod, {"key": "zone", "operator": "NotIn", "values": ["a"]}), node, {})
    assert node_fits(_with_affinity(pod, {"key": "gen", "operator": "Gt", "values": ["4"]}), node, {})
    assert not node_fits(_with_affinity(pod, {"key": "gen", "operator": "Lt", "values": ["4"]}), node, {})
    assert not node_fits(_with_affinity(pod, {"key": "ssd", "operator": "Exists"}), node, {})
    name_in = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    assert node_fits(_with_affinity(pod, name_in, fields=True), node, {})
    name_not_in = {"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}
    assert not node_fits(_with_affinity(pod, name_not_in, fields=True), node, {})


def test_taints_noschedule_and_noexecute_count_prefer_does_not() -> None:
    pod = make_pod("p", "x")
    assert not node_fits(pod, make_node("n", taints=[{"key": "k", "effect": "NoSchedule"}]), {})
    assert not node_fits(pod, make_node("n", taints=[{"key": "k", "effect": "NoExecute"}]), {})
    assert node_fits(pod, make_node("n", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), {})
    tolerating = make_pod("p", "x", tolerations=[{"key": "k", "operator": "Exists"}])
    assert node_fits(tolerating, make_node("n", taints=[{"key": "k", "effect": "NoSchedule"}]), {})


def test_requests_against_what_the_node_pods_leave_free() -> None:
    node = make_node("n", cpu="4", memory="8Gi", pods=3)
    running = [make_pod("a", "n", cpu="2"), make_pod("b", "n", cpu="1")]
    assert node_fits(make_pod("p", "x", cpu="1"), node, requested_on(running))
    assert not node_fits(make_pod("p", "x", cpu="1500m"), node, requested_on(running))
    # the pods allocatable: the node takes 3 pods
    assert not node_fits(
        make_pod("p", "x", cpu="10m"), node, requested_on([*running, make_pod("c", "n", cpu="0")])
    )


def test_unschedulable_node_fits_nothing() -> None:
    assert not node_fits(make_pod("p", "x"), make_node("n", unschedulable=True), {})
