"""KubernetesBackend and LeaderElector against the real local API server (kube-apiserver, etcd, KWOK).

Each test connects its own backend (so nothing depends on pytest-asyncio's loop scope) and works in
its own namespace or with uniquely named objects. kubectl runs in a thread so the event loop keeps
reading the watch streams meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from apis.client.backend import (
    NODES,
    PODGROUPS,
    PODS,
    BackendError,
    Conflict,
    EventRecord,
    EventType,
    NotFound,
    ObjectRef,
    ResourceType,
    WatchEvent,
)
from apis.client.kubernetes import KubernetesBackend
from apis.client.leader import LeaderElectionError, LeaderElector
from apis.client.lease import KubernetesLeaseStore
from apis.client.watch import Gone as _Gone
from apis.core import Node, Pod
from apis.scheduling.podgroup import PodGroup
from e2e.cluster.controlplane import ControlPlane
from e2e.workloads import get_object, list_items

TIMEOUT = 30.0
T = TypeVar("T", bound=BaseModel)


@asynccontextmanager
async def connected(cp: ControlPlane, cls: type[KubernetesBackend] = KubernetesBackend) -> AsyncIterator[Any]:
    backend = await cls.connect(cp.kubeconfig)
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"kb-{secrets.token_hex(4)}"
    control_plane.create_namespace(name)
    # The service account controller must create `default` before pods can be admitted.
    deadline = time.monotonic() + TIMEOUT
    while control_plane.read("serviceaccount", "default", namespace=name) is None:
        assert time.monotonic() < deadline, f"namespace {name} never got its default service account"
        time.sleep(0.2)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def pod_manifest(name: str, namespace: str, **labels: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "schedulerName": "unserved-scheduler",  # no scheduler serves it: the test binds it
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                ],
                "terminationGracePeriodSeconds": 0,
            },
        }
    )


async def kubectl(cp: ControlPlane, *args: str, input: str | None = None, check: bool = True) -> str:
    return await asyncio.to_thread(cp.kubectl, *args, input=input, check=check)


async def create_pod(cp: ControlPlane, name: str, namespace: str, **labels: str) -> Pod:
    await kubectl(cp, "apply", "-f", "-", input=pod_manifest(name, namespace, **labels))
    return await get_pod(cp, name, namespace)


async def get_pod(cp: ControlPlane, name: str, namespace: str) -> Pod:
    return Pod.model_validate(await asyncio.to_thread(get_object, cp, "pod", name, namespace=namespace))


async def next_event(
    stream: AsyncIterator[WatchEvent[T]], accept: Callable[[WatchEvent[T]], bool] = lambda e: True
) -> WatchEvent[T]:
    """The next event ``accept`` takes (others, e.g. status updates by KWOK, are skipped)."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            event = await anext(stream)
            if accept(event):
                return event


def about(name: str, *types: EventType) -> Callable[[WatchEvent[Any]], bool]:
    return lambda e: e.obj is not None and e.obj.metadata.name == name and (not types or e.type in types)


