"""Koordinator's shipped KubeSchedulerConfiguration (tests/data/koordinator_scheduler_config.yaml, its
config/manager/scheduler-config.yaml verbatim) run by a koord-scheduler of its own on the real API
server. Only its ``schedulerName`` is changed (``koord-scheduler-shipped``, beside the session's
koord-scheduler) and leader election is off.

What a user of that configuration sees on the tainted ``preempt`` pool (preempt-0..7, 4 CPU each):

- SchedulingHint: a pod hinted with ``nodeNames`` lands on one of them; one hinted with
  ``preferredNodeNames`` lands on the first of them that fits;
- DefaultPreemption: a high-priority plain pod evicts lower-priority pods on one node and binds there;
- ElasticQuota's PostFilter: a pod over its quota evicts a lower-priority pod of its own quota, not
  the lower-priority pod of another quota beside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, bound, failed_scheduling, make_pod, pods, present, wait_for

SHIPPED = repo_root() / "tests" / "data" / "koordinator_scheduler_config.yaml"
NAME = "koord-scheduler-shipped"
PRIORITY_CLASSES = repo_root() / "docs" / "examples" / "v1.7" / "04-priority-classes.yaml"
TOLERATE_POOL = [{"key": "koord-e2e/pool", "operator": "Equal", "value": "preempt", "effect": "NoSchedule"}]
HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
QUOTA = "quota.scheduling.koordinator.sh/name"
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def shipped(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    text = SHIPPED.read_text()
    assert text.count("schedulerName: koord-scheduler\n") == 1
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        NAME,
        config_text=text.replace("schedulerName: koord-scheduler\n", f"schedulerName: {NAME}\n"),
        leader_elect=False,
    )
    try:
        wait_until_ready(running.component, running.port)
        control_plane.apply_file(PRIORITY_CLASSES)
        yield running
    finally:
        running.component.stop()


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = f"shipped-{request.node.name.split('[')[0].replace('_', '-')[5:36]}".rstrip("-")
    control_plane.create_namespace(ns)
    yield ns
    control_plane.delete_namespace(ns)


def pool_pod(
    name: str,
    ns: str,
    *,
    cpu: str,
    nodes: list[str],
    priority_class: str = "low-priority",
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    pod = make_pod(
        name,
        ns,
        cpu=cpu,
        memory="256Mi",
        scheduler=NAME,
        tolerations=TOLERATE_POOL,
        priority_class=priority_class,
        labels=labels,
        annotations=annotations,
    )
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": nodes}]}
                ]
            }
        }
    }
    if node_name:
        pod["spec"]["nodeName"] = node_name  # placed by hand: the scenario's starting state
    return pod


def running(cp: ControlPlane, ns: str, names: set[str]) -> bool:
    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in pods(cp, ns)}
    return all(phases.get(n) == "Running" for n in names)


def test_a_hinted_pod_is_confined_to_its_node_names_and_tries_its_preferred_nodes_first(
    control_plane: ControlPlane, shipped: Scheduler, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    pool = [f"preempt-{i}" for i in range(4)]
    # preempt-0 is the emptiest, so scoring alone would choose it; preempt-1 and preempt-3 are full.
    fillers = [
        pool_pod("fill-1", ns, cpu="4", nodes=pool, node_name="preempt-1"),
        pool_pod("fill-2", ns, cpu="2", nodes=pool, node_name="preempt-2"),
        pool_pod("fill-3", ns, cpu="4", nodes=pool, node_name="preempt-3"),
    ]
    apply(cp, fillers)
    wait_for(lambda: running(cp, ns, {"fill-1", "fill-2", "fill-3"}), 60, "the fillers running")
    confined = pool_pod(
        "confined", ns, cpu="1", nodes=pool, annotations={HINT: json.dumps({"nodeNames": ["preempt-2"]})}
    )
    preferring = pool_pod(
        "preferring",
        ns,
        cpu="1",
        nodes=pool,
        annotations={HINT: json.dumps({"preferredNodeNames": ["preempt-3", "preempt-2", "preempt-0"]})},
    )
    apply(cp, [confined, preferring])

    def both() -> dict[str, str] | None:
        placed = bound(cp, ns)
        return placed if {"confined", "preferring"} <= set(placed) else None

    placed = wait_for(both, 90, "both hinted pods bound")
    assert placed["confined"] == "preempt-2"
    assert placed["preferring"] == "preempt-2"  # preempt-3 is full; preempt-0 would score higher


def test_a_malformed_hint_is_reported_on_the_pod(
    control_plane: ControlPlane, shipped: Scheduler, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    apply(cp, [pool_pod("broken", ns, cpu="1", nodes=["preempt-0"], annotations={HINT: '{"nodeNames": "x"'})])
    message = wait_for(
        lambda: next((m for m in failed_scheduling(cp, ns, "broken") if "scheduling hint" in m), None),
        60,
        "a FailedScheduling event about the hint",
    )
    assert HINT in message
    assert "broken" not in bound(cp, ns)


def test_a_high_priority_pod_preempts_a_lower_priority_plain_pod(
    control_plane: ControlPlane, shipped: Scheduler, namespace: str
) -> None:
    """DefaultPreemption: preempt-4 holds two 2-CPU low-priority pods; a 3-CPU high-priority pod
    evicts both (one is not enough), binds there, and the events name it."""
    cp, ns = control_plane, namespace
    node = "preempt-4"
    apply(cp, [pool_pod(f"low-{i}", ns, cpu="2", nodes=[node], node_name=node) for i in range(2)])
    wait_for(lambda: running(cp, ns, {"low-0", "low-1"}), 60, "the low-priority pods running")
    apply(cp, [pool_pod("urgent", ns, cpu="3", nodes=[node], priority_class="high-priority")])
    assert wait_for(lambda: bound(cp, ns).get("urgent"), 120, "the preemptor bound") == node
    assert not {"low-0", "low-1"} & present(cp, ns)
    events = cp.get_json(f"/api/v1/namespaces/{ns}/events")["items"]
    preempted = [e for e in events if e.get("reason") == "Preempted"]
    assert {e["involvedObject"]["name"] for e in preempted} == {"low-0", "low-1"}
    assert all(f"{ns}/urgent" in str(e.get("message") or e.get("note")) for e in preempted)


def quota(name: str, ns: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"min": {"cpu": cpu, "memory": "4Gi"}, "max": {"cpu": cpu, "memory": "4Gi"}},
    }


def test_a_quota_bound_pod_preempts_a_lower_priority_pod_of_its_own_quota(
    control_plane: ControlPlane, shipped: Scheduler, namespace: str
) -> None:
    """ElasticQuota's PostFilter: team-a's max (2 CPU) is used by a 2-CPU low-priority pod on
    preempt-5, which has room for more; team-b's lower-priority pod sits beside it. A high-priority
    team-a pod is over its quota: only team-a's pod goes, and it binds."""
    cp, ns = control_plane, namespace
    node = "preempt-5"
    team_a, team_b = f"{ns}-a", f"{ns}-b"
    apply(cp, [quota(team_a, ns, "2"), quota(team_b, ns, "1")])
    apply(
        cp,
        [
            pool_pod("a-low", ns, cpu="2", nodes=[node], node_name=node, labels={QUOTA: team_a}),
            pool_pod("b-low", ns, cpu="1", nodes=[node], node_name=node, labels={QUOTA: team_b}),
        ],
    )
    wait_for(lambda: running(cp, ns, {"a-low", "b-low"}), 60, "the quotas' pods running")
    apply(
        cp,
        [
            pool_pod(
                "a-high", ns, cpu="1", nodes=[node], priority_class="high-priority", labels={QUOTA: team_a}
            )
        ],
    )
    assert wait_for(lambda: bound(cp, ns).get("a-high"), 120, "the quota's preemptor bound") == node
    assert "a-low" not in present(cp, ns)
    assert "b-low" in present(cp, ns)
    assert any("Insufficient quotas" in m for m in failed_scheduling(cp, ns, "a-high"))
