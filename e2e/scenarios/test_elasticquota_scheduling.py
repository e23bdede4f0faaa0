"""ElasticQuota on the real API server: koord-scheduler admits pods by their quota's runtime.

Every pod here tolerates the quota pools' taint and selects them (``quota-amd64-*`` and
``quota-arm64-*``: 8 CPU each), so the other scenarios never see these pods. What a user sees:

- pods beyond a quota's max stay Pending with a FailedScheduling message naming the quota;
- a tenant borrows the idle min of a sibling, unless the sibling does not lend;
- a non-preemptible pod is limited to its quota's min;
- a gang whose total exceeds its quota gets no member bound, nor does a gang group whose gangs
  together exceed it;
- ``kubectl get eq -o json`` carries the runtime / request annotations and status.used;
- ElasticQuotaProfiles split the pools into independent trees: a pod of the arm64 tree lands only
  on arm64 nodes and is limited by that tree's total; koord-manager writes the tree's node
  selector into its pods' required node affinity.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import wait_until_ready
from e2e.scheduler_process import Scheduler, start_scheduler
from e2e.workloads import apply, get_object, list_items, make_pod, pods, wait_for
from e2e.workloads import failed_scheduling as failed_scheduling_messages

Q = "quota.scheduling.koordinator.sh/"
AMD64 = {"koord-e2e/quota-tree": "amd64"}
QUOTA_POOLS = {"node-type": "quota"}
TOLERATE = [{"key": "koord-e2e/pool", "operator": "Equal", "value": "quota", "effect": "NoSchedule"}]


def elastic_quota(
    name: str,
    namespace: str,
    *,
    min: dict[str, str] | None = None,
    max: dict[str, str],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"max": max}
    if min is not None:
        spec["min"] = min
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def quota_pod(
    name: str,
    namespace: str,
    cpu: str,
    *,
    quota: str | None = None,
    selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if quota:
        all_labels[Q + "name"] = quota
    return make_pod(
        name,
        namespace,
        cpu=cpu,
        memory="256Mi",
        node_selector=selector or AMD64,
        tolerations=TOLERATE,
        labels=all_labels,
    )


def placed(cp: ControlPlane, namespace: str) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods(cp, namespace) if p["spec"].get("nodeName")
    }


def placed_count(cp: ControlPlane, namespace: str, count: int) -> dict[str, str] | None:
    bound = placed(cp, namespace)
    return bound if len(bound) >= count else None


def failed_scheduling(cp: ControlPlane, namespace: str, pod: str, needle: str) -> str | None:
    """The latest FailedScheduling message of ``pod`` that contains ``needle``."""
    return next((m for m in reversed(failed_scheduling_messages(cp, namespace, pod)) if needle in m), None)


def get_quota(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return get_object(cp, "eq", name, namespace=namespace)


def test_pods_beyond_max_stay_pending_and_kubectl_shows_the_figures(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    ns = "eq-max"
    control_plane.create_namespace(ns)
    # Named like its namespace: the namespace's pods charge it without a label.
    apply(control_plane, [elastic_quota(ns, ns, min={"cpu": "1"}, max={"cpu": "2"})])
    apply(control_plane, [quota_pod(f"p{i}", ns, "1") for i in range(3)])
    bound = wait_for(lambda: placed_count(control_plane, ns, 2), timeout=60, what="2 pods bound")
    pending = ({"p0", "p1", "p2"} - set(bound)).pop()
    message = wait_for(
        lambda: failed_scheduling(control_plane, ns, pending, f"quota {ns}"),
        timeout=60,
        what="FailedScheduling naming the quota",
    )
    assert f"Insufficient quotas: quota {ns} cpu used 2 + request 1 > runtime 2" in message
    # Koordinator's wording follows, unchanged, for the tools that match on it.
    assert (
        f"(Insufficient quotas, quotaName: {ns}, runtime: cpu:2, used: cpu:2, pod's request: cpu:1, "
        "exceedDimensions: [cpu])" in message
    )
    scheduler.wait_explained(ns, [pending], results=("unschedulable",))
    assert len(placed(control_plane, ns)) == 2

    def figures() -> dict[str, Any] | None:
        quota = get_quota(control_plane, ns, ns)
        annotations = quota["metadata"].get("annotations", {})
        used = quota.get("status", {}).get("used")
        if Q + "runtime" not in annotations or used != {"cpu": "2"}:
            return None
        return quota

    quota = wait_for(figures, timeout=30, what="runtime annotation and status.used on the quota")
    annotations = quota["metadata"]["annotations"]
    assert json.loads(annotations[Q + "runtime"]) == {"cpu": "2"}
    assert json.loads(annotations[Q + "request"]) == {"cpu": "2"}  # 3 asked, capped at max
    # No non-preemptible pod was ever here: a list of zeros is not written, as Koordinator.
    assert Q + "non-preemptible-used" not in annotations
    assert quota["status"]["used"] == {"cpu": "2"}


def borrowing_tree(cp: ControlPlane, ns: str, *, lends: bool) -> None:
    """Parent (min = max = 4 cpu) with a lender and a borrower (min 2, max 4 each)."""
    lender_labels = {Q + "parent": f"{ns}-parent"}
    if not lends:
        lender_labels[Q + "allow-lent-resource"] = "false"
    apply(
        cp,
        [
            elastic_quota(
                f"{ns}-parent", ns, min={"cpu": "4"}, max={"cpu": "4"}, labels={Q + "is-parent": "true"}
            ),
            elastic_quota(f"{ns}-lender", ns, min={"cpu": "2"}, max={"cpu": "4"}, labels=lender_labels),
            elastic_quota(
                f"{ns}-borrower",
                ns,
                min={"cpu": "2"},
                max={"cpu": "4"},
                labels={Q + "parent": f"{ns}-parent"},
            ),
        ],
    )


def test_a_tenant_borrows_the_idle_min_of_another(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    ns = "eq-borrow"
    control_plane.create_namespace(ns)
    borrowing_tree(control_plane, ns, lends=True)
    apply(control_plane, [quota_pod(f"b{i}", ns, "1", quota=f"{ns}-borrower") for i in range(3)])
    # 3 cpu is above the borrower's min of 2: the third runs on the lender's idle min.
    wait_for(lambda: placed_count(control_plane, ns, 3), timeout=60, what="3 borrower pods bound")


def test_a_quota_that_does_not_lend_keeps_its_min(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    ns = "eq-nolend"
    control_plane.create_namespace(ns)
    borrowing_tree(control_plane, ns, lends=False)
    apply(control_plane, [quota_pod(f"b{i}", ns, "1", quota=f"{ns}-borrower") for i in range(3)])
    bound = wait_for(lambda: placed_count(control_plane, ns, 2), timeout=60, what="2 borrower pods bound")
    pending = ({"b0", "b1", "b2"} - set(bound)).pop()
    message = wait_for(
        lambda: failed_scheduling(control_plane, ns, pending, "Insufficient quotas"),
        timeout=60,
        what="FailedScheduling of the third borrower pod",
    )
    assert f"quota {ns}-borrower cpu used 2 + request 1 > runtime 2" in message
    assert len(placed(control_plane, ns)) == 2


def test_a_non_preemptible_pod_is_limited_to_min(control_plane: ControlPlane, scheduler: Scheduler) -> None:
    ns = "eq-np"
    control_plane.create_namespace(ns)
    apply(control_plane, [elastic_quota(ns, ns, min={"cpu": "1"}, max={"cpu": "4"})])
    keep = {Q + "preemptible": "false"}
    apply(control_plane, [quota_pod("np0", ns, "1", labels=keep)])
    wait_for(lambda: placed_count(control_plane, ns, 1), timeout=60, what="the first non-preemptible pod")
    apply(control_plane, [quota_pod("np1", ns, "1", labels=keep), quota_pod("free", ns, "1")])
    bound = wait_for(lambda: placed_count(control_plane, ns, 2), timeout=60, what="the preemptible pod")
    assert set(bound) == {"np0", "free"}
    message = wait_for(
        lambda: failed_scheduling(control_plane, ns, "np1", "non-preemptible"),
        timeout=60,
        what="FailedScheduling of the second non-preemptible pod",
    )
    assert (
        f"Insufficient non-preemptible quotas: quota {ns} cpu non-preemptible used 1 + request 1 > min 1"
        in message
    )
    assert (
        f"(Insufficient non-preemptible quotas, quotaName: {ns}, min: cpu:1, nonPreemptibleUsed: cpu:1, "
        "pod's request: cpu:1, exceedDimensions: [cpu])" in message
    )
    assert "np1" not in placed(control_plane, ns)


def test_a_gang_over_its_quota_is_rejected_as_a_whole(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    ns = "eq-gang"
    control_plane.create_namespace(ns)
    apply(control_plane, [elastic_quota(ns, ns, min={"cpu": "2"}, max={"cpu": "2"})])
    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": ns},
        "spec": {"minMember": 3},
    }
    members = [
        quota_pod(f"m{i}", ns, "1", labels={"pod-group.scheduling.sigs.k8s.io": "job"}) for i in range(3)
    ]
    apply(control_plane, [pod_group, *members])
    message = wait_for(
        lambda: failed_scheduling(control_plane, ns, "m0", f"quota {ns}"),
        timeout=60,
        what="FailedScheduling of a gang member naming the quota",
    )
    assert f"quota {ns} cpu used 0 + request 3 of gang {ns}/job (3 pending members) > runtime 2" in message
    # The scheduler has held back or failed every member: none is binding.
    scheduler.wait_explained(ns, [f"m{i}" for i in range(3)])
    assert placed(control_plane, ns) == {}


def test_a_gang_group_over_its_quota_is_rejected_as_one_job(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """master (1 x 1 cpu) and worker (2 x 1 cpu) each fit the 2-cpu quota alone; their gang group
    (3 cpu) does not, and is refused as one job: the master too, naming the group's sum."""
    ns = "eq-gang-group"
    control_plane.create_namespace(ns)
    apply(control_plane, [elastic_quota(ns, ns, min={"cpu": "2"}, max={"cpu": "2"})])
    groups = json.dumps([f"{ns}/master", f"{ns}/worker"])
    pod_groups = [
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": {"gang.scheduling.koordinator.sh/groups": groups},
            },
            "spec": {"minMember": count},
        }
        for name, count in (("master", 1), ("worker", 2))
    ]
    members = [quota_pod("master-0", ns, "1", labels={"pod-group.scheduling.sigs.k8s.io": "master"})] + [
        quota_pod(f"worker-{i}", ns, "1", labels={"pod-group.scheduling.sigs.k8s.io": "worker"})
        for i in range(2)
    ]
    apply(control_plane, [*pod_groups, *members])
    expected = (
        f"quota {ns} cpu used 0 + request 3 of gang group {ns}/master,{ns}/worker (3 pending members) "
        "> runtime 2"
    )
    for name in ("master-0", "worker-0"):
        wait_for(
            functools.partial(failed_scheduling, control_plane, ns, name, expected),
            timeout=60,
            what=f"FailedScheduling of {name} naming the gang group's sum",
        )
    # The scheduler has held back or failed the master and both workers: none is binding.
    scheduler.wait_explained(ns, ["master-0", "worker-0", "worker-1"])
    assert placed(control_plane, ns) == {}
    control_plane.kubectl(
        "patch", "eq", ns, "-n", ns, "--type=merge", "-p", '{"spec":{"min":{"cpu":"3"},"max":{"cpu":"3"}}}'
    )
    assert wait_for(
        lambda: placed_count(control_plane, ns, 3), timeout=60, what="the whole group bound once it fits"
    ).keys() == {"master-0", "worker-0", "worker-1"}
    control_plane.delete_namespace(ns)  # frees the pool for the next tests