async def wait_until(predicate: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not await asyncio.to_thread(predicate):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


async def test_watch_lists_the_nodes_first(control_plane: ControlPlane) -> None:
    expected = {n["metadata"]["name"] for n in list_items(control_plane, "nodes")}
    async with connected(control_plane) as backend:
        backend._page_size = 3  # several pages for the paginated list
        stream = backend.watch(NODES)
        first = await next_event(stream)
        assert first.type is EventType.REPLACED
        assert all(isinstance(n, Node) for n in first.objects)
        assert {n.metadata.name for n in first.objects} == expected
        assert len(first.objects) == len(expected)
        assert all(n.status.allocatable for n in first.objects)


async def test_watch_streams_a_pods_lifecycle(control_plane: ControlPlane, namespace: str) -> None:
    async with connected(control_plane) as backend:
        stream = backend.watch(PODS, field_selector=f"metadata.namespace={namespace}")
        first = await next_event(stream)
        assert first.type is EventType.REPLACED
        assert first.objects == ()

        await kubectl(control_plane, "apply", "-f", "-", input=pod_manifest("lifecycle", namespace))
        added = await next_event(stream, about("lifecycle"))
        assert added.type is EventType.ADDED
        assert isinstance(added.obj, Pod)
        assert added.obj.spec.scheduler_name == "unserved-scheduler"
        added_version = int(added.obj.metadata.resource_version or 0)

        await kubectl(control_plane, "label", "pod", "lifecycle", "-n", namespace, "step=two")
        modified = await next_event(stream, about("lifecycle", EventType.MODIFIED, EventType.DELETED))
        assert modified.type is EventType.MODIFIED
        assert modified.obj is not None
        assert modified.obj.metadata.labels == {"step": "two"}
        assert int(modified.obj.metadata.resource_version or 0) > added_version

        await kubectl(control_plane, "delete", "pod", "lifecycle", "-n", namespace, "--wait=false")
        deleted = await next_event(stream, about("lifecycle", EventType.DELETED))
        assert deleted.obj is not None
        assert deleted.obj.metadata.uid == added.obj.metadata.uid


async def test_a_streamed_first_pod_list_holds_what_kubectl_lists_and_the_watch_goes_on(
    control_plane: ControlPlane, namespace: str
) -> None:
    """The first list of a ``paged_lists`` resource is one resourceVersion=0 response from the
    watch cache, cut into pages as it comes (a byte a page here, so it is cut at every pod): it
    holds the pods kubectl lists, as they are, and the watch from its resourceVersion sees what is
    created next. (Not compared with this backend's paginated list: kube-apiserver v1.35.4 answers
    a paginated list with a namespace field selector with its first page twice.)"""
    names = [f"listed-{i}" for i in range(7)]
    await kubectl(
        control_plane, "apply", "-f", "-", input="\n".join(pod_manifest(n, namespace) for n in names)
    )
    listed = await asyncio.to_thread(list_items, control_plane, "pods", namespace=namespace)
    wanted = [(p["metadata"]["name"], p["metadata"]["uid"], p["metadata"]["resourceVersion"]) for p in listed]
    assert [name for name, _, _ in wanted] == names
    async with connected(control_plane) as backend:
        backend._paged_lists = frozenset({PODS})
        backend._page_wait = 0.0
        backend._list_batch_bytes = 1
        stream = backend.watch(PODS, field_selector=f"metadata.namespace={namespace}")
        pages: list[Pod] = []
        while (event := await next_event(stream)).type is EventType.LISTED:
            pages.extend(event.objects)
        assert event.type is EventType.REPLACED
        got = [(p.metadata.name, p.metadata.uid, p.metadata.resource_version) for p in event.objects]
        assert got == wanted
        assert len(pages) == len(names) - 1  # every pod but the last, which comes with the REPLACED
        assert all(a is b for a, b in zip(pages, event.objects, strict=False))
        await kubectl(control_plane, "apply", "-f", "-", input=pod_manifest("after", namespace))
        added = await next_event(stream, about("after"))
        assert added.type is EventType.ADDED


async def test_watch_decodes_custom_resources(control_plane: ControlPlane, namespace: str) -> None:
    async with connected(control_plane) as backend:
        stream = backend.watch(PODGROUPS, field_selector=f"metadata.namespace={namespace}")
        assert (await next_event(stream)).type is EventType.REPLACED
        group = {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": namespace},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60},
        }
        await kubectl(control_plane, "apply", "-f", "-", input=json.dumps(group))
        added = await next_event(stream, about("gang"))
        assert added.type is EventType.ADDED
        assert isinstance(added.obj, PodGroup)
        assert added.obj.spec is not None
        assert added.obj.spec.min_member == 4


class GoneOnce(KubernetesBackend):
    """The test hook for 410: the first watch request answers Gone, as when the resourceVersion fell
    out of the API server's watch cache (which a test cannot make happen on demand)."""

    injected = False

    async def _stream(
        self, resource: ResourceType[Any], field_selector: str | None, rv: str
    ) -> AsyncGenerator[Any, None]:
        if not self.injected:
            self.injected = True
            raise _Gone(f"injected by the test at resourceVersion {rv}")
        # aclosing: when the backend closes this generator, the real stream inside closes at once
        # too (its connection), instead of whenever the garbage collector finds it.
        async with aclosing(super()._stream(resource, field_selector, rv)) as inner:
            async for item in inner:
                yield item


async def test_410_relists_from_the_server_and_reports_replaced(
    control_plane: ControlPlane, namespace: str
) -> None:
    await create_pod(control_plane, "before", namespace)
    async with connected(control_plane, GoneOnce) as backend:
        stream = backend.watch(PODS, field_selector=f"metadata.namespace={namespace}")
        first = await next_event(stream)
        assert [p.metadata.name for p in first.objects] == ["before"]
        # Changes while the watch is down (the relist must carry them, no event is lost).
        await kubectl(control_plane, "delete", "pod", "before", "-n", namespace, "--wait=false")
        await wait_until(
            lambda: control_plane.read("pod", "before", namespace=namespace) is None,
            "pod before to be gone",
        )
        await create_pod(control_plane, "during", namespace)

        relisted = await next_event(stream)
        assert relisted.type is EventType.REPLACED
        assert [p.metadata.name for p in relisted.objects] == ["during"]
        assert backend.stats.relists == 1
        assert backend.stats.lists == 2

        # The watch resumed from the relist's resourceVersion.
        await create_pod(control_plane, "after", namespace)
        added = await next_event(stream, about("after"))
        assert added.type is EventType.ADDED


async def test_bind_patch_and_conflicts(control_plane: ControlPlane, namespace: str) -> None:
    async with connected(control_plane) as backend:
        pod = await create_pod(control_plane, "bind-me", namespace)
        assert pod.spec.node_name is None

        await backend.patch_pod(pod, {"metadata": {"annotations": {"koordinator-py/test": "prebind"}}})
        await backend.patch_pod_status(
            pod,
            {
                "status": {
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
                }
            },
        )
        patched = await get_pod(control_plane, "bind-me", namespace)
        assert (patched.metadata.annotations or {}).get("koordinator-py/test") == "prebind"
        assert [(c.type, c.status) for c in patched.status.conditions or []] == [("PodScheduled", "False")]

        await backend.bind(pod, "cpu-0")
        bound = await get_pod(control_plane, "bind-me", namespace)
        assert bound.spec.node_name == "cpu-0"
        assert {c.type: c.status for c in bound.status.conditions or []}["PodScheduled"] == "True"

        with pytest.raises(Conflict, match="already assigned") as info:
            await backend.bind(pod, "cpu-1")
        assert info.value.status == 409

        with pytest.raises(NotFound):
            await backend.bind(Pod.model_validate(json.loads(pod_manifest("ghost", namespace))), "cpu-0")

        # A pod deleted and recreated under the same name is not bound through the stale object.
        stale = await create_pod(control_plane, "recreated", namespace)
        await kubectl(control_plane, "delete", "pod", "recreated", "-n", namespace, "--wait=true")
        fresh = await create_pod(control_plane, "recreated", namespace)
        assert fresh.metadata.uid != stale.metadata.uid
        with pytest.raises(Conflict):
            await backend.bind(stale, "cpu-0")
        assert (await get_pod(control_plane, "recreated", namespace)).spec.node_name is None


async def test_record_event_shows_in_kubectl(control_plane: ControlPlane, namespace: str) -> None:
    async with connected(control_plane) as backend:
        pod = await create_pod(control_plane, "eventful", namespace)
        await backend.record_event(
            EventRecord(
                regarding=ObjectRef(kind="Pod", namespace=namespace, name="eventful", uid=pod.metadata.uid),
                type="Warning",
                reason="FailedScheduling",
                message="0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
            )
        )
    listed = json.loads(await kubectl(control_plane, "get", "events", "-n", namespace, "-o", "json"))["items"]
    ours = [e for e in listed if e.get("reason") == "FailedScheduling"]
    assert len(ours) == 1
    assert ours[0]["involvedObject"]["name"] == "eventful"
    assert ours[0]["involvedObject"]["uid"] == pod.metadata.uid
    assert ours[0]["message"] == "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    assert ours[0]["type"] == "Warning"
    assert ours[0]["reportingComponent"] == "koord-scheduler"
    described = await kubectl(control_plane, "describe", "pod", "eventful", "-n", namespace)
    assert "FailedScheduling" in described


async def test_evict_respects_the_budget_then_removes_the_pod(
    control_plane: ControlPlane, namespace: str
) -> None:
    async with connected(control_plane) as backend:
        pod = await create_pod(control_plane, "victim", namespace, app="victim")
        await backend.bind(pod, "cpu-1")
        await wait_until(
            lambda: (
                '"Running"' in json.dumps(get_object(control_plane, "pod", "victim", namespace=namespace))
            ),
            "KWOK to run the pod",
        )
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep-victim", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "victim"}}},
        }
        await kubectl(control_plane, "apply", "-f", "-", input=json.dumps(budget))
        with pytest.raises(BackendError) as info:
            await backend.evict(pod, grace_period_seconds=0)
        assert info.value.status == 429

        await kubectl(control_plane, "delete", "pdb", "keep-victim", "-n", namespace)
        await backend.evict(pod, grace_period_seconds=0)
        await wait_until(
            lambda: control_plane.read("pod", "victim", namespace=namespace) is None,
            "the evicted pod to disappear",
        )
        with pytest.raises(NotFound):
            await backend.evict(pod)


