"""Arbitration (algorithms.md 12.4): the sort chain, the non-retryable and retryable filters, and
greedy admission; workload resolution through the caches (12.5)."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core import Pod
from operators.descheduler.config import MigrationControllerArgs
from operators.descheduler.informers import Store
from operators.descheduler.logic import filters
from operators.descheduler.logic.arbitration import arbitrate, sort_jobs
from tests.operators.descheduler.helpers import KINDS, job, later, pod_body, store_with, workload_body


def _args(**values: Any) -> MigrationControllerArgs:
    return MigrationControllerArgs.model_validate(values)


def _pod(store: Store, name: str, namespace: str = "default") -> Pod:
    pod = store.pod(namespace, name)
    assert pod is not None
    return pod


# ---------------------------------------------------------------------- workload resolution


def test_a_replica_sets_pods_resolve_to_its_deployment_across_replica_sets() -> None:
    store = store_with(
        pod_body("a", owner=("ReplicaSet", "old", "old-uid")),
        pod_body("b", owner=("ReplicaSet", "new", "new-uid")),
        replica_sets={"old": 1, "new": 1},
        deployment=4,
    )
    workload = store.workload_of(_pod(store, "a"))
    assert workload is not None
    assert (workload.kind, workload.uid, workload.replicas) == ("Deployment", "deploy-uid", 4)
    assert sorted(p.metadata.name or "" for p in workload.pods) == ["a", "b"]


def test_owners_are_resolved_by_uid_and_unknown_kinds_have_no_replicas() -> None:
    store = store_with(
        pod_body("s", owner=("StatefulSet", "db", "db-uid")),
        pod_body("stale", owner=("StatefulSet", "db", "other-uid")),
        pod_body("job", owner=("Job", "j", "j-uid")),
        pod_body("bare", owner=None),
    )
    store.upsert_workload(KINDS[("apps", "StatefulSet")], workload_body("StatefulSet", "db", "db-uid", 5))
    assert store.workload_of(_pod(store, "s")).replicas == 5  # type: ignore[union-attr]
    assert store.workload_of(_pod(store, "stale")).replicas == 0  # type: ignore[union-attr]
    assert not store.workload_of(_pod(store, "stale")).cached  # type: ignore[union-attr]
    assert store.workload_of(_pod(store, "job")).replicas == 0  # type: ignore[union-attr]
    assert store.workload_of(_pod(store, "job")).cached  # type: ignore[union-attr]
    assert store.needs_scale(_pod(store, "job"))
    store.scales["j-uid"] = 3  # what /scale answered
    assert store.workload_of(_pod(store, "job")).replicas == 3  # type: ignore[union-attr]
    assert store.workload_of(_pod(store, "bare")) is None


# ---------------------------------------------------------------------- non-retryable filters


@pytest.mark.parametrize(
    ("body", "args", "reason"),
    [
        (pod_body("p", owner=None), {}, "bare pod"),
        (pod_body("p", owner=None), {"evictAllBarePods": True}, None),
        (pod_body("p", owner=None, phase="Failed"), {"evictFailedBarePods": True}, None),
        (pod_body("p", owner=None), {"evictFailedBarePods": True}, "bare pod"),
        (pod_body("p", owner=("DaemonSet", "ds", "ds-uid")), {}, "DaemonSet"),
        (pod_body("p", annotations={"kubernetes.io/config.mirror": "x"}), {}, "mirror"),
        (pod_body("p", annotations={"kubernetes.io/config.source": "file"}), {}, "static"),
        (pod_body("p", priority=2_000_000_000), {}, "system-critical"),
        (pod_body("p", priority=2_000_000_000), {"evictSystemCriticalPods": True}, None),
        (pod_body("p", priority=100), {"priorityThreshold": {"value": 100}}, "priorityThreshold"),
        (pod_body("p", priority=99), {"priorityThreshold": {"value": 100}}, None),
        (pod_body("p", volumes=[{"name": "v", "emptyDir": {}}]), {}, "local storage"),
        (pod_body("p", volumes=[{"name": "v", "emptyDir": {}}]), {"evictLocalStoragePods": True}, None),
        (
            pod_body("p", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
            {"ignorePvcPods": True},
            "PersistentVolumeClaim",
        ),
        (pod_body("p", labels={"a": "b"}), {"labelSelector": {"matchLabels": {"a": "c"}}}, "labelSelector"),
        (
            pod_body("p", namespace="kube-system", owner=None),
            {"namespaces": {"exclude": ["kube-system"]}, "evictAllBarePods": True},
            "namespace",
        ),
        (
            pod_body("p", namespace="other", owner=None),
            {"namespaces": {"include": ["default"]}, "evictAllBarePods": True},
            "namespace",
        ),
        (
            pod_body("p", namespace="default", owner=None),
            {"namespaces": {"include": ["default"]}, "evictAllBarePods": True},
            None,
        ),
        (
            pod_body("p", annotations={"scheduling.koordinator.sh/eviction-cost": str(2**31 - 1)}),
            {},
            "eviction-cost",
        ),
        # The bypass annotation skips every filter.
        (pod_body("p", owner=None, annotations={"descheduler.alpha.kubernetes.io/evict": ""}), {}, None),
    ],
)
def test_non_retryable_filters(body: dict[str, Any], args: dict[str, Any], reason: str | None) -> None:
    store = store_with(body)
    namespace = body["metadata"]["namespace"]
    refused = filters.non_retryable(_pod(store, "p", namespace), _args(**args), store)
    assert (refused is None) == (reason is None), refused
    if reason is not None:
        assert reason in refused  # type: ignore[operator]


@pytest.mark.parametrize(
    ("replicas", "args", "refused"),
    [
        (1, {}, True),  # a single replica never moves
        (3, {}, False),
        (2, {"maxUnavailablePerWorkload": 2}, True),  # as many as may be unavailable
        (2, {"maxUnavailablePerWorkload": 2, "skipCheckExpectedReplicas": True}, False),
    ],
)
def test_expected_replicas(replicas: int, args: dict[str, Any], refused: bool) -> None:
    store = store_with(pod_body("p"), replica_sets={"rs": replicas})
    assert (filters.non_retryable(_pod(store, "p"), _args(**args), store) is not None) == refused


def test_a_job_waits_for_its_pods_replica_set_to_reach_the_cache_then_is_judged() -> None:
    """A pod's watch event can come before its new ReplicaSet's: the job waits instead of failing
    for good on replicas read as 0, and the expected-replicas check runs once the ReplicaSet is in."""
    store = Store()
    store.upsert_pod(pod_body("p", owner=("ReplicaSet", "rs", "rs-uid")))
    waiting = [job("j", "p")]
    store.upsert_job(waiting[0])
    verdict = arbitrate(waiting, _args(), store)
    assert not verdict.failed
    assert [(j.metadata.name, r) for j, r in verdict.waiting] == [
        ("j", "the pod's controller ReplicaSet rs is not in the caches yet")
    ]
    store.upsert_workload(KINDS[("apps", "ReplicaSet")], workload_body("ReplicaSet", "rs", "rs-uid", 1))
    verdict = arbitrate(waiting, _args(), store)
    assert [(j.metadata.name, "has 1 replicas" in r) for j, r in verdict.failed] == [("j", True)]
    store.upsert_workload(KINDS[("apps", "ReplicaSet")], workload_body("ReplicaSet", "rs", "rs-uid", 3))
    for name in ("q", "r"):
        store.upsert_pod(pod_body(name, owner=("ReplicaSet", "rs", "rs-uid")))
    assert [j.metadata.name for j in arbitrate(waiting, _args(), store).admitted] == ["j"]


# ---------------------------------------------------------------------- retryable filters


def test_max_migrating_per_node_counts_other_pods_on_the_node() -> None:
    # Bare pods: no workload cap gets in the way.
    store = store_with(*(pod_body(n, owner=None) for n in "abc"), pod_body("d", node="n2", owner=None))
    active = [job("j1", "b", phase="Running"), job("j2", "c", phase="Running")]
    args = _args()
    assert "maxMigratingPerNode is 2" in (filters.retryable(_pod(store, "a"), args, store, active) or "")
    assert filters.retryable(_pod(store, "d"), args, store, active) is None
    # The pod's own job does not count against it.
    assert (
        filters.retryable(_pod(store, "b"), _args(maxMigratingPerNode=2), store, active[:1] + active[:1])
        is None
    )


def test_max_migrating_globally_and_per_namespace() -> None:
    store = store_with(
        pod_body("a", node="n1", owner=None),
        pod_body("b", node="n2", owner=None),
        pod_body("c", node="n3", namespace="x", owner=None),
    )
    active = [job("j1", "b", phase="Running")]
    assert "maxMigratingGlobally" in (
        filters.retryable(_pod(store, "a"), _args(maxMigratingGlobally=1), store, active) or ""
    )
    assert "maxMigratingPerNamespace" in (
        filters.retryable(_pod(store, "a"), _args(maxMigratingPerNamespace=1), store, active) or ""
    )
    assert filters.retryable(_pod(store, "c", "x"), _args(maxMigratingPerNamespace=1), store, active) is None


def test_workload_caps_count_migrating_and_unavailable_pods_of_the_whole_deployment() -> None:
    pods = [
        pod_body(
            n,
            node=f"n{i}",
            owner=("ReplicaSet", "old" if i < 2 else "new", ("old" if i < 2 else "new") + "-uid"),
        )
        for i, n in enumerate("abcd")
    ]
    store = store_with(*pods, replica_sets={"old": 2, "new": 2}, deployment=4)
    args = _args(maxMigratingPerWorkload=1, maxUnavailablePerWorkload=2)
    # A migration in the other ReplicaSet counts (Koordinator only counts the same controller).
    active = [job("j1", "c", phase="Running")]
    assert "are migrating, maxMigrating is 1" in (
        filters.retryable(_pod(store, "a"), args, store, active) or ""
    )
    # Unavailable: a pod not Ready, plus a replica not there at all.
    store.upsert_pod(pod_body("b", node="n1", ready=False, owner=("ReplicaSet", "old", "old-uid")))
    store.delete_pod("default", "d")
    refusal = filters.retryable(_pod(store, "a"), _args(maxUnavailablePerWorkload=2), store, [])
    assert refusal is not None
    assert "2 pods of Deployment deploy are unavailable" in refusal
    assert filters.retryable(_pod(store, "a"), _args(maxUnavailablePerWorkload=3), store, []) is None


# ---------------------------------------------------------------------- sort and admission


def test_sort_puts_missing_pods_first_then_lower_priority_then_newer() -> None:
    store = store_with(
        pod_body("prod", priority=9500),
        pod_body("batch", priority=5500),
        pod_body("batch-new", priority=5500, created=later(60)),
        pod_body("free", priority=3500),
    )
    jobs = [job(f"j-{n}", n) for n in ("prod", "batch", "batch-new", "free", "gone")]
    ordered = sort_jobs(jobs, lambda j: store.pod("default", j.spec.pod_ref.name or ""), jobs)  # type: ignore[union-attr]
    assert [j.metadata.name for j in ordered] == ["j-gone", "j-free", "j-batch-new", "j-batch", "j-prod"]


def test_sort_groups_a_batch_jobs_pods_and_puts_the_most_migrating_job_first() -> None:
    store = store_with(
        pod_body("x1", priority=3500, owner=("Job", "x", "x-uid")),
        pod_body("y1", priority=3600, owner=("Job", "y", "y-uid")),
        pod_body("x2", priority=9500, owner=("Job", "x", "x-uid")),
        pod_body("y2", priority=3700, owner=("Job", "y", "y-uid")),
        pod_body("y3", priority=3000, owner=("Job", "y", "y-uid")),
    )
    waiting = [job(f"j-{n}", n) for n in ("x1", "y1", "x2", "y2")]
    running = job("j-y3", "y3", phase="Running")

    def pod_of(j: Any) -> Pod | None:
        return store.pod("default", j.spec.pod_ref.name)

    # Without migrations: x's jobs together at x1's slot (x1 has the lowest priority).
    assert [j.metadata.name for j in sort_jobs(waiting, pod_of, waiting)] == ["j-x1", "j-x2", "j-y1", "j-y2"]
    # y has a migration running: its jobs go first.
    assert [j.metadata.name for j in sort_jobs(waiting, pod_of, [*waiting, running])] == [
        "j-y1",
        "j-y2",
        "j-x1",
        "j-x2",
    ]


def test_arbitration_admits_greedily_fails_the_forbidden_and_keeps_the_rest_waiting() -> None:
    store = store_with(
        pod_body("a", priority=3500),
        pod_body("b", priority=5500),
        pod_body("bare", owner=None),
        replica_sets={"rs": 2},
    )
    waiting = [job("j-a", "a"), job("j-b", "b"), job("j-bare", "bare"), job("j-gone", "gone")]
    for j in waiting:
        store.upsert_job(j)
    verdict = arbitrate(waiting, _args(maxMigratingPerWorkload=1), store)
    # j-gone first (its pod is missing: the reconciler reports it), then j-a takes the workload's
    # only slot, so j-b waits; the bare pod's job fails for good.
    assert [j.metadata.name for j in verdict.admitted] == ["j-gone", "j-a"]
    assert [(j.metadata.name, "maxMigrating is 1" in r) for j, r in verdict.waiting] == [("j-b", True)]
    assert [(j.metadata.name, "bare pod" in r) for j, r in verdict.failed] == [("j-bare", True)]


def test_a_running_job_and_an_admitted_pending_one_count_but_a_finished_one_does_not() -> None:
    store = store_with(*(pod_body(n, owner=None) for n in "abc"))
    for j in (job("j-b", "b", phase="Succeeded", passed=True), job("j-c", "c", passed=True)):
        store.upsert_job(j)
    verdict = arbitrate([job("j-a", "a")], _args(maxMigratingPerNode=1, evictAllBarePods=True), store)
    assert [j.metadata.name for j, _ in verdict.waiting] == ["j-a"]  # j-c (admitted) counts
    failed = job("j-c", "c", phase="Failed", passed=True)
    failed.metadata.resource_version = "2"
    store.upsert_job(failed)
    verdict = arbitrate([job("j-a", "a")], _args(maxMigratingPerNode=1, evictAllBarePods=True), store)
    assert [j.metadata.name for j in verdict.admitted] == ["j-a"]


def test_an_evicted_pods_running_job_still_counts_against_its_node_and_workload() -> None:
    """Koordinator forgets a job once its pod is gone (bug 8): here it counts until it ends."""
    store = store_with(
        pod_body("a", node="n1"), pod_body("b", node="n1"), pod_body("c", node="n2"), replica_sets={"rs": 3}
    )
    running = job("j-a", "a", phase="Running", uid="a-uid")
    store.upsert_job(running)  # seen while its pod is there
    store.delete_pod("default", "a")  # evicted
    store.upsert_pod(pod_body("a-new", node="n2", ready=False))
    args = _args(maxMigratingPerNode=1, maxMigratingPerWorkload=1, maxUnavailablePerWorkload=3)
    refusal = filters.retryable(_pod(store, "b"), args, store, [running])
    assert refusal is not None
    assert "pods on node n1 are migrating" in refusal
    refusal = filters.retryable(_pod(store, "c"), args, store, [running])
    assert refusal is not None
    assert "1 pods of ReplicaSet rs are migrating, maxMigrating is 1" in refusal
    # Once the job is gone, nothing is remembered.
    store.delete_job("j-a")
    assert filters.retryable(_pod(store, "c"), args, store, [running]) is None