@pytest.fixture
def quota_trees(control_plane: ControlPlane) -> Iterator[str]:
    """One ElasticQuotaProfile per pool, amd64 at full size, arm64 at half (8 cpu), as a user sets
    them up: koord-manager creates each tree's root quota, then a team quota goes under it (the
    admission webhook copies the root's tree-id into it)."""
    cp, ns = control_plane, "eq-trees"
    if cp.read("namespace", ns) is None:  # kept between the tests using it
        cp.create_namespace(ns)
    arches = (("amd64", "1"), ("arm64", "0.5"))
    apply(
        cp,
        [
            {
                "apiVersion": "quota.koordinator.sh/v1alpha1",
                "kind": "ElasticQuotaProfile",
                "metadata": {"name": f"{arch}-profile", "namespace": ns},
                "spec": {
                    "quotaName": f"e2e-{arch}-root",
                    "resourceRatio": ratio,
                    "nodeSelector": {"matchLabels": {"koord-e2e/quota-tree": arch}},
                },
            }
            for arch, ratio in arches
        ],
    )

    def roots_exist() -> bool | None:
        found = [cp.read("eq", f"e2e-{a}-root", namespace=ns) is not None for a, _ in arches]
        return all(found) or None

    wait_for(roots_exist, timeout=60, what="koord-manager to create both tree roots")
    apply(
        cp,
        [
            elastic_quota(
                f"{arch}-team",
                ns,
                max={"cpu": "1000", "memory": "1Ti"},
                labels={Q + "parent": f"e2e-{arch}-root"},
            )
            for arch, _ in arches
        ],
    )
    yield ns
    cp.kubectl("delete", "pods", "--all", "-n", ns, "--wait=true", "--timeout=60s")
    cp.kubectl("delete", "eq", "amd64-team", "arm64-team", "-n", ns, "--wait=true", check=False)
    cp.kubectl("delete", "elasticquotaprofiles", "--all", "-n", ns, "--wait=true", check=False)
    cp.kubectl("delete", "eq", "--all", "-n", ns, "--wait=false", check=False)


