"""Eviction in simulation mode: the load file's usage drives it, evicted pods stop counting, and the
BE real limit for evictByRealLimit is what cfsQuota suppression would give."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apis.core import Node, Pod
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLO
from koordlet.config import KoordletConfig
from koordlet.metrics import KoordletMetrics
from koordlet.simulate.model import LoadFile
from koordlet.simulate.qos import SimulatedQoS
from koordlet.simulate.runner import Simulation
from koordlet.states.resources import Kind
from koordlet.states.store import States
from tests.koordlet.qos.podfactory import node, pod


@dataclass
class FakeCluster:
    slo: dict[str, Any]
    pods: list[Pod]
    node: Node = field(default_factory=lambda: node(cpu="16", memory="64Gi"))
    evicted: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    states: States = field(default_factory=States)

    def __post_init__(self) -> None:
        self.states.replace(
            Kind.NODE_SLO, [NodeSLO.model_validate({"metadata": {"name": "node-a"}, "spec": self.slo})]
        )
        self.states.replace(Kind.NODE, [self.node])
        self.states.replace(Kind.POD, self.pods)

    async def evict(self, namespace: str, name: str) -> None:
        self.evicted.append(name)
        self.states.delete(Kind.POD, f"{namespace}/{name}")  # what the pod watch then delivers

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        self.events.append(message)


def _qos(load: dict[str, Any], gates: KoordletFeatureGates) -> SimulatedQoS:
    parsed = LoadFile.model_validate(load)
    config = KoordletConfig(simulate=Path("load.yaml"))
    metrics = KoordletMetrics()
    return SimulatedQoS(Simulation(config, parsed, metrics), parsed, gates, metrics=metrics)


def test_memory_eviction_from_the_load_file_and_evicted_pods_stop_counting() -> None:
    pods = [pod("ls", qos="LS"), pod("be-a", qos="BE", priority=1), pod("be-b", qos="BE", priority=2)]
    load = {
        "nodes": [
            {
                "name": "node-a",
                "usage": {"cpu": "4", "memory": "48Gi"},
                "pods": [
                    {"name": "ls", "usage": {"memory": "30Gi"}},
                    {"name": "be-a", "usage": {"memory": "8Gi"}},
                    {"name": "be-b", "usage": {"memory": "8Gi"}},
                ],
            }
        ]
    }
    cluster = FakeCluster({"resourceUsedThresholdWithBE": {"enable": True}}, pods)
    qos = _qos(load, KoordletFeatureGates(be_memory_evict=True))
    assert asyncio.run(qos.round(cluster, cluster.states)) == 1
    assert cluster.evicted == ["be-a"]
    assert "reason: EvictPodByNodeMemoryUsage" in cluster.events[0]
    assert qos.metrics is not None
    assert 'koordlet_pod_eviction_total{node="node-a",reason="EvictPodByNodeMemoryUsage"} 1.0' in (
        qos.metrics.exposition().decode()
    )
    # be-a's 8Gi left the node: 40Gi is 62 %, under the threshold, even after the cool-down
    qos.planner._last.clear()
    assert asyncio.run(qos.round(cluster, cluster.states)) == 0
    assert cluster.evicted == ["be-a"]


def test_cpu_satisfaction_eviction_with_the_simulated_real_limit() -> None:
    pods = [
        pod("ls", qos="LS"),
        pod("be-a", qos="BE", kube_qos="BestEffort", batch_cpu=6000),
        pod("be-b", qos="BE", kube_qos="BestEffort", batch_cpu=4000),
    ]
    load = {
        "nodes": [
            {
                "name": "node-a",
                "usage": {"cpu": "12", "memory": "10Gi"},
                "pods": [
                    {"name": "ls", "usage": {"cpu": "8"}},
                    {"name": "be-a", "usage": {"cpu": "1"}},
                    {"name": "be-b", "usage": {"cpu": "1"}},
                ],
            }
        ]
    }
    slo = {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "cpuEvictBESatisfactionLowerPercent": 30,
            "cpuEvictBESatisfactionUpperPercent": 60,
        }
    }
    cluster = FakeCluster(slo, pods)
    qos = _qos(load, KoordletFeatureGates(be_cpu_evict=True))
    # limit = 16 x 65 % - 8 (LS) - 2 (system) = 0.4 cores for 10 cores requested: rate 0.04 <= 0.3,
    # release 10000 x (0.6 - 0.04), truncated from float64 as Koordinator does: 5599m; be-b
    # (usage/request 0.25) before be-a (0.17)
    assert asyncio.run(qos.round(cluster, cluster.states)) == 2
    assert cluster.evicted == ["be-b", "be-a"]
    assert "EvictPodByBECPUSatisfaction" in cluster.events[0]
    assert "need to release batch-cpu request: 5599m" in cluster.events[0]