LEASE_LONGER_THAN_ANY_WAIT = 3 * TIMEOUT


async def test_leader_election_hands_over_on_release(control_plane: ControlPlane) -> None:
    lease = f"koord-scheduler-{secrets.token_hex(4)}"
    timeline: list[str] = []
    async with connected(control_plane) as backend:

        def elector(identity: str) -> LeaderElector:
            return LeaderElector(
                KubernetesLeaseStore(backend.api_client, namespace="kube-system", name=lease),
                identity=identity,
                # Longer than this test waits for anything: b can only lead because a let go.
                lease_duration=LEASE_LONGER_THAN_ANY_WAIT,
                renew_deadline=10,
                retry_period=0.5,
            )

        def work(name: str) -> Callable[[], Any]:
            async def lead() -> None:
                timeline.append(f"{name} started")
                await asyncio.Event().wait()

            return lead

        a = asyncio.ensure_future(elector("a").run(work("a"), lambda: timeline.append("a stopped")))
        await wait_until(lambda: timeline == ["a started"], "a to lead")
        b = asyncio.ensure_future(elector("b").run(work("b"), lambda: timeline.append("b stopped")))
        await asyncio.sleep(2)
        assert timeline == ["a started"]
        spec = get_object(control_plane, "lease", lease, namespace="kube-system")["spec"]
        assert spec["holderIdentity"] == "a"

        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        # Within TIMEOUT, far inside the lease's duration: at b's next retry after a released the
        # Lease, not once it expired.
        await wait_until(lambda: timeline[-1:] == ["b started"], "b to take over")
        assert timeline == ["a started", "a stopped", "b started"]
        spec = get_object(control_plane, "lease", lease, namespace="kube-system")["spec"]
        assert spec["holderIdentity"] == "b"
        assert spec["leaseTransitions"] == 1
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
    control_plane.kubectl("delete", "lease", lease, "-n", "kube-system", check=False)


async def test_leader_election_fails_clearly_without_its_namespace(control_plane: ControlPlane) -> None:
    async with connected(control_plane) as backend:
        missing = f"missing-{secrets.token_hex(4)}"
        elector = LeaderElector(KubernetesLeaseStore(backend.api_client, missing, "koord-scheduler"))

        async def never() -> None:
            raise AssertionError("must not lead")

        with pytest.raises(LeaderElectionError, match="does not exist"):
            await asyncio.wait_for(elector.run(never, lambda: None), TIMEOUT)