def test_quota_trees_keep_amd64_and_arm64_apart(
    control_plane: ControlPlane, scheduler: Scheduler, quota_trees: str
) -> None:
    ns = quota_trees
    arm = [quota_pod(f"arm-{i}", ns, "3", quota="arm64-team", selector=QUOTA_POOLS) for i in range(3)]
    amd = [quota_pod(f"amd-{i}", ns, "2", quota="amd64-team", selector=QUOTA_POOLS) for i in range(2)]
    apply(control_plane, [*arm, *amd])
    wait_for(lambda: placed_count(control_plane, ns, 4), timeout=60, what="4 pods bound")
    # The fifth pod was decided too (explained, and not as scheduled: nothing of it in flight).
    names = [p["metadata"]["name"] for p in (*arm, *amd)]
    explained = scheduler.wait_explained(ns, names, results=("scheduled", "unschedulable", "waiting"))
    assert [e["result"] for e in explained.values()].count("scheduled") == 4, explained
    bound = placed(control_plane, ns)
    arm_bound = {name: node for name, node in bound.items() if name.startswith("arm-")}
    amd_bound = {name: node for name, node in bound.items() if name.startswith("amd-")}
    assert len(amd_bound) == 2
    assert all(node.startswith("quota-amd64-") for node in amd_bound.values()), amd_bound
    # The arm64 tree has (8 + 8) x 0.5 = 8 cpu: two 3-cpu pods, not three, although both
    # arm64 nodes would have room for the third.
    assert len(arm_bound) == 2
    assert all(node.startswith("quota-arm64-") for node in arm_bound.values()), arm_bound
    pending = ({"arm-0", "arm-1", "arm-2"} - set(arm_bound)).pop()
    message = wait_for(
        lambda: failed_scheduling(control_plane, ns, pending, "quota arm64-team"),
        timeout=60,
        what="FailedScheduling naming the arm64 quota",
    )
    assert "quota arm64-team cpu used 6 + request 3 > runtime 8" in message

    def root_runtime() -> dict[str, str] | None:
        annotations = get_quota(control_plane, ns, "e2e-arm64-root")["metadata"].get("annotations", {})
        raw = annotations.get(Q + "runtime")
        return json.loads(raw) if raw else None

    # koord-scheduler writes each quota's annotations on its own, after the pods' bindings: the
    # root's first annotation may still be from before they were counted (cpu 0), so the wait is
    # for the figure, and the last one read is in the timeout's message.
    def root_runtime_cpu() -> str | None:
        runtime = root_runtime()
        return runtime["cpu"] if runtime and runtime.get("cpu") == "8" else None

    assert wait_for(root_runtime_cpu, timeout=30, what="the arm64 tree root's runtime cpu at 8") == "8"


