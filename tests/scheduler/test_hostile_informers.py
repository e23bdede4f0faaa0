"""A hostile object in an informer's initial list is skipped with an explanation and the rest of
the list goes on: the stalling ``resource-status`` pod of issue 35 first in the list, next to a pod
whose CPUs must still be held and healthy pods that must still bind.

The work is bounded by counting what the CPU-list parser builds (never by timing it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.client.backend import NODES, PODS, EventType, WatchEvent, each
from apis.core import Pod
from apis.cpulist import MAX_CPUS
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS
from scheduler.backend.memory import MemoryBackend
from tests.apis.test_cpulist import counted
from tests.scheduler.reservation.harness import bound, node, pod, start, stop_app, until

STALLING = json.dumps({"cpuset": ",".join(["0-1048575"] * 26_000)})  # about 256 KiB, the API server's limit
HEALTHY_STATUS = json.dumps({"cpuset": "0-1"})


def _bound_with_status(name: str, status: str) -> dict[str, Any]:
    return pod(name, cpu="2", node_name="n1", annotations={ANNOTATION_RESOURCE_STATUS: status})


async def test_the_stalling_pod_first_in_the_initial_list_is_skipped_and_the_rest_goes_on() -> None:
    assert len(STALLING) > 250_000
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="16", memory="64Gi"))
    backend.apply(PODS, _bound_with_status("stalling", STALLING))  # first in the list
    backend.apply(PODS, _bound_with_status("pinned", HEALTHY_STATUS))
    for i in range(3):
        backend.apply(PODS, pod(f"healthy-{i}", cpu="1"))
    with counted() as work:
        app, stop, task = await start(backend)
        try:
            await until(lambda: all(bound(backend).get(f"healthy-{i}") == "n1" for i in range(3)))
            numa = app.frameworks["koord-scheduler"].plugins["NodeNUMAResource"]
            records = numa.store.records  # type: ignore[attr-defined]
            assert "uid-stalling" not in records  # not counted as holding a million CPUs
            assert set(records["uid-pinned"].cpus) == {0, 1}  # the pod after it is still held
            warnings = [e for e in backend.events if e.regarding.name == "stalling" and e.type == "Warning"]
            assert len(warnings) == 1
            assert f"{ANNOTATION_RESOURCE_STATUS} not counted" in (warnings[0].message or "")
            assert "CPU ids stop at 8191" in (warnings[0].message or "")
            assert len(warnings[0].message or "") <= 2000
        finally:
            await stop_app(stop, task)
    # The 26,000 ranges were refused at the first one: nothing near a million ids was enumerated.
    assert work.ids <= MAX_CPUS
    assert work.elements <= 10


def test_an_object_whose_handling_fails_is_skipped_and_the_list_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handled: list[str] = []

    def handle(p: Pod) -> None:
        if p.metadata.name == "bad":
            raise RuntimeError("boom")
        handled.append(p.metadata.name or "")

    pods = [Pod.model_validate(pod(name)) for name in ("bad", "a", "b")]
    each(pods, handle)
    assert handled == ["a", "b"]
    assert "handling Pod default/bad failed; skipped" in caplog.text


async def test_a_plugin_informer_goes_on_past_an_object_that_breaks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="16", memory="64Gi"))
    app, stop, task = await start(backend)
    try:
        numa: Any = app.frameworks["koord-scheduler"].plugins["NodeNUMAResource"]
        real = numa._upsert_pod

        def breaks_on_the_first(p: Pod) -> None:
            if p.metadata.name == "first":
                raise RuntimeError("an unforeseen bug")
            real(p)

        monkeypatch.setattr(numa, "_upsert_pod", breaks_on_the_first)
        objects = [
            Pod.model_validate(_bound_with_status("first", HEALTHY_STATUS)),
            Pod.model_validate(_bound_with_status("second", json.dumps({"cpuset": "2-3"}))),
        ]
        numa._on_pod(WatchEvent(EventType.REPLACED, objects=objects))
        assert set(numa.store.records["uid-second"].cpus) == {2, 3}
    finally:
        await stop_app(stop, task)
