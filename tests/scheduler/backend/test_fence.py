"""FencedBackend: a term's writes pass until the fence closes, then none reaches the cluster."""

from __future__ import annotations

import pytest

from apis.client.backend import NODES, PODS, EventRecord, ObjectRef
from apis.core import Pod
from scheduler.backend.fence import Fenced, FencedBackend
from scheduler.backend.memory import MemoryBackend


def pod(name: str) -> Pod:
    return Pod.model_validate(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    )


async def test_writes_pass_until_fenced_then_none_is_sent() -> None:
    cluster = MemoryBackend()
    cluster.apply(NODES, {"metadata": {"name": "n0"}})
    first, second = cluster.apply(PODS, pod("a")), cluster.apply(PODS, pod("b"))
    term = FencedBackend(cluster, "term 1")
    await term.bind(first, "n0")
    event = EventRecord(regarding=ObjectRef(kind="Pod", name="a"), reason="Scheduled", message="bound")
    await term.record_event(event)

    term.fence()
    with pytest.raises(Fenced, match="term 1 has ended"):
        await term.bind(second, "n0")
    with pytest.raises(Fenced):
        await term.patch_pod_status(second, {"status": {}})
    with pytest.raises(Fenced):
        await term.evict(first)
    with pytest.raises(Fenced):
        await term.delete_pod(first)
    await term.record_event(event)  # dropped, never raised
    assert cluster.bindings == [("default/a", "n0")]
    assert len(cluster.events) == 1
    assert term.refused == 5

    await term.close()  # the cluster outlives the term
    assert cluster.get(PODS, "default", "b") is not None
