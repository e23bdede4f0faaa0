"""The overuse revoke controller: the choice of pods (pure), and the controller in the app."""

from __future__ import annotations

import asyncio
from typing import Any

from apis.client.backend import ELASTICQUOTAS, NODES, PODS
from apis.core import Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.elastic_quota.revoke import RevokeController, choose_revocations
from scheduler.quota import Figures
from tests.scheduler.test_job_preemption import bound, elastic_quota, names, node, tenant_pod, until

NP = "quota.scheduling.koordinator.sh/preemptible"


def figures(used: int, runtime: int, *, gpu_used: int = 0, gpu_runtime: int = 0) -> Figures:
    use = {"cpu": used, "nvidia.com/gpu": gpu_used}
    limit = {"cpu": runtime, "nvidia.com/gpu": gpu_runtime}
    empty = {"cpu": 0, "nvidia.com/gpu": 0}
    return Figures(
        name="team",
        parent="koordinator-root-quota",
        min=empty,
        max=limit,
        auto_scale_min=empty,
        shared_weight=limit,
        child_request=use,
        request=use,
        used=use,
        non_preemptible_request=empty,
        non_preemptible_used=empty,
        runtime=limit,
    )


def running(
    name: str, cpu: int, *, priority: int = 0, created: int = 0, gpu: int = 0, **labels: str
) -> PodInfo:
    requests: dict[str, Any] = {"cpu": f"{cpu}m"}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    return PodInfo.of(
        Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "uid": name,
                    "labels": labels,
                    "creationTimestamp": f"2026-11-22T00:00:{created:02d}Z",
                },
                "spec": {
                    "nodeName": "n0",
                    "priority": priority,
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                },
            }
        )
    )


def test_least_important_go_first_and_the_needed_ones_only() -> None:
    pods = [
        running("old-low", 2000, priority=1, created=1),
        running("new-low", 2000, priority=1, created=9),
        running("high", 2000, priority=9, created=5),
    ]
    chosen = choose_revocations(figures(used=6000, runtime=4000), pods)
    assert [p.name for p in chosen] == ["new-low"]


def test_put_back_the_most_important_that_still_fit() -> None:
    pods = [running("big", 3000, priority=1, created=1), running("small", 1000, priority=2, created=2)]
    # Removing "big" alone suffices (used 5 -> 2 <= runtime 3); "small" is never taken.
    assert [p.name for p in choose_revocations(figures(used=5000, runtime=3000), pods)] == ["big"]
    # Both are needed to get from 6 to 2.
    pods = [running("a", 2000, priority=1), running("b", 2000, priority=2)]
    assert {p.name for p in choose_revocations(figures(used=6000, runtime=2000), pods)} == {"a", "b"}


def test_non_preemptible_pods_are_never_revoked_and_every_resource_counts() -> None:
    keep = running("keep", 4000, priority=0, **{NP: "false"})
    gpu = running("gpu", 100, priority=5, gpu=1)
    cpu_only = running("cpu-only", 100, priority=0)
    chosen = choose_revocations(
        figures(used=4200, runtime=8000, gpu_used=1, gpu_runtime=0), [keep, gpu, cpu_only]
    )
    # Only the GPU is over: the CPU-only pod does not help (Koordinator's masking would take it).
    assert [p.name for p in chosen] == ["gpu"]


def test_the_controller_waits_delay_evict_time_then_acts_once() -> None:
    clock = [0.0]
    state = {"fig": figures(used=6000, runtime=4000)}
    pods = [running("p1", 2000, created=1), running("p2", 2000, created=2)]

    async def evict(pod: PodInfo, quota: str) -> None:
        return None

    controller = RevokeController(
        lambda: {"team": state["fig"]},
        lambda quota: pods,
        evict,
        delay_seconds=10,
        interval_seconds=1,
        clock=lambda: clock[0],
    )
    assert controller.tick() == []  # over since now
    clock[0] = 5
    assert controller.tick() == []
    clock[0] = 11
    assert [(p.name, q) for p, q in controller.tick()] == [("p2", "team")]
    clock[0] = 12
    assert controller.tick() == []  # the timer restarted
    state["fig"] = figures(used=4000, runtime=4000)
    clock[0] = 30
    assert controller.tick() == []


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: ElasticQuota
    args:
      monitorAllQuotas: true
      delayEvictTime: 0s
      revokePodInterval: 50ms
"""


async def test_an_overused_borrower_gives_pods_back_when_the_lender_needs_them() -> None:
    """No preemption configured: team-b borrowed while team-a was idle; when team-a's pods arrive
    the runtimes are shared again (6 CPU each of 12) and the revoke controller evicts one of
    team-b's 2-CPU pods, after which team-a's last pod finds room."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n0", cpu="12"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", min_cpu="4", max_cpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", min_cpu="4", max_cpu="8"))
    for i in range(4):
        backend.apply(PODS, tenant_pod(f"b-{i}", "team-b", cpu="2", node_name="n0"))
    config = load_config(CONFIG, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_pods.wait()
        for i in range(3):
            backend.apply(PODS, tenant_pod(f"a-{i}", "team-a", cpu="2"))
        await until(lambda: {"a-0", "a-1", "a-2"} <= set(bound(backend)))
        assert len({f"b-{i}" for i in range(4)} - names(backend)) == 1
        assert [e.reason for e in backend.events if e.reason == "QuotaRevoked"] == ["QuotaRevoked"]
    finally:
        stop.set()
        await task
