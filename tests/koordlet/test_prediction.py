"""prodReclaimableMetric / prodPeakMetric: the priority predictor over the metric cache, by hand."""

from __future__ import annotations

from pathlib import Path

from apis.core import Node, Pod
from apis.meta import ObjectMeta
from apis.quantity import Quantity
from apis.slo.nodemetric import NodeMetric, NodeMetricStatus
from koordlet.collectors import series
from koordlet.config import KoordletConfig
from koordlet.metric_cache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.prediction import node_allocatable, predict
from koordlet.reporter import PodMeta
from koordlet.simulate.model import LoadFile
from koordlet.simulate.runner import Simulation
from koordlet.states.resources import Kind
from koordlet.states.store import States

GI = 1024**3


def _meta(
    uid: str, priority: str, cpu: str, memory: str, *, terminating: bool = False, node: str = ""
) -> PodMeta:
    return PodMeta(
        uid=uid,
        name=uid,
        namespace="default",
        priority=priority,
        qos="LS",
        requests={"cpu": Quantity.parse(cpu), "memory": Quantity.parse(memory)},
        terminating=terminating,
        node_name=node,
    )


def _cache() -> MetricCache:
    cache = MetricCache()
    for t in range(20):
        cache.append((series.SYSTEM_CPU,), 100.0 + t, 3.0 if t == 7 else 0.5)  # one spike above p95
        cache.append((series.SYSTEM_MEMORY,), 100.0 + t, float(GI))
        for uid, cpu, memory in (("a", 1.0, 2 * GI), ("b", 0.5, GI), ("c", 4.0, 4 * GI), ("e", 2.0, GI)):
            cache.append((series.POD_CPU, uid), 100.0 + t, cpu)
            cache.append((series.POD_MEMORY, uid), 100.0 + t, float(memory))
    return cache


PODS = [
    _meta("a", "koord-prod", "4", "8Gi"),
    _meta("b", "", "2", "2Gi"),  # no class: takes part
    _meta("c", "koord-batch", "4", "4Gi"),  # batch: not
    _meta("d", "koord-prod", "1", "1Gi"),  # no samples yet: its request is its peak
    _meta("e", "koord-prod", "3", "3Gi", terminating=True),  # not
]


def test_peak_and_reclaimable_by_hand() -> None:
    allocatable = {"cpu": Quantity.parse("8"), "memory": Quantity.parse("6Gi")}
    prediction = predict(
        _cache(), PODS, allocatable, memory_series=series.POD_MEMORY, window_seconds=60, now=120.0
    )
    # cpu: (p95 sys 500 + a 1000 + b 500) x 1.1 + d 1000 = 3200; requests 7000 -> 3800; 8000 - 3200 = 4800
    assert prediction.cpu_milli == (3800, 3200)
    # memory: (1 + 2 + 1 Gi) x 1.1 (truncated) + 1Gi; requests 11Gi; allocatable 6Gi bounds it
    peak = 4 * GI * 110 // 100 + GI
    assert prediction.memory_bytes == (6 * GI - peak, peak)
    assert prediction.reclaimable.to_wire() == {
        "resource": {"resources": {"cpu": "3800m", "memory": str(6 * GI - peak)}}
    }


def test_reclaimable_is_never_negative() -> None:
    allocatable = {"cpu": Quantity.parse("1"), "memory": Quantity.parse("1Gi")}
    prediction = predict(
        _cache(), PODS, allocatable, memory_series=series.POD_MEMORY, window_seconds=60, now=120.0
    )
    assert prediction.cpu_milli[0] == 0
    assert prediction.memory_bytes[0] == 0


def test_raw_allocatable_wins_over_the_status() -> None:
    node = Node.model_validate(
        {
            "metadata": {
                "annotations": {"node.koordinator.sh/raw-allocatable": '{"cpu": "4", "memory": "8Gi"}'}
            },
            "status": {"allocatable": {"cpu": "6", "memory": "8Gi"}},
        }
    )
    assert node_allocatable(node) == {"cpu": Quantity.parse("4"), "memory": Quantity.parse("8Gi")}
    node.metadata.annotations = {"node.koordinator.sh/raw-allocatable": "{broken"}
    assert node_allocatable(node)["cpu"] == Quantity.parse("6")


def _prod_pod(name: str, node: str, cpu: str, memory: str) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {
                "nodeName": node,
                "priority": 9500,  # koord-prod
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            },
            "status": {"phase": "Running"},
        }
    )


class FakeClient:
    """The cluster's watched states (n1's NodeMetric and Node, the bound pods); the status writes."""

    def __init__(self, pods: list[Pod]) -> None:
        self.states = States()
        self.states.replace(Kind.NODE_METRIC, [NodeMetric(metadata=ObjectMeta(name="n1"))])
        node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}}
        self.states.replace(Kind.NODE, [Node.model_validate(node)])
        self.states.replace(Kind.POD, pods)
        self.written: dict[str, NodeMetricStatus] = {}

    async def update_status(self, metric: NodeMetric, status: NodeMetricStatus) -> None:
        self.written[metric.metadata.name or ""] = status


async def test_simulation_reports_the_prediction_for_the_pods_bound_to_the_node() -> None:
    load = LoadFile.model_validate(
        {
            "nodes": [
                {
                    "name": "n1",
                    "usage": {"cpu": "3", "memory": "10Gi"},
                    "pods": [{"name": "web", "usage": {"cpu": "1", "memory": "4Gi"}}],
                }
            ]
        }
    )
    pods = [
        _prod_pod("web", "n1", "4", "8Gi"),  # the load file names it; its series is default/web
        _prod_pod("x", "n2", "8", "8Gi"),  # another node's pod
    ]
    fake = FakeClient(pods)
    simulation = Simulation(KoordletConfig(simulate=Path("x")), load, KoordletMetrics())
    await simulation.report_once(fake, fake.states)  # type: ignore[arg-type]
    wire = fake.written["n1"].to_wire()
    # system = node - pods = 2 cores / 6Gi; peak = (2 + 1) x 1.1 = 3.3 cores, (6 + 4) x 1.1 = 11Gi
    assert wire["prodPeakMetric"] == {"resource": {"resources": {"cpu": "3300m", "memory": "11Gi"}}}
    # reclaimable = min(request - peak, allocatable - peak) = min(700m, 4700m); memory 8Gi - 11Gi < 0
    assert wire["prodReclaimableMetric"] == {"resource": {"resources": {"cpu": "700m", "memory": "0"}}}