def test_pods_of_a_profile_tree_get_its_node_selector_as_required_affinity(
    control_plane: ControlPlane, scheduler: Scheduler, quota_trees: str
) -> None:
    """koord-manager's pod webhook, as Koordinator's: the arm64 profile's nodeSelector is ANDed
    into the pod's own required term at CREATE; a pod of no profile tree is left as written."""
    ns = quota_trees
    own_term = {"key": "node-type", "operator": "In", "values": ["quota"]}
    arm = quota_pod("arm-affine", ns, "1", quota="arm64-team", selector=QUOTA_POOLS)
    arm["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [own_term]}]
            }
        }
    }
    plain = quota_pod("plain", ns, "1", selector=QUOTA_POOLS)  # the quota "eq-trees" does not exist
    apply(control_plane, [arm, plain])

    def stored(name: str) -> dict[str, Any]:
        return get_object(control_plane, "pod", name, namespace=ns)

    terms = stored("arm-affine")["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                own_term,
                {"key": "koord-e2e/quota-tree", "operator": "In", "values": ["arm64"]},
            ]
        }
    ]
    assert "affinity" not in stored("plain")["spec"]
    node = wait_for(lambda: placed(control_plane, ns).get("arm-affine"), timeout=60, what="arm-affine bound")
    assert node.startswith("quota-arm64-"), node


ARM64 = {"koord-e2e/quota-tree": "arm64"}


