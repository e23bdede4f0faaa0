"""PodInfos made as the backend decodes the pods (``scheduler.cache.decode_ahead``) are the ones
the informer handles: a list's pods are not decoded a second time after the list."""

from __future__ import annotations

from typing import Any

import pytest

from apis.client.backend import EventType, WatchEvent
from apis.core import Node, Pod
from scheduler.backend.memory import MemoryBackend
from scheduler.cache import pod_info
from scheduler.cache.cache import Cache
from scheduler.cache.decode_ahead import DecodedAhead, decode_ahead, take_decoded
from scheduler.cache.pod_info import PodInfo
from scheduler.events import EventHandlers
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Status
from scheduler.queue.scheduling_queue import SchedulingQueue


def pod(name: str, node: str | None = None) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return Pod.model_validate(
        {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    )


def test_a_transformed_pod_is_taken_once_with_its_podinfo() -> None:
    ahead = DecodedAhead()
    a = ahead.transform(pod("a"))
    ahead.transform(pod("b"))
    taken = ahead.take([a])
    assert list(taken) == [id(a)]
    assert taken[id(a)].pod is a
    assert taken[id(a)].requests == {"cpu": 500, "memory": 1024**3, "pods": 1}
    assert ahead.take([a]) == {}  # taken once
    assert len(ahead) == 1  # b's still waits for its event


def test_a_whole_list_forgets_the_pods_of_lists_abandoned_midway() -> None:
    ahead = DecodedAhead()
    ahead.transform(pod("of-a-list-that-failed"))
    listed = ahead.transform(pod("a"))
    assert list(ahead.take([listed], forget_the_rest=True)) == [id(listed)]
    assert len(ahead) == 0


def test_a_pod_whose_podinfo_fails_is_still_shared_and_left_to_the_informer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(cls: type[PodInfo], p: Pod) -> PodInfo:
        raise ValueError("a bug in decoding")

    monkeypatch.setattr(PodInfo, "_decode", classmethod(broken))
    ahead = DecodedAhead()
    first, second = pod("a"), pod("b")
    assert ahead.transform(first) is first
    ahead.transform(second)
    assert len(ahead) == 0
    assert second.spec.containers is first.spec.containers  # shared all the same


def _handlers() -> EventHandlers:
    queue = SchedulingQueue(
        sort_key=lambda p: (p.key,),
        pre_enqueue=lambda p: Status(),
        plugin_events=lambda name: ClusterEvent.ALL,
    )
    return EventHandlers(
        backend=MemoryBackend(), cache=Cache(), queue=queue, scheduler_names=("koord-scheduler",)
    )


def test_the_informer_handles_the_podinfos_made_as_the_pods_were_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = _handlers()
    node = Node.model_validate(
        {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
    )
    h.handle_node_event(WatchEvent(EventType.REPLACED, objects=(node,)))
    decoded_again: list[Pod] = []
    decode = PodInfo._decode.__func__  # type: ignore[attr-defined]

    def counting(cls: type[PodInfo], p: Pod) -> PodInfo:
        decoded_again.append(p)
        result: PodInfo = decode(cls, p)
        return result

    bound, pending = decode_ahead(pod("a", node="n1")), decode_ahead(pod("b"))
    with monkeypatch.context() as patched:
        patched.setattr(PodInfo, "_decode", classmethod(counting))
        h.handle_pod_event(WatchEvent(EventType.REPLACED, objects=(bound, pending)))
    assert decoded_again == []
    assert h.cache.nodes["n1"].pods["uid-a"].pod is bound
    assert [qp.pod.pod for qp in h.queue.pending()] == [pending]
    moved = decode_ahead(pod("a", node="n1"))  # its next version, decoded from a watch event
    with monkeypatch.context() as patched:
        patched.setattr(PodInfo, "_decode", classmethod(counting))
        h.handle_pod_event(WatchEvent(EventType.MODIFIED, obj=moved))
    assert decoded_again == []
    assert h.cache.nodes["n1"].pods["uid-a"].pod is moved
    assert take_decoded([bound, pending, moved]) == {}
    assert pod_info._DECODED.get() is None
