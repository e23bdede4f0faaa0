"""The MigrationController over the caches with a fake API and eviction service: what the policy
side's Evict creates, what arbitration writes, what a reconcile does, and the per-round limits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apis.client.eviction import EvictionRequest
from apis.core import Node, Pod
from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation
from operators.descheduler.config import DeschedulerConfiguration, MigrationControllerArgs, ResolvedProfile
from operators.descheduler.framework import EvictOptions
from operators.descheduler.informers import Store
from operators.descheduler.migration import MigrationController
from operators.descheduler.runtime import EvictorProxy, Handle, Profile, RoundLimits, run_round
from tests.operators.descheduler.helpers import T0, job, later, pod_body, store_with

OPTIONS = EvictOptions(plugin_name="LowNodeLoad", reason="node is overutilized")


class FakeApi:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.created: list[dict[str, Any]] = []
        self.patches: list[tuple[str, dict[str, Any], bool]] = []
        self.reservations: dict[str, Reservation] = {}
        self.deleted_reservations: list[str] = []
        self.deleted_jobs: list[str] = []
        self.api_server_pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.listed_pods: list[tuple[str, str]] = []

    async def create_job(self, body: dict[str, Any]) -> PodMigrationJob:
        self.created.append(body)
        meta = {
            **body["metadata"],
            "uid": body["metadata"]["name"] + "-uid",
            "resourceVersion": "1",
            "creationTimestamp": T0.isoformat(),
        }
        return PodMigrationJob.model_validate({**body, "metadata": meta})

    async def patch_job(self, name: str, patch: dict[str, Any], *, status: bool = False) -> PodMigrationJob:
        self.patches.append((name, patch, status))
        current = self.store.job(name)
        assert current is not None
        body = current.model_dump(by_alias=True, exclude_none=True, mode="json")
        for key, value in patch.items():
            if key == "metadata":
                body["metadata"]["annotations"] = {
                    **body["metadata"].get("annotations", {}),
                    **value["annotations"],
                }
            elif key == "spec":
                body["spec"] = {**body["spec"], **value}
            else:
                body[key] = value
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        return PodMigrationJob.model_validate(body)

    async def delete_job(self, name: str) -> None:
        self.deleted_jobs.append(name)

    async def get_reservation(self, name: str) -> Reservation | None:
        return self.reservations.get(name)

    async def create_reservation(self, body: dict[str, Any]) -> Reservation:
        reservation = Reservation.model_validate(body)
        self.reservations[body["metadata"]["name"]] = reservation
        return reservation

    async def delete_reservation(self, name: str) -> None:
        self.deleted_reservations.append(name)

    async def scale_replicas(self, api_version: str, kind: str, namespace: str, name: str) -> int:
        return 0

    async def list_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.listed_pods.append((namespace, name))
        return self.api_server_pods.get((namespace, name))


class FakeEvictions:
    def __init__(self, answer: bool = True) -> None:
        self.requests: list[EvictionRequest] = []
        self.answer = answer

    async def evict(self, request: EvictionRequest) -> bool:
        self.requests.append(request)
        return self.answer


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _controller(
    store: Store, clock: Clock | None = None, **args: Any
) -> tuple[MigrationController, FakeApi, FakeEvictions]:
    api, evictions = FakeApi(store), FakeEvictions()
    controller = MigrationController(
        MigrationControllerArgs.model_validate(args),
        store,
        api,  # type: ignore[arg-type]
        evictions,
        clock=clock or Clock(),
        now=lambda: later(1),
    )
    return controller, api, evictions


def _pod(store: Store, name: str) -> Pod:
    pod = store.pod("default", name)
    assert pod is not None
    return pod


def test_evict_creates_a_pending_job_with_koordinators_annotations_and_sees_it_at_once() -> None:
    store = store_with(pod_body("a"), pod_body("b"), pod_body("c"), replica_sets={"rs": 3})
    controller, api, _ = _controller(store)
    assert asyncio.run(controller.evict(_pod(store, "a"), OPTIONS))
    [body] = api.created
    assert body["metadata"]["annotations"] == {
        "koordinator.sh/evict-reason": "node is overutilized",
        "koordinator.sh/evict-trigger": "LowNodeLoad",
        "koordinator.sh/job-created-by": controller.id,
    }
    assert body["spec"] == {
        "paused": False,
        "ttl": "5m",
        "mode": "ReservationFirst",
        "podRef": {"namespace": "default", "name": "a", "uid": "a-uid"},
    }
    # The new job is in the cache: the same pod is refused, and so is another pod of the
    # 3-replica workload (maxMigrating 1) within the same round.
    assert not controller.filter(_pod(store, "a"))
    assert "maxMigrating is 1" in (controller.refusal(_pod(store, "b")) or "")


def test_evict_with_a_placed_reservation_makes_a_reservation_first_job_that_uses_it() -> None:
    store = store_with(pod_body("a"), pod_body("b"), pod_body("c"), replica_sets={"rs": 3})
    controller, api, _ = _controller(store, defaultJobMode="EvictDirectly")
    options = EvictOptions(plugin_name="GangDefragmentation", reason="frees block b0", reservation="plan-1-a")
    assert asyncio.run(controller.evict(_pod(store, "a"), options))
    [body] = api.created
    assert body["spec"]["mode"] == "ReservationFirst"
    assert body["spec"]["reservationOptions"] == {"reservationRef": {"name": "plan-1-a"}}


def test_evict_refuses_without_creating_a_job() -> None:
    store = store_with(
        pod_body("bare", owner=None), pod_body("other", scheduler="default-scheduler"), replica_sets={"rs": 3}
    )
    controller, api, _ = _controller(store)
    assert not asyncio.run(controller.evict(_pod(store, "bare"), OPTIONS))
    assert "schedulerNames" in (controller.refusal(_pod(store, "other")) or "")
    assert api.created == []
    dry, dry_api, _ = _controller(store, dryRun=True)
    assert asyncio.run(dry.evict(_pod(store, "bare"), OPTIONS))  # a dry run says yes and creates nothing
    assert dry_api.created == []


def test_arbitration_writes_the_passed_annotation_or_fails_the_job() -> None:
    store = store_with(
        pod_body("a"), pod_body("a2"), pod_body("a3"), pod_body("bare", owner=None), replica_sets={"rs": 3}
    )
    for j in (job("j-a", "a"), job("j-bare", "bare"), job("j-done", "a", phase="Succeeded")):
        store.upsert_job(j)
    controller, api, _ = _controller(store)
    asyncio.run(controller.arbitrate_once())
    assert (
        "j-a",
        {"metadata": {"annotations": {"descheduler.koordinator.sh/passed-arbitration": "true"}}},
        False,
    ) in api.patches
    [(_name, patch, status)] = [p for p in api.patches if p[0] == "j-bare"]
    assert status
    assert patch["status"]["phase"] == "Failed"
    assert patch["status"]["reason"] == "ForbiddenMigratePod"
    assert not any(p[0] == "j-done" for p in api.patches)
    assert store.job("j-a").metadata.annotations["descheduler.koordinator.sh/passed-arbitration"] == "true"  # type: ignore[union-attr,index]


def test_reconcile_evicts_through_the_eviction_service_with_the_policy_and_paces_by_evict_qps() -> None:
    store = store_with(
        pod_body("a"),
        pod_body("b", owner=None, labels={"koordinator.sh/evict-policy": "Delete"}),
        replica_sets={"rs": 10},
    )
    store.upsert_job(job("j-a", "a", phase="Running", mode="EvictDirectly", uid="a-uid"))
    store.upsert_job(job("j-b", "b", phase="Running", mode="EvictDirectly", uid="b-uid"))
    clock = Clock()
    controller, api, evictions = _controller(store, clock, evictQPS=0.5, evictBurst=1)
    assert asyncio.run(controller.reconcile("j-a")) == 3.0
    [request] = evictions.requests
    assert request.pod.pod.metadata.name == "a"
    assert not request.delete
    assert not request.soft
    assert "PodMigrationJob j-a" in request.message
    # The bucket is empty: j-b waits without writing anything.
    writes = len(api.patches)
    assert asyncio.run(controller.reconcile("j-b")) == 2.0
    assert len(evictions.requests) == 1
    assert len(api.patches) == writes
    clock.t = 2.0
    asyncio.run(controller.reconcile("j-b"))
    assert evictions.requests[-1].delete  # the pod's evict-policy label
    # Each eviction spent a token of the workload's limiter (10 replicas: 2 per 5m, burst 1).
    assert not controller.limiter.allows(_pod(store, "a"), store.workload_of(_pod(store, "a")), 2.0)


def test_a_job_listed_before_its_pod_asks_the_api_server_instead_of_failing_missing_pod() -> None:
    """A descheduler that just started may see a job before its pod watch lists the pod: the job
    goes on with the pod the API server has; only a pod the API server lacks too fails the job."""
    store = store_with(replica_sets={"rs": 3})
    for name in ("j-late", "j-gone"):
        store.upsert_job(job(name, name.removeprefix("j-"), passed=True))
    controller, api, _ = _controller(store)
    api.api_server_pods[("default", "late")] = pod_body("late", owner=None)
    asyncio.run(controller.reconcile("j-late"))
    late = store.job("j-late")
    assert late is not None
    assert late.status is None or late.status.reason != "MissingPod", late.status
    assert store.pod("default", "late") is not None
    asyncio.run(controller.reconcile("j-gone"))
    gone = store.job("j-gone")
    assert gone is not None
    assert gone.status is not None
    assert (gone.status.phase, gone.status.reason) == ("Failed", "MissingPod")
    assert api.listed_pods == [("default", "late"), ("default", "gone")]


def test_reconcile_reservation_first_creates_the_reservation_named_after_the_job() -> None:
    store = store_with(pod_body("a"), replica_sets={"rs": 3})
    store.upsert_job(job("j-a", "a", phase="Running", uid="a-uid"))
    controller, api, evictions = _controller(store)
    asyncio.run(controller.reconcile("j-a"))
    assert list(api.reservations) == ["j-a-uid"]
    assert store.job("j-a").spec.reservation_options.reservation_ref.name == "j-a-uid"  # type: ignore[union-attr]
    assert evictions.requests == []


def test_the_scavenger_deletes_old_jobs_and_the_reservations_it_created() -> None:
    store = Store()
    old = job("old", "a", phase="Succeeded", ttl="5m", reservation="old-uid", created=later(-700))
    user = job("user", "a", phase="Failed", ttl=None, reservation="theirs", created=later(-1900))
    young = job("young", "a", phase="Succeeded", ttl="5m", created=later(-10))
    for j in (old, user, young):
        store.upsert_job(j)
    controller, api, _ = _controller(store)
    asyncio.run(controller.scavenge_once())
    assert sorted(api.deleted_jobs) == ["old", "user"]
    assert api.deleted_reservations == ["old-uid"]  # "theirs" was named by the user


# ---------------------------------------------------------------------- rounds


class Recorder:
    name = "Recorder"

    def __init__(self, handle: Handle, victims: list[str]) -> None:
        self.handle = handle
        self.victims = victims
        self.seen: list[list[str]] = []
        self.evicted: list[bool] = []

    async def balance(self, nodes: list[Node]) -> None:
        self.seen.append([n.metadata.name or "" for n in nodes])
        for node in nodes:
            for pod in self.handle.pods_on_node(node.metadata.name or ""):
                if pod.metadata.name in self.victims:
                    self.evicted.append(await self.handle.evictor.evict(pod, OPTIONS))


def _node(name: str, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}]},
    }


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (RoundLimits(), [True, True, True]),
        (RoundLimits(per_node=1), [True, False, True]),
        (RoundLimits(total=2), [True, True, False]),
        (RoundLimits(per_namespace=1), [True, False, False]),
    ],
)
def test_a_round_runs_balance_plugins_on_ready_selected_nodes_within_the_round_limits(
    limits: RoundLimits, expected: list[bool]
) -> None:
    store = store_with(
        pod_body("a", node="n1", owner=None),
        pod_body("b", node="n1", owner=None),
        pod_body("c", node="n2", owner=None),
    )
    for node in (_node("n1"), _node("n2"), _node("n3", ready=False), _node("other", labels={"pool": "x"})):
        store.upsert_node(node)
    controller, api, _ = _controller(
        store, evictAllBarePods=True, maxMigratingPerNode=5, defaultJobMode="EvictDirectly"
    )
    config = DeschedulerConfiguration.model_validate(
        {"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}}
    )
    proxy = EvictorProxy(controller, limits, dry_run=False)
    plugin = Recorder(Handle(store, proxy, None, None), ["a", "b", "c"])
    resolved = ResolvedProfile(
        name="p", node_selector=None, deschedule=[], balance=["Recorder"], evict=[], filter=[], args={}
    )
    assert asyncio.run(run_round(config, store, [Profile(resolved, plugin.handle, [], [plugin])], limits))
    assert plugin.seen == [["n1", "n2"]]
    assert plugin.evicted == expected
    assert len(api.created) == sum(expected)
    # The counts cover one round.
    assert asyncio.run(run_round(config, store, [Profile(resolved, plugin.handle, [], [plugin])], limits))


def test_a_round_with_one_ready_node_is_skipped_and_the_global_dry_run_creates_nothing() -> None:
    store = store_with(pod_body("a", node="n1", owner=None))
    store.upsert_node(_node("n1"))
    controller, api, _ = _controller(store, evictAllBarePods=True)
    limits = RoundLimits(total=1)
    proxy = EvictorProxy(controller, limits, dry_run=True)
    plugin = Recorder(Handle(store, proxy, None, None), ["a"])
    resolved = ResolvedProfile(
        name="p", node_selector=None, deschedule=[], balance=["Recorder"], evict=[], filter=[], args={}
    )
    config = DeschedulerConfiguration()
    assert not asyncio.run(run_round(config, store, [Profile(resolved, plugin.handle, [], [plugin])], limits))
    store.upsert_node(_node("n2"))
    assert asyncio.run(run_round(config, store, [Profile(resolved, plugin.handle, [], [plugin])], limits))
    assert plugin.evicted == [True]
    assert api.created == []
    assert limits.allows(_pod(store, "a")) is not None  # the dry run still counted


@pytest.mark.parametrize(
    ("policy", "soft", "delete"),
    [("Eviction", False, False), ("SoftEviction", True, False), ("Delete", False, True)],
)
def test_the_eviction_policy_picks_how_the_service_evicts(policy: str, soft: bool, delete: bool) -> None:
    store = store_with(pod_body("a", owner=None))
    store.upsert_job(job("j-a", "a", phase="Running", mode="EvictDirectly", uid="a-uid"))
    controller, _, evictions = _controller(store, evictionPolicy=policy)
    asyncio.run(controller.reconcile("j-a"))
    [request] = evictions.requests
    assert (request.soft, request.delete) == (soft, delete)