def pods_on_arm64(cp: ControlPlane) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in pods(cp)
        if (p["spec"].get("nodeName") or "").startswith("quota-arm64-")
        and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_lender_takes_its_min_back_by_preempting_the_borrower_only(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """Quota reclaim: parent (16 cpu, the two arm64 nodes) with lender (min 8), borrower (min 6)
    and steady (min 2). The borrower runs 12 cpu while the lender is idle; the lender's 2 x 4 cpu
    job (within its min) then evicts 6 cpu of the borrower's pods (what it holds above its
    runtime), nothing of the steady quota, although every pod has the same priority."""
    cp, ns = control_plane, "eq-reclaim"
    wait_for(lambda: not pods_on_arm64(cp) or None, timeout=90, what="the arm64 pool to be empty")
    cp.create_namespace(ns)
    parent = {Q + "parent": f"{ns}-parent"}
    apply(
        cp,
        [
            elastic_quota(
                f"{ns}-parent", ns, min={"cpu": "16"}, max={"cpu": "16"}, labels={Q + "is-parent": "true"}
            ),
            elastic_quota(f"{ns}-lender", ns, min={"cpu": "8"}, max={"cpu": "16"}, labels=parent),
            elastic_quota(f"{ns}-borrower", ns, min={"cpu": "6"}, max={"cpu": "16"}, labels=parent),
            elastic_quota(f"{ns}-steady", ns, min={"cpu": "2"}, max={"cpu": "16"}, labels=parent),
        ],
    )
    apply(cp, [quota_pod("steady-0", ns, "2", quota=f"{ns}-steady", selector=ARM64)])
    wait_for(lambda: placed_count(cp, ns, 1), timeout=60, what="the steady pod bound")
    apply(cp, [quota_pod(f"borrow-{i}", ns, "2", quota=f"{ns}-borrower", selector=ARM64) for i in range(6)])
    wait_for(lambda: placed_count(cp, ns, 7), timeout=60, what="the borrower's 12 cpu bound")

    pod_group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "claim", "namespace": ns},
        "spec": {"minMember": 2},
    }
    members = [
        quota_pod(
            f"claim-{i}",
            ns,
            "4",
            quota=f"{ns}-lender",
            selector=ARM64,
            labels={"pod-group.scheduling.sigs.k8s.io": "claim"},
        )
        for i in range(2)
    ]
    apply(cp, [pod_group, *members])

    def claimed() -> dict[str, str] | None:
        bound = placed(cp, ns)
        return bound if {"claim-0", "claim-1"} <= set(bound) else None

    wait_for(claimed, timeout=120, what="the lender's job bound")
    left = {p["metadata"]["name"] for p in pods(cp, ns) if not p["metadata"].get("deletionTimestamp")}
    assert "steady-0" in left
    assert len({f"borrow-{i}" for i in range(6)} - left) == 3
    preempted = list_items(cp, "events", namespace=ns, field_selector="reason=Preempted")
    assert {e["involvedObject"]["name"] for e in preempted} == {f"borrow-{i}" for i in range(6)} - left
    cp.kubectl("delete", "namespace", ns, "--wait=false")  # frees the pool for the next tests


