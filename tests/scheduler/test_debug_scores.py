"""``PUT /debug/flags/s`` on a running scheduler: each scored pod logs its top-N nodes with every
Score plugin's weighted score and the total (Koordinator's debugTopNScores); 0 logs nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import test_utils, web

from apis.client.backend import NODES, PODS
from scheduler import __main__ as koord_scheduler
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.http import SchedulerHTTPServer
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

Client = test_utils.TestClient[web.Request, web.Application]


def node(name: str, cpu: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
        },
    }


SCORED_BY_THREE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled:
      - {name: NodeResourcesFit, weight: 1}
      - {name: NodeAffinity, weight: 2}
      - {name: TaintToleration, weight: 3}
"""
"""The default profile with three Score plugins, so the expected table does not change whenever
the default score set grows."""


@pytest_asyncio.fixture(loop_scope="function")
async def running() -> AsyncIterator[tuple[MemoryBackend, Client]]:
    """The profile above on three nodes, and the HTTP server sharing the scheduler's flags."""
    config = load_config(SCORED_BY_THREE, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    backend.apply(NODES, node("small", "4"))
    backend.apply(NODES, node("medium", "8"))
    backend.apply(NODES, node("big", "16", [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]))
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), backend, DEFAULT_REGISTRY, SchedulerMetrics()
    )
    server = SchedulerHTTPServer(app.metrics, ready=lambda: app.ready, flags=app.debug_flags)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        async with test_utils.TestClient(test_utils.TestServer(server.app)) as client:
            yield backend, client
    finally:
        stop.set()
        await task


async def bound_to(backend: MemoryBackend, name: str) -> str:
    for _ in range(250):
        found = backend.get(PODS, "default", name)
        if found is not None and found.spec and found.spec.node_name:
            return found.spec.node_name
        await asyncio.sleep(0.02)
    raise AssertionError(f"pod {name} was not bound")


def score_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "scheduler.debug"]


async def test_put_debug_flags_s_logs_the_top_n_nodes_with_each_plugins_weighted_score(
    running: tuple[MemoryBackend, Client], caplog: pytest.LogCaptureFixture
) -> None:
    backend, client = running
    caplog.set_level(logging.INFO, logger="scheduler.debug")
    assert await (await client.get("/debug/flags/s")).text() == "0"
    resp = await client.put("/debug/flags/s", data="2")
    assert (resp.status, await resp.text()) == (200, "successfully set debugTopNScores to 2")
    assert await (await client.get("/debug/flags/s")).text() == "2"

    backend.apply(PODS, pod("web-0"))
    assert await bound_to(backend, "web-0") == "medium"

    (record,) = score_records(caplog)
    # NodeResourcesFit (weight 1), LeastAllocated over cpu and memory, integer as kube-scheduler:
    # small (4-2)*100/4 = 50 and 15*100/16 = 93 -> 71; medium 75, 93 -> 84; big 87, 93 -> 90.
    # TaintToleration (weight 3): big's PreferNoSchedule taint is not tolerated -> 0, others 100.
    # NodeAffinity (weight 2): no preferences -> 0. The best two of three nodes are logged.
    assert record.topScores == [  # type: ignore[attr-defined]
        {
            "node": "medium",
            "score": 384,
            "plugins": {"NodeResourcesFit": 84, "NodeAffinity": 0, "TaintToleration": 300},
        },
        {
            "node": "small",
            "score": 371,
            "plugins": {"NodeResourcesFit": 71, "NodeAffinity": 0, "TaintToleration": 300},
        },
    ]
    assert record.getMessage().splitlines() == [
        "Top2 scores for Pod: default/web-0, feasibleNodes: 3, "
        "plugins:[NodeResourcesFit NodeAffinity TaintToleration]",
        "| # | Pod | Node | Score | NodeResourcesFit | NodeAffinity | TaintToleration |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        "| 0 | default/web-0 | medium | 384 | 84 | 0 | 300 |",
        "| 1 | default/web-0 | small | 371 | 71 | 0 | 300 |",
    ]


async def test_debug_flags_s_zero_logs_nothing(
    running: tuple[MemoryBackend, Client], caplog: pytest.LogCaptureFixture
) -> None:
    backend, client = running
    caplog.set_level(logging.INFO, logger="scheduler.debug")
    assert (await client.post("/debug/flags/s", data="3")).status == 200
    backend.apply(PODS, pod("first"))
    await bound_to(backend, "first")
    assert len(score_records(caplog)) == 1

    assert (await client.put("/debug/flags/s", data="0")).status == 200
    backend.apply(PODS, pod("second"))
    await bound_to(backend, "second")
    assert len(score_records(caplog)) == 1


async def test_debug_flags_s_refuses_what_is_not_a_count(running: tuple[MemoryBackend, Client]) -> None:
    _, client = running
    for bad in ("ten", "-1", ""):
        resp = await client.put("/debug/flags/s", data=bad)
        assert resp.status == 400
    assert await (await client.get("/debug/flags/s")).text() == "0"


@pytest.mark.parametrize(
    ("argv", "top_n"), [([], 0), (["--debug-scores", "5"], 5), (["-s", "3", "-v", "2"], 3)]
)
def test_debug_scores_start_flag_sets_the_shared_flags(argv: list[str], top_n: int) -> None:
    """Koordinator's ``--debug-scores``/``-s``: the value ``GET /debug/flags/s`` answers at start."""
    flags = koord_scheduler.debug_flags_of(koord_scheduler.parse_args(argv))
    assert flags.top_n_scores == top_n
