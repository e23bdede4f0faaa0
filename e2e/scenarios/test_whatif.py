"""What-if on the real API server (``POST /debug/whatif``), where the answer is known by
construction on the ``topo`` pool (2 spines x 4 blocks x 8 nodes of 8 GPUs), then compared with
what koord-scheduler does when the job (or the change the what-if offered) is submitted.

Nodes are taken with whole-node filler pods bound directly (``spec.nodeName``): ``high-priority``
fillers no job here may preempt, ``low-priority`` ones it may. The what-if is asked until its
answer shows the fillers (the scheduler's watch may lag the writes by a moment)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import wait_until_ready
from e2e.scheduler_process import CONFIG, Scheduler, start_scheduler
from e2e.workloads import apply, bound, failed_scheduling, get_object, list_items, make_pod, pods, wait_for

PRIORITY_CLASSES = repo_root() / "docs" / "examples" / "v1.7" / "04-priority-classes.yaml"
TOPOLOGY = repo_root() / "docs" / "examples" / "v1.7" / "02-cluster-network-topology.yaml"
SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
WHOLE_NODE = {"nvidia.com/gpu": "8"}
QUOTA = "quota.scheduling.koordinator.sh/name"


@pytest.fixture(scope="module")
def advising_process(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    """A second koord-scheduler, ``koord-scheduler-advice``, with ``--whatif-advice-seconds 1``
    (the session's scheduler seeks no advice) and no leader election. Started with the module's
    first test, so that its start-up overlaps the other tests' waits; it schedules only the pods
    that name it."""
    name = "koord-scheduler-advice"
    config = CONFIG.replace("schedulerName: koord-scheduler", f"schedulerName: {name}")
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        name,
        config_text=config,
        leader_elect=False,
        extra_args=["--whatif-advice-seconds", "1"],
    )
    try:
        yield running
    finally:
        running.component.stop()


@pytest.fixture(scope="module")
def cluster_objects(control_plane: ControlPlane, advising_process: Scheduler) -> None:
    control_plane.apply_file(PRIORITY_CLASSES)
    control_plane.apply_file(TOPOLOGY)


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = f"whatif-{request.node.name.split('[')[0].replace('_', '-')[5:36]}".rstrip("-")
    control_plane.create_namespace(ns)
    yield ns
    control_plane.delete_namespace(ns)


def topo_blocks(cp: ControlPlane) -> dict[str, tuple[str, list[str]]]:
    """Block -> (its spine, its nodes, sorted)."""
    blocks: dict[str, tuple[str, list[str]]] = {}
    for node in list_items(cp, "nodes", namespace=None, selector="node-type=topo"):
        labels = node["metadata"]["labels"]
        blocks.setdefault(labels[BLOCK], (labels[SPINE], []))[1].append(node["metadata"]["name"])
    return {block: (spine, sorted(nodes)) for block, (spine, nodes) in sorted(blocks.items())}


def filler(
    ns: str, node: str, klass: str, name: str | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    pod = make_pod(
        name or f"fill-{node}",
        ns,
        cpu="1",
        memory="1Gi",
        extra=WHOLE_NODE,
        priority_class=klass,
        labels=labels,
    )
    pod["spec"]["nodeName"] = node
    return pod


def take(cp: ControlPlane, ns: str, nodes: list[str]) -> None:
    apply(cp, [filler(ns, node, "high-priority") for node in nodes])


def gang(
    ns: str,
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    gather: str | None = None,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    annotations = {}
    if gather is not None:
        strategy, layer = gather.split("@")
        annotations["gang.scheduling.koordinator.sh/network-topology-spec"] = json.dumps(
            {"gatherStrategy": [{"layer": layer, "strategy": strategy}]}
        )
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"minMember": size if min_member is None else min_member, "scheduleTimeoutSeconds": 120},
    }
    members = [
        make_pod(
            f"{name}-{i}",
            ns,
            cpu="8",
            memory="64Gi",
            extra=WHOLE_NODE,
            node_selector={"node-type": "topo"},
            labels={"pod-group.scheduling.sigs.k8s.io": name, **(labels or {})},
            annotations={"gang.scheduling.koordinator.sh/network-topology-index": str(i)},
            priority_class="high-priority",
        )
        for i in range(size)
    ]
    return [group, *members]


def ask(scheduler: Scheduler, ns: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    body = json.dumps({"objects": objects, "namespace": ns, "timeLimitSeconds": 10}).encode()
    request = urllib.request.Request(
        f"{scheduler.url}/debug/whatif",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            answer: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"what-if answered HTTP {exc.code}: {exc.read().decode()}") from exc
    return answer


def ask_until(
    scheduler: Scheduler, ns: str, objects: list[dict[str, Any]], seen: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The what-if's answer once it shows the cluster as written (``seen``)."""
    found: dict[str, Any] = wait_for(
        lambda: answer if seen(answer := ask(scheduler, ns, objects)) else None,
        timeout=30,
        what="a what-if answer that sees the fillers",
        interval=0.5,
    )
    return found


def pod_states(cp: ControlPlane, ns: str) -> dict[str, tuple[str, str, bool]]:
    """Pod -> (node, nominated node, being deleted): what a what-if must not change (KWOK may
    still write the fillers' status meanwhile, so not their resourceVersion)."""
    return {
        p["metadata"]["name"]: (
            p["spec"].get("nodeName", ""),
            p.get("status", {}).get("nominatedNodeName", ""),
            "deletionTimestamp" in p["metadata"],
        )
        for p in pods(cp, ns)
    }


def members_bound(cp: ControlPlane, ns: str, name: str, size: int) -> dict[str, str]:
    def check() -> dict[str, str] | None:
        placed = {p: n for p, n in bound(cp, ns, include_deleting=False).items() if p.startswith(f"{name}-")}
        return placed if len(placed) == size else None

    placed: dict[str, str] = wait_for(check, timeout=90, what=f"{size} members of {name} bound")
    return placed


def test_a_gang_that_fits_in_one_block_only_once_two_named_low_priority_jobs_go(
    control_plane: ControlPlane, scheduler: Scheduler, cluster_objects: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    blocks = topo_blocks(cp)
    (_, (_, free)), *others = blocks.items()
    take(cp, ns, [node for _, (_, nodes) in others for node in nodes])
    apply(cp, [filler(ns, free[0], "low-priority", "old-x"), filler(ns, free[1], "low-priority", "old-y")])
    job = gang(ns, "train", 8, gather="MustGather@BlockLayer")

    before = pod_states(cp, ns)
    answer = ask_until(scheduler, ns, job, lambda a: not a["fits_now"]["fits"])
    for _ in range(3):  # more what-ifs: still nothing evicted, nominated or written
        ask(scheduler, ns, job)
    assert pod_states(cp, ns) == before
    assert [e for e in list_items(cp, "events", namespace=ns) if e.get("reason") == "Preempted"] == []
    after = answer["after_preemption"]
    assert after["fits"], answer
    assert sorted(after["jobs"]) == [f"{ns}/old-x", f"{ns}/old-y"]
    assert sorted(v["pod"] for v in after["victims"]) == [f"{ns}/old-x", f"{ns}/old-y"]
    assert {v["priority"] for v in after["victims"]} == {1000}
    assert {p["node"] for p in after["placements"]} == set(free)
    assert answer["largest"]["members_with_preemption"] == 8

    apply(cp, job)
    placed = members_bound(cp, ns, "train", 8)
    assert set(placed.values()) == set(free)
    names = {p["metadata"]["name"] for p in pods(cp, ns)}
    assert {"old-x", "old-y"}.isdisjoint(names)


def test_a_gang_of_8_that_fits_with_6_members(
    control_plane: ControlPlane, scheduler: Scheduler, cluster_objects: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    every = [node for _, nodes in topo_blocks(cp).values() for node in nodes]
    take(cp, ns, every[6:])
    job = gang(ns, "train", 8, min_member=6)

    answer = ask_until(scheduler, ns, job, lambda a: a["largest"]["members_now"] < 8)
    assert not answer["fits_now"]["fits"]
    assert answer["largest"]["members_now"] == 6
    assert answer["smallest_change"]["kind"] == "members"
    assert answer["smallest_change"]["members"] == 6
    assert not answer["after_preemption"]["fits"]  # the fillers are of the job's own priority

    apply(cp, gang(ns, "train", 6))
    placed = members_bound(cp, ns, "train", 6)
    assert set(placed.values()) == set(every[:6])


def test_a_gang_its_quota_refuses_fits_under_another_quota(
    control_plane: ControlPlane, scheduler: Scheduler, cluster_objects: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    full, roomy = f"{ns}-full", f"{ns}-roomy"
    # roomy caps no GPUs and holds a min of CPU: on the shared e2e cluster, the profile trees other
    # tests leave (docs/examples' amd64 and arm64 roots) take the GPU nodes out of the default tree,
    # so a default-tree quota capping GPUs would truly have no GPU room there
    quotas = [
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": full, "namespace": ns},
            "spec": {
                "min": {"cpu": "0", "nvidia.com/gpu": "0"},
                "max": {"cpu": "4096", "nvidia.com/gpu": "8"},
            },
        },
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {"name": roomy, "namespace": ns},
            "spec": {"min": {"cpu": "16"}, "max": {"cpu": "4096"}},
        },
    ]
    apply(cp, quotas)
    every = [node for _, nodes in topo_blocks(cp).values() for node in nodes]
    apply(cp, [filler(ns, every[0], "low-priority", "busy", labels={QUOTA: full})])
    job = gang(ns, "train", 2, labels={QUOTA: full})

    answer = ask_until(scheduler, ns, job, lambda a: a["fits_now"]["quota_fits"] is False)
    assert answer["fits_now"]["quota"] == full
    assert answer["blocker"]["kind"] == "quota"
    assert answer["smallest_change"]["kind"] == "quota"
    assert answer["smallest_change"]["quota"] == roomy

    apply(cp, gang(ns, "train", 2, labels={QUOTA: roomy}))
    members_bound(cp, ns, "train", 2)


def test_a_must_gather_gang_that_fits_only_with_prefer_gather(
    control_plane: ControlPlane, scheduler: Scheduler, cluster_objects: None, namespace: str
) -> None:
    cp, ns = control_plane, namespace
    blocks = topo_blocks(cp)
    by_spine: dict[str, list[list[str]]] = {}
    for spine, nodes in blocks.values():
        by_spine.setdefault(spine, []).append(nodes)
    free = [node for spine in sorted(by_spine) for node in by_spine[spine][0][:4]]  # 4 in one block per spine
    take(cp, ns, [node for _, nodes in blocks.values() for node in nodes if node not in free])
    job = gang(ns, "train", 8, gather="MustGather@BlockLayer")

    answer = ask_until(
        scheduler, ns, job, lambda a: a["blocker"] is not None and a["blocker"]["kind"] == "topology"
    )
    assert not answer["fits_now"]["fits"]
    change = answer["smallest_change"]
    assert change["kind"] == "topology", answer
    assert change["network_topology_spec"] == {
        "gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    }
    assert {p["node"] for p in change["placements"]} == set(free)

    apply(cp, gang(ns, "train", 8, gather="PreferGather@BlockLayer"))
    placed = members_bound(cp, ns, "train", 8)
    assert set(placed.values()) == set(free)


@pytest.fixture
def advising_scheduler(advising_process: Scheduler) -> Scheduler:
    wait_until_ready(advising_process.component, advising_process.port)
    return advising_process


def test_a_pending_gangs_smallest_change_is_its_pod_groups_condition(
    control_plane: ControlPlane, advising_scheduler: Scheduler, cluster_objects: None, namespace: str
) -> None:
    """9 whole-node members that must gather in a block of 8 nodes stay pending; the scheduler
    finds the smallest change itself and writes it on the PodGroup (``Schedulable`` False) and in
    the members' own FailedScheduling message."""
    cp, ns = control_plane, namespace
    job = gang(ns, "train", 9, gather="MustGather@BlockLayer")
    for member in job[1:]:
        member["spec"]["schedulerName"] = "koord-scheduler-advice"
    apply(cp, job)

    def schedulable() -> dict[str, Any] | None:
        group = get_object(cp, "podgroups.scheduling.sigs.k8s.io", "train", namespace=ns)
        conditions = group.get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "Schedulable"), None)

    condition = wait_for(schedulable, timeout=30, what="the PodGroup's Schedulable condition")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    # The change itself depends on how far the advisor's 1 s what-if got on a loaded machine
    # (the relaxations come last); the what-if tests above check the changes themselves.
    assert condition["message"].startswith(
        f"what-if for {ns}/train: topology: gang {ns}/train needs 9 members in one BlockLayer domain; "
        "the largest free domain holds 8; smallest change: "
    ), condition

    def told() -> list[str] | None:
        # Every attempt runs its own 1 s what-if, which gets further on some attempts than on
        # others: the members' message must be the PodGroup's as it stands, not as first read.
        current = schedulable()
        if current is None:
            return None
        said = failed_scheduling(cp, ns, *(f"train-{i}" for i in range(9)))
        return [m for m in said if m.endswith(current["message"])] or None

    assert wait_for(told, timeout=30, what="a member's FailedScheduling with the PodGroup's smallest change")
    assert not bound(cp, ns)