def test_a_pod_its_quota_rejects_preempts_a_lower_priority_pod_of_the_same_quota(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """ElasticQuota preemption: the quota is at its max with low-priority pods; a high-priority pod
    of the same quota evicts one of them (the nodes have room: only the quota is short)."""
    cp, ns = control_plane, "eq-preempt"
    cp.create_namespace(ns)
    cp.apply_file(repo_root() / "docs" / "examples" / "v1.7" / "04-priority-classes.yaml")
    apply(cp, [elastic_quota(ns, ns, min={"cpu": "2"}, max={"cpu": "2"})])
    lows = [quota_pod(f"low-{i}", ns, "1") for i in range(2)]
    for low in lows:
        low["spec"]["priorityClassName"] = "low-priority"
    apply(cp, lows)
    wait_for(lambda: placed_count(cp, ns, 2), timeout=60, what="the two low-priority pods bound")
    urgent = quota_pod("urgent", ns, "1")
    urgent["spec"]["priorityClassName"] = "high-priority"
    apply(cp, [urgent])
    wait_for(lambda: "urgent" in placed(cp, ns) or None, timeout=90, what="the high-priority pod bound")
    left = {p["metadata"]["name"] for p in pods(cp, ns) if not p["metadata"].get("deletionTimestamp")}
    assert len({"low-0", "low-1"} - left) == 1


REVOKE_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler-revoke
  pluginConfig:
  - name: ElasticQuota
    args:
      monitorAllQuotas: true
      delayEvictTime: 1s
      revokePodInterval: 200ms
"""


@pytest.fixture
def revoke_scheduler(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    """A second koord-scheduler, ``koord-scheduler-revoke``, running the overuse revoke controller."""
    name = "koord-scheduler-revoke"
    running = start_scheduler(
        control_plane, scheduler_kubeconfig, name, config_text=REVOKE_CONFIG, leader_elect=False
    )
    try:
        wait_until_ready(running.component, running.port)
        yield running
    finally:
        running.component.stop()


def test_an_overused_quota_gives_pods_back_after_delay_evict_time(
    control_plane: ControlPlane, scheduler: Scheduler, revoke_scheduler: Scheduler
) -> None:
    """monitorAllQuotas: a borrower holds 8 CPU of a 8-CPU parent while the lender is idle; the
    lender's 4 CPU arrive (within its min, and the nodes have room, so no preemption is involved):
    the borrower's runtime drops to 4 and, a delayEvictTime later, exactly 4 CPU of its pods are
    evicted with QuotaRevoked events."""
    cp, ns = control_plane, "eq-revoke"
    wait_for(lambda: not pods_on_arm64(cp) or None, timeout=90, what="the arm64 pool to be empty")
    cp.create_namespace(ns)
    parent = {Q + "parent": f"{ns}-parent"}
    apply(
        cp,
        [
            elastic_quota(
                f"{ns}-parent", ns, min={"cpu": "8"}, max={"cpu": "8"}, labels={Q + "is-parent": "true"}
            ),
            elastic_quota(f"{ns}-lender", ns, min={"cpu": "4"}, max={"cpu": "8"}, labels=parent),
            elastic_quota(f"{ns}-borrower", ns, min={"cpu": "4"}, max={"cpu": "8"}, labels=parent),
        ],
    )
    apply(cp, [quota_pod(f"borrow-{i}", ns, "2", quota=f"{ns}-borrower", selector=ARM64) for i in range(4)])
    wait_for(lambda: placed_count(cp, ns, 4), timeout=60, what="the borrower's 8 CPU bound")
    lenders = [quota_pod(f"lend-{i}", ns, "2", quota=f"{ns}-lender", selector=ARM64) for i in range(2)]
    for lender in lenders:
        lender["spec"]["schedulerName"] = "koord-scheduler-revoke"
    apply(cp, lenders)

    def revoked() -> list[str] | None:
        revocations = list_items(cp, "events", namespace=ns, field_selector="reason=QuotaRevoked")
        names = sorted(e["involvedObject"]["name"] for e in revocations)
        return names or None

    def borrowers_left() -> set[str]:
        names = {p["metadata"]["name"] for p in pods(cp, ns) if not p["metadata"].get("deletionTimestamp")}
        return {n for n in names if n.startswith("borrow-")}

    wait_for(lambda: {"lend-0", "lend-1"} <= set(placed(cp, ns)) or None, timeout=60, what="the lender bound")
    wait_for(lambda: len(borrowers_left()) <= 2 or None, timeout=60, what="4 CPU of the borrower revoked")
    time.sleep(3)  # every chance to (wrongly) revoke more
    gone = {f"borrow-{i}" for i in range(4)} - borrowers_left()
    assert len(gone) == 2
    assert set(revoked() or []) == gone
    cp.kubectl("delete", "namespace", ns, "--wait=false")


def test_every_quota_of_a_profile_tree_carries_koordinators_figures(
    control_plane: ControlPlane, scheduler: Scheduler
) -> None:
    """A child of a profile root asking for less than its min runs with runtime == request (never
    zero), the root carries the tree's total-resource, and the figures follow every change."""
    ns = "eq-figures"
    control_plane.create_namespace(ns)
    profile = {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": {"name": "arm64-figures", "namespace": ns},
        "spec": {
            "quotaName": "e2e-figures-root",
            "resourceRatio": "0.5",
            "nodeSelector": {"matchLabels": {"koord-e2e/quota-tree": "arm64"}},
        },
    }
    apply(control_plane, [profile])
    wait_for(
        lambda: control_plane.read("eq", "e2e-figures-root", namespace=ns) is not None or None,
        timeout=60,
        what="koord-manager to create the tree root",
    )
    apply(
        control_plane,
        [
            elastic_quota(
                "arm64-small",
                ns,
                min={"cpu": "4", "memory": "4Gi"},
                max={"cpu": "8", "memory": "8Gi"},
                labels={Q + "parent": "e2e-figures-root"},
            )
        ],
    )
    apply(control_plane, [quota_pod("small-0", ns, "2", quota="arm64-small", selector=QUOTA_POOLS)])
    wait_for(lambda: placed_count(control_plane, ns, 1), timeout=60, what="the pod of arm64-small bound")

    def annotations_of(name: str, wanted: dict[str, dict[str, str]]) -> dict[str, Any] | None:
        quota = get_quota(control_plane, ns, name)
        annotations = quota["metadata"].get("annotations", {})
        current = {key: json.loads(annotations[Q + key]) for key in wanted if Q + key in annotations}
        return quota if current == wanted else None

    two = {"cpu": "2", "memory": "256Mi"}
    small = wait_for(
        lambda: annotations_of("arm64-small", {"runtime": two, "request": two}),
        timeout=30,
        what="arm64-small's runtime == request",
    )
    assert small["status"]["used"] == two
    # the scheduler patches each quota of the tree in turn (by name): the root's figures may land
    # a moment after the child's
    root_figures = wait_for(
        lambda: annotations_of("e2e-figures-root", {"runtime": two}),
        timeout=30,
        what="the root's runtime: what its child asks for, up to its total",
    )["metadata"]["annotations"]
    assert json.loads(root_figures[Q + "total-resource"])["cpu"] == "8"  # (8 + 8) x 0.5
    assert json.loads(root_figures[Q + "request"])["cpu"] == "2"
    control_plane.kubectl("delete", "pod", "small-0", "-n", ns, "--wait=true")
    zero = {"cpu": "0", "memory": "0"}
    small = wait_for(
        lambda: annotations_of("arm64-small", {"runtime": zero, "request": zero}),
        timeout=30,
        what="arm64-small's figures back to zero once its pod is gone",
    )
    assert small["status"]["used"] == zero


@pytest.fixture
def gated_scheduler(control_plane: ControlPlane, scheduler_kubeconfig: Path) -> Iterator[Scheduler]:
    """A second koord-scheduler, ``koord-scheduler-gates``, started with Koordinator's
    ``--feature-gates`` ElasticQuotaIgnorePodOverhead, DisableDefaultQuota, ElasticQuotaGuaranteeUsage."""
    name = "koord-scheduler-gates"
    config = REVOKE_CONFIG.replace("koord-scheduler-revoke", name).split("  pluginConfig:")[0]
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        name,
        config_text=config,
        leader_elect=False,
        extra_args=[
            "--feature-gates=ElasticQuotaIgnorePodOverhead=true,DisableDefaultQuota=true,"
            "ElasticQuotaGuaranteeUsage=true"
        ],
    )
    try:
        wait_until_ready(running.component, running.port)
        yield running
    finally:
        running.component.stop()


