"""BE memory eviction and BE CPU eviction by satisfaction: release amounts, victim order, gates,
cool-downs and the Eviction API call with its event."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from kubernetes_asyncio import client

from apis.core import Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec, ResourceThresholdStrategy
from koordlet.collectors import series
from koordlet.metric_cache import MetricCache
from koordlet.qos.cpu_evict import BECPUSample, milli_to_release, satisfaction_config_error
from koordlet.qos.eviction import EvictionInputs, EvictionPlanner, execute
from koordlet.qos.evictor import Evictor
from koordlet.qos.memory_evict import memory_to_release
from koordlet.qos.slo import effective_spec
from tests.koordlet.qos.podfactory import node, pod

GI = 1 << 30
NOW = 1000.0
GATES = KoordletFeatureGates(be_memory_evict=True, be_cpu_evict=True)


def _spec(**threshold: object) -> NodeSLOSpec:
    return effective_spec(
        NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": True, **threshold}})
    )


def _cache(
    node_memory: float | None = None, node_cpu: float | None = None, **pods: tuple[float, float]
) -> MetricCache:
    cache = MetricCache()
    for t in range(int(NOW) - 30, int(NOW) + 10):
        if node_memory is not None:
            cache.append((series.NODE_MEMORY,), t, node_memory)
        if node_cpu is not None:
            cache.append((series.NODE_CPU,), t, node_cpu)
        for uid, (cpu, memory) in pods.items():
            cache.append((series.POD_CPU, uid), t, cpu)
            cache.append((series.POD_MEMORY, uid), t, memory)
    return cache


@pytest.mark.parametrize(
    ("used_gi", "lower", "expected_gi"),
    [(69.9, None, 0), (70, None, 2), (75, None, 7), (75, 60, 15), (80.5, 65, 15)],
)
def test_memory_release_amount(used_gi: float, lower: int | None, expected_gi: int) -> None:
    strategy = ResourceThresholdStrategy(memory_evict_threshold_percent=70, memory_evict_lower_percent=lower)
    release, _ = memory_to_release(strategy, 100 * GI, int(used_gi * GI))
    assert release == expected_gi * GI


def test_memory_eviction_victims_in_documented_order_ls_untouched() -> None:
    pods = [
        pod("ls-big", qos="LS", priority=9000),
        pod("be-small", qos="BE", priority=5000),
        pod("be-big", qos="BE", priority=5000),
        pod("be-low-prio", qos="BE", priority=4000),
        pod("be-nodata-a", qos="BE", priority=5000),
        pod("be-nodata-b", qos="BE", priority=5000),
    ]
    cache = _cache(
        node_memory=90 * GI,
        **{
            "uid-ls-big": (1, 40 * GI),
            "uid-be-small": (1, 2 * GI),
            "uid-be-big": (1, 10 * GI),
            "uid-be-low-prio": (1, 1 * GI),
        },
    )
    planner = EvictionPlanner(GATES)
    inputs = EvictionInputs(
        node(), pods, _spec(memoryEvictThresholdPercent=70), cache, lambda p: p.metadata.uid or "", NOW
    )
    # usage 90 %: release 100Gi x (90 - 68) % = 22Gi, more than every BE pod uses: all BE pods go
    [decision] = planner.plan(inputs)
    assert decision.reason == "EvictPodByNodeMemoryUsage"
    assert [p.metadata.name for p in decision.victims] == [
        "be-low-prio",
        "be-big",
        "be-small",
        "be-nodata-b",
        "be-nodata-a",
    ]
    assert "need to release memory: 23622320128" in decision.message
    # usage 75 %: release 7Gi; be-low-prio (1Gi) then be-big (10Gi) cover it
    inputs.source = _cache(
        node_memory=75 * GI, **{"uid-be-big": (1, 10 * GI), "uid-be-low-prio": (1, 1 * GI)}
    )
    [decision] = planner.plan(inputs)
    assert [p.metadata.name for p in decision.victims] == ["be-low-prio", "be-big"]


def test_memory_eviction_gated_by_feature_gate_and_node_slo() -> None:
    pods = [pod("be", qos="BE")]
    cache = _cache(node_memory=95 * GI, **{"uid-be": (1, 5 * GI)})
    off = EvictionPlanner(KoordletFeatureGates())
    assert off.plan(EvictionInputs(node(), pods, _spec(), cache, lambda p: p.metadata.uid or "", NOW)) == []
    disabled = effective_spec(NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": False}}))
    assert (
        EvictionPlanner(GATES).plan(
            EvictionInputs(node(), pods, disabled, cache, lambda p: p.metadata.uid or "", NOW)
        )
        == []
    )


def test_satisfaction_release_and_config_checks() -> None:
    strategy = ResourceThresholdStrategy(
        cpu_evict_be_satisfaction_lower_percent=40, cpu_evict_be_satisfaction_upper_percent=80
    )
    assert satisfaction_config_error(strategy) is None
    # limit 3 cores for 10 cores requested: rate 0.3 <= 0.4, release 10000 x (0.8 - 0.3) = 5000
    assert milli_to_release(strategy, BECPUSample(usage=2900, request=10000, limit=3000)) == 5000
    # usage below 90 % of the limit: nothing
    assert milli_to_release(strategy, BECPUSample(usage=2000, request=10000, limit=3000)) == 0
    # satisfied enough
    assert milli_to_release(strategy, BECPUSample(usage=5000, request=10000, limit=5000)) == 0
    # limit under one core counts as busy
    assert milli_to_release(strategy, BECPUSample(usage=0, request=10000, limit=500)) == 7500
    bad = ResourceThresholdStrategy(
        cpu_evict_be_satisfaction_lower_percent=70, cpu_evict_be_satisfaction_upper_percent=80
    )
    assert satisfaction_config_error(bad) == "cpuEvictBESatisfactionLowerPercent(70) must be in (0,60]"
    assert satisfaction_config_error(ResourceThresholdStrategy()) is not None


def test_cpu_eviction_by_allocatable_victims_by_priority_then_usage_per_request() -> None:
    pods = [
        pod("ls", qos="LS", priority=9000),
        pod("be-a", qos="BE", priority=5000, batch_cpu=4000),
        pod("be-b", qos="BE", priority=5000, batch_cpu=2000),
        pod("be-c", qos="BE", priority=3000, batch_cpu=4000),
    ]
    # BE uses 1 + 1.9 + 0.1 = 3 cores on a batch-cpu allocatable of 3000: rate 3000/10000 = 0.3
    cache = _cache(
        node_cpu=12, **{"uid-ls": (9, GI), "uid-be-a": (1, GI), "uid-be-b": (1.9, GI), "uid-be-c": (0.1, GI)}
    )
    spec = _spec(
        cpuEvictPolicy="evictByAllocatable",
        cpuEvictBESatisfactionLowerPercent=40,
        cpuEvictBESatisfactionUpperPercent=80,
        cpuEvictTimeWindowSeconds=10,
    )
    planner = EvictionPlanner(KoordletFeatureGates(be_cpu_evict=True))
    inputs = EvictionInputs(node(batch_cpu="3000"), pods, spec, cache, lambda p: p.metadata.uid or "", NOW)
    [decision] = planner.plan(inputs)
    assert decision.reason == "EvictPodByBECPUSatisfaction"
    # release 5000m of batch-cpu requests: be-c (priority 3000) first, then be-b (usage/request 0.95)
    # before be-a (0.25)
    assert [p.metadata.name for p in decision.victims] == ["be-c", "be-b"]
    assert "5000m" in decision.message


@dataclass
class FakeAPI:
    evicted: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)

    async def evict(self, namespace: str, name: str) -> None:
        self.evicted.append(f"{namespace}/{name}")

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        self.events.append((pod.metadata.name or "", reason, message, event_type))


def test_eviction_goes_through_the_api_with_an_event_once_then_cools_down() -> None:
    pods = [pod("be", qos="BE"), pod("ls", qos="LS")]
    cache = _cache(node_memory=95 * GI, **{"uid-be": (1, 30 * GI), "uid-ls": (1, 60 * GI)})
    api = FakeAPI()
    evictor = Evictor(api)
    planner = EvictionPlanner(GATES)
    inputs = EvictionInputs(node(), pods, _spec(), cache, lambda p: p.metadata.uid or "", NOW)
    assert asyncio.run(execute(planner, evictor, "node-a", planner.plan(inputs), NOW)) == 1
    assert api.evicted == ["default/be"]
    [(name, reason, message, kind)] = api.events
    assert (name, reason, kind) == ("be", "evictPodSuccess", "Warning")
    assert message.startswith("evict Pod:be, reason: EvictPodByNodeMemoryUsage, message: killAndEvictBEPods")
    # cooling down for 4 s, then the pod (still listed) is not evicted twice
    assert planner.plan(inputs) == []
    inputs.now = NOW + 2
    assert planner.plan(inputs) == []
    inputs.now = NOW + 5
    assert asyncio.run(execute(planner, evictor, "node-a", planner.plan(inputs), NOW + 5)) == 1
    assert api.evicted == ["default/be"]


@dataclass
class RefusingAPI(FakeAPI):
    refuse: str = ""

    async def evict(self, namespace: str, name: str) -> None:
        if name == self.refuse:
            raise client.ApiException(status=429, reason="Too Many Requests")
        await super().evict(namespace, name)


def test_a_refused_eviction_counts_nothing_and_the_next_pod_goes() -> None:
    pods = [
        pod("be-first", qos="BE", priority=1),
        pod("be-second", qos="BE", priority=2),
        pod("be-third", qos="BE", priority=3),
    ]
    cache = _cache(node_memory=75 * GI, **{f"uid-{p.metadata.name}": (1, 8 * GI) for p in pods})
    api = RefusingAPI(refuse="be-first")
    planner = EvictionPlanner(GATES)
    inputs = EvictionInputs(node(), pods, _spec(), cache, lambda p: p.metadata.uid or "", NOW)
    # 7Gi to release: be-first would cover it, but a PodDisruptionBudget refuses it
    assert asyncio.run(execute(planner, Evictor(api), "node-a", planner.plan(inputs), NOW)) == 1
    assert api.evicted == ["default/be-second"]
    assert [(name, reason) for name, reason, _, _ in api.events] == [
        ("be-first", "evictPodFail"),
        ("be-second", "evictPodSuccess"),
    ]
