"""One replay of the GPU trace on the in-memory scheduler, and what it leaves behind.

The real scheduler app (``SchedulerApp`` on ``MemoryBackend``, as ``koordctl simulate`` runs it,
driven pod by pod through ``in_memory.py``) schedules every arrival before the next event; a pod it
cannot place is counted as failed and withdrawn (a job that found no GPUs), a departure deletes its
pod. After every arrival past the warm-up, the cluster is measured from the cards the bound pods'
``device-allocated`` annotations name: the share of all GPUs that is free but unallocatable for the
trace's own request mix (FGD's fragmentation), the share that is free, and the 8-GPU nodes left
entirely idle.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field

from apis.client.backend import PODS
from apis.core import Pod
from apis.extension.device import get_device_allocations
from apis.scheduling.device import Device
from e2e.bench.gpu_fragmentation_trace import SHAPES, Event, pod_manifest
from e2e.bench.in_memory import in_memory_scheduler
from scheduler.plugins.device_share.allocator import GPU, GPUUsage
from scheduler.plugins.device_share.fragmentation import cards_of, fragmentation, shapes_of
from scheduler.plugins.device_share.store import allocations_of, gpus_of
from scheduler.simulator.description import ClusterDescription, GPUSpec, NodePool

__all__ = ["RunResult", "replay"]

NAMESPACE = "trace"
GPUS_PER_NODE = 8

_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: koord-scheduler
  plugins:
    score:
      # Only the GPU strategy decides: every run differs in nothing else.
      disabled: [{{name: "*"}}]
      enabled: [{{name: DeviceShare, weight: 1}}]
  pluginConfig:
  - name: DeviceShare
    args:
      scoringStrategy: {{type: {strategy}}}
"""


@dataclass
class RunResult:
    strategy: str
    arrivals: int = 0
    failed: int = 0
    failed_gpus: float = 0.0
    demanded_gpus: float = 0.0
    unallocatable: list[float] = field(default_factory=list)
    """Per sample: free but unallocatable GPUs / all GPUs."""
    free: list[float] = field(default_factory=list)
    whole_nodes: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def mean_unallocatable(self) -> float:
        return statistics.fmean(self.unallocatable) if self.unallocatable else 0.0

    @property
    def mean_free(self) -> float:
        return statistics.fmean(self.free) if self.free else 0.0

    @property
    def mean_whole_nodes(self) -> float:
        return statistics.fmean(self.whole_nodes) if self.whole_nodes else 0.0


def cluster(nodes: int) -> ClusterDescription:
    pool = NodePool.model_validate(
        {"name": "gpu", "count": nodes, "cpu": "256", "memory": "4Ti", "pods": 1000, "gpus": GPUSpec(count=8)}
    )
    return ClusterDescription(node_pools=[pool])


class _Usage:
    """The cards of every node and what the bound pods hold on them, from their annotations."""

    def __init__(self, devices: list[Device]) -> None:
        self.gpus: dict[str, list[GPU]] = {d.metadata.name or "": gpus_of(d) for d in devices}
        self.usage: dict[str, dict[int, GPUUsage]] = {name: {} for name in self.gpus}
        self.held: dict[str, tuple[str, list[tuple[int, GPUUsage]]]] = {}
        self.mix = shapes_of({s.request: s.popularity for s in SHAPES})

    def add(self, pod: Pod) -> None:
        allocated = get_device_allocations(pod.metadata.annotations)
        node = pod.spec.node_name or ""
        entries = [(a.minor, a.usage) for a in allocations_of(allocated or {})]
        self.held[pod.metadata.name or ""] = (node, entries)
        for minor, usage in entries:
            self.usage[node][minor] = self.usage[node].get(minor, GPUUsage()) + usage

    def remove(self, name: str) -> None:
        node, entries = self.held.pop(name)
        for minor, usage in entries:
            self.usage[node][minor] = self.usage[node][minor] - usage

    def measure(self, result: RunResult) -> None:
        names = sorted(self.gpus)
        cards = cards_of([(self.gpus[n], self.usage[n]) for n in names])
        total = float(cards.valid.sum())
        frag = fragmentation(cards.capacity, cards.used, cards.valid, self.mix)
        used = cards.used.astype(float) / cards.capacity.clip(min=1)
        free = (1.0 - used.max(axis=-1)).clip(0.0, 1.0) * cards.valid
        idle = ((cards.used <= 0).all(axis=-1) | ~cards.valid).all(axis=-1)
        result.unallocatable.append(float(frag.sum()) / total)
        result.free.append(float(free.sum()) / total)
        result.whole_nodes.append(int(idle.sum()))


async def replay(strategy: str, nodes: int, trace: list[Event], warmup: int) -> RunResult:
    """Replay ``trace`` on ``nodes`` 8-GPU nodes with DeviceShare's ``strategy``; samples are taken
    after every arrival but the first ``warmup``."""
    async with in_memory_scheduler(_CONFIG.format(strategy=strategy), cluster(nodes)) as sched:
        usage = _Usage(sched.devices)
        result = RunResult(strategy)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for event in trace:
            name = f"job-{event.pod}"
            if event.kind == "depart":
                if name in usage.held:
                    sched.backend.delete(PODS, NAMESPACE, name)
                    usage.remove(name)
                continue
            result.arrivals += 1
            result.demanded_gpus += event.shape.gpus
            sched.backend.apply(PODS, Pod.model_validate(pod_manifest(event, NAMESPACE)))
            bound = await sched.outcome(NAMESPACE, name)
            if bound is None:
                result.failed += 1
                result.failed_gpus += event.shape.gpus
                await sched.withdraw(NAMESPACE, name)
            else:
                usage.add(bound)
            if result.arrivals > warmup:
                usage.measure(result)
    result.seconds = loop.time() - started
    return result