def test_feature_gates_leave_the_overhead_and_the_default_quota_out(
    control_plane: ControlPlane, gated_scheduler: Scheduler
) -> None:
    """ElasticQuotaIgnorePodOverhead: a 1-CPU pod with 1 CPU of RuntimeClass overhead fits a 1-CPU
    quota and uses 1 of it. DisableDefaultQuota: a pod without the quota label charges no quota,
    not even the one named like its namespace, so a full quota does not hold it back.
    ElasticQuotaGuaranteeUsage: the quota carries allocated and guaranteed."""
    cp, ns = control_plane, "eq-gates"
    cp.create_namespace(ns)
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "eq-gates-overhead"},
        "handler": "runc",
        "overhead": {"podFixed": {"cpu": "1"}},
    }
    apply(cp, [runtime_class, elastic_quota(ns, ns, min={"cpu": "1"}, max={"cpu": "1"})])

    def gated(name: str, *, quota: str | None) -> dict[str, Any]:
        built = quota_pod(name, ns, "1", quota=quota)
        built["spec"]["schedulerName"] = "koord-scheduler-gates"
        return built

    overhead = gated("overhead", quota=ns)
    overhead["spec"]["runtimeClassName"] = "eq-gates-overhead"
    apply(cp, [overhead])
    wait_for(lambda: "overhead" in placed(cp, ns) or None, timeout=60, what="the pod with overhead bound")
    assert next(p for p in pods(cp, ns) if p["metadata"]["name"] == "overhead")["spec"]["overhead"] == {
        "cpu": "1"
    }

    # The session's koord-scheduler (no gates) writes runtime, request and status.used of every
    # quota too, by its own accounting; allocated and guaranteed come from the gated one alone.
    def figure(key: str) -> dict[str, str] | None:
        raw = get_quota(cp, ns, ns)["metadata"].get("annotations", {}).get(Q + key)
        return json.loads(raw) if raw else None

    allocated = wait_for(
        lambda: figure("allocated") == {"cpu": "1"} or None, timeout=30, what="allocated without the overhead"
    )
    assert allocated
    assert figure("guaranteed") == {"cpu": "1"}  # max(min 1, allocated 1)
    apply(cp, [gated("unlabelled", quota=None)])  # the quota is full, but this pod charges none
    wait_for(lambda: "unlabelled" in placed(cp, ns) or None, timeout=60, what="the unlabelled pod bound")
    time.sleep(2)
    assert figure("allocated") == {"cpu": "1"}
    cp.kubectl("delete", "namespace", ns, "--wait=false")
    cp.kubectl("delete", "runtimeclass", "eq-gates-overhead", "--wait=false")


