"""A small cluster description for LowNodeLoad scenario tests: nodes with pods and measured usage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.core import Pod
from operators.descheduler.lownodeload import LowNodeLoad, LowNodeLoadArgs
from tests.operators.descheduler.fakes import NOW, FakeEvictor, FakeHandle, make_metric, make_node, make_pod

__all__ = ["NodeSpec", "PodSpec", "build"]


@dataclass(frozen=True)
class PodSpec:
    name: str
    cpu_used: float
    """Measured cores."""
    qos: str = "BestEffort"
    """BestEffort pods are Batch; Burstable and Guaranteed ones are Prod."""
    request: str = "100m"


@dataclass(frozen=True)
class NodeSpec:
    name: str
    system_cpu: float
    pods: Sequence[PodSpec] = ()
    cpu: str = "10"
    labels: Mapping[str, str] = field(default_factory=dict)


def build(
    nodes: Sequence[NodeSpec], config: Mapping[str, object], evictor: FakeEvictor | None = None
) -> tuple[LowNodeLoad, FakeHandle]:
    pods: list[Pod] = []
    metrics = {}
    for node in nodes:
        for spec in node.pods:
            pods.append(make_pod(spec.name, node.name, cpu=spec.request, memory="1Mi", qos=spec.qos))
        metrics[node.name] = make_metric(
            node.name,
            {p.name: (f"{round(p.cpu_used * 1000)}m", "1Mi") for p in node.pods},
            system=(f"{round(node.system_cpu * 1000)}m", "1Gi"),
        )
    handle = FakeHandle(
        node_list=[make_node(n.name, cpu=n.cpu, memory="100Gi", labels=n.labels) for n in nodes],
        pods=pods,
        metrics=metrics,
        fake_evictor=evictor or FakeEvictor(),
    )
    plugin = LowNodeLoad(LowNodeLoadArgs.model_validate(config), handle, clock=lambda: NOW)
    return plugin, handle