SAMPLE_HOOK = '''
import logging

from scheduler.plugins.elastic_quota.hooks import QuotaHook

log = logging.getLogger("sample_quota_hook")


class Sample(QuotaHook):
    """Caps the quotas its args name at 1 cpu; refuses pods labelled e2e/hook-refuse; logs pods."""

    def _capped(self, quota):
        if quota.metadata.name not in self.args.split(","):
            return quota
        wire = quota.to_wire()
        wire["spec"]["max"] = {**wire["spec"].get("max", {}), "cpu": "1"}
        return type(quota).model_validate(wire)

    def replace_quotas(self, quotas):
        return [self._capped(q) for q in quotas]

    def on_quota_update(self, old, new):
        return self._capped(new) if new is not None else None

    def on_pod_updated(self, quota, old, new):
        where = "on a node" if new else "gone"
        log.warning("sample hook: pod %s in quota %s is %s", (new or old).name, quota, where)

    def check_pod(self, quota, pod):
        return "refused by the sample hook" if pod.labels.get("e2e/hook-refuse") else None
'''

HOOKS_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler-hooks
  pluginConfig:
  - name: ElasticQuota
    args:
      hookPlugins:
      - {key: e2e-sample, factoryKey: sample, factoryArgs: eq-hooks-capped}
"""


@pytest.fixture
def hooked_scheduler(
    control_plane: ControlPlane, scheduler_kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Scheduler]:
    """A third koord-scheduler, ``koord-scheduler-hooks``, whose ElasticQuota loads the sample hook
    from an installed package's entry point (``koordinator_py.quota_hooks``)."""
    (tmp_path / "sample_quota_hook.py").write_text(SAMPLE_HOOK)
    dist = tmp_path / "sample_quota_hook-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sample-quota-hook\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[koordinator_py.quota_hooks]\nsample = sample_quota_hook:Sample\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    running = start_scheduler(
        control_plane,
        scheduler_kubeconfig,
        "koord-scheduler-hooks",
        config_text=HOOKS_CONFIG,
        leader_elect=False,
    )
    try:
        wait_until_ready(running.component, running.port)
        yield running
    finally:
        running.component.stop()


def test_a_quota_hook_plugin_is_loaded_called_and_honoured(
    control_plane: ControlPlane, hooked_scheduler: Scheduler
) -> None:
    cp, ns = control_plane, "eq-hooks"
    cp.create_namespace(ns)
    apply(
        cp,
        [
            elastic_quota("eq-hooks", ns, min={"cpu": "4"}, max={"cpu": "4"}),
            elastic_quota("eq-hooks-capped", ns, min={"cpu": "4"}, max={"cpu": "4"}),
        ],
    )

    def hooked(name: str, cpu: str, quota: str, **labels: str) -> dict[str, Any]:
        built = quota_pod(name, ns, cpu, quota=quota, labels=labels)
        built["spec"]["schedulerName"] = "koord-scheduler-hooks"
        return built

    apply(
        cp,
        [
            hooked("fine", "1", "eq-hooks"),
            hooked("refused", "1", "eq-hooks", **{"e2e/hook-refuse": "yes"}),
            hooked("capped", "2", "eq-hooks-capped"),
        ],
    )
    wait_for(lambda: "fine" in placed(cp, ns) or None, timeout=60, what="the plain pod bound")
    refused = wait_for(
        lambda: failed_scheduling(cp, ns, "refused", "sample hook"), timeout=60, what="the hook's refusal"
    )
    assert "quota eq-hooks: refused by the sample hook (quota hook e2e-sample)" in refused
    capped = wait_for(
        lambda: failed_scheduling(cp, ns, "capped", "quota eq-hooks-capped"),
        timeout=60,
        what="the capped quota",
    )
    assert "quota eq-hooks-capped cpu used 0 + request 2 > runtime 1" in capped  # max 1 from the hook
    assert set(placed(cp, ns)) == {"fine"}
    wait_for(
        lambda: (
            "sample hook: pod fine in quota eq-hooks is on a node" in hooked_scheduler.component.log_tail(400)
            or None
        ),
        timeout=30,
        what="the pod-update hook told of the bound pod",
    )
    cp.kubectl("delete", "namespace", ns, "--wait=false")
