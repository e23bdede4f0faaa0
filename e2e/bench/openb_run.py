"""One replay of the openb trace with one DeviceShare scoring strategy, and its allocation curve.

The scheduler is koord-scheduler's default profile with ``percentageOfNodesToScore: 100`` (every
feasible node scored, as the paper's simulator does) and DeviceShare's ``scoringStrategy.type`` set
(``deviceshare-only`` also disables every other score plugin, to see what the rest of the profile
costs); it runs in process on the in-memory backend (``in_memory.py``). Pods are submitted one at a time and
never deleted; a pod the scheduler gives up on is failed and withdrawn, not retried. After every pod
the arrived GPU request and the allocated GPU (from the bound pods' ``device-allocated``
annotations) are known; the curve keeps the allocation at the first pod that brings the arrived
request to each whole percent of the cluster's GPU capacity, as the paper's figures do. At the end
the audit (``openb_audit.py``) checks that nothing is over-allocated and fails the run if anything is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from apis.client.backend import PODS
from apis.core import Pod
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED, RESOURCE_GPU_CORE
from apis.quantity import Quantity
from e2e.bench.in_memory import in_memory_scheduler
from e2e.bench.openb_audit import Audit, OverAllocationError, audit
from e2e.bench.openb_cluster import NAMESPACE, pod_manifest
from e2e.bench.openb_trace import FULL_GPU_MILLI, Submission
from scheduler.simulator.description import ClusterDescription

__all__ = [
    "PROFILES",
    "STRATEGIES",
    "CurvePoint",
    "Failure",
    "Profile",
    "StrategyRun",
    "replay",
    "scheduler_config",
]

STRATEGIES = ("Fragmentation", "MostAllocated", "LeastAllocated")

PROFILES = ("default", "deviceshare-only", "gpu-cluster")
Profile = Literal["default", "deviceshare-only", "gpu-cluster"]

_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
- schedulerName: koord-scheduler
{plugins}  pluginConfig:
  - name: DeviceShare
    args:
      scoringStrategy: {{type: {strategy}}}
"""
_PACKED_HOSTS = """\
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
"""
_DEVICESHARE_ONLY = """\
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: DeviceShare, weight: 1}]
"""


def scheduler_config(strategy: str, profile: Profile = "default") -> str:
    """The default profile with DeviceShare's strategy set; ``deviceshare-only`` also leaves
    DeviceShare the only score plugin (NodeResourcesFit no longer spreads CPU and memory; a pod
    without GPUs then scores the same everywhere and lands on a node drawn at random);
    ``gpu-cluster`` is the default profile with NodeResourcesFit packing cpu and memory
    (``scoringStrategy.type: MostAllocated``) instead of spreading them, as docs/devices.md
    recommends for GPU clusters."""
    config = _CONFIG.format(
        strategy=strategy, plugins=_DEVICESHARE_ONLY if profile == "deviceshare-only" else ""
    )
    return config + (_PACKED_HOSTS if profile == "gpu-cluster" else "")


_GPU_CORE_TO_MILLI = FULL_GPU_MILLI // 100
"""gpu-core counts a card as 100, the trace as 1000."""


class CurvePoint(BaseModel, frozen=True):
    mark: int
    """The whole percent of GPU capacity the arrived request first reached here."""
    arrived_percent: float
    allocated_percent: float


class Failure(BaseModel, frozen=True):
    """A pod the scheduler gave up on, with its request and the scheduler's reason."""

    pod: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    arrived_percent: float
    reason: str


class StrategyRun(BaseModel):
    strategy: str
    profile: Profile = "default"
    capacity_milli: int
    target_percent: float
    """What the submission order's GPU request was inflated (or cut) to, in % of capacity."""
    pods: int = 0
    """Pods submitted."""
    gpu_pods: int = 0
    cpu_pods: int = 0
    """Pods that ask for no GPU."""
    failed_gpu_pods: int = 0
    failed_cpu_pods: int = 0
    failed_gpu_milli: int = 0
    arrived_milli: int = 0
    """GPU requested by the pods submitted (bound or not), in thousandths of a GPU."""
    allocated_milli: int = 0
    curve: list[CurvePoint] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    complete: bool = False
    """Every pod of the submission order was replayed (no ``--limit`` cut it short)."""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """The process's CPU time over the replay (scheduler and replay driver; on a loaded machine
    ``seconds`` counts the waits for a core too)."""
    audit: Audit | None = None

    @property
    def arrived_percent(self) -> float:
        return 100 * self.arrived_milli / self.capacity_milli

    @property
    def allocated_percent(self) -> float:
        return 100 * self.allocated_milli / self.capacity_milli

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_ms_per_pod(self) -> float:
        return 1000 * self.cpu_seconds / self.pods if self.pods else 0.0

    def allocation_at(self, percent: int) -> float | None:
        """The allocation % once the arrived request reached ``percent`` % of capacity; a complete
        replay, which ends within one task of its target, stands for the target itself. None when
        the replay did not get that far."""
        for point in self.curve:
            if point.mark == percent:
                return point.allocated_percent
        if self.complete and percent <= self.target_percent:
            return self.allocated_percent
        return None


def _granted_milli(pod: Pod) -> int:
    # The scheduler wrote the annotation: read as plain JSON, not validated (a pydantic parse per
    # pod was a measurable part of the replay's CPU per pod).
    raw = (pod.metadata.annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
    core = 0
    for entry in json.loads(raw).get("gpu", ()) if raw else ():
        quantity = entry.get("resources", {}).get(RESOURCE_GPU_CORE)
        core += Quantity.parse(quantity).value() if quantity is not None else 0
    return core * _GPU_CORE_TO_MILLI


def _record(run: StrategyRun) -> None:
    """Curve points for every whole percent the last pod's arrival reached."""
    while True:
        mark = run.curve[-1].mark + 1 if run.curve else 0
        if run.arrived_milli * 100 < mark * run.capacity_milli:
            return
        run.curve.append(
            CurvePoint(
                mark=mark,
                arrived_percent=round(run.arrived_percent, 3),
                allocated_percent=round(run.allocated_percent, 3),
            )
        )


async def replay(
    strategy: str,
    cluster: ClusterDescription,
    capacity_milli: int,
    order: Sequence[Submission],
    *,
    target_percent: float,
    profile: Profile = "default",
    limit: int | None = None,
    progress: Callable[[str], None] | None = None,
    progress_every: int = 500,
) -> StrategyRun:
    """Submit ``order`` (its first ``limit`` pods) one at a time; raises OverAllocationError when
    the audit finds anything over-allocated."""
    submissions = order[:limit] if limit is not None else order
    run = StrategyRun(
        strategy=strategy, profile=profile, capacity_milli=capacity_milli, target_percent=target_percent
    )
    gpu_models = {s.pod_name: s.task.gpu_models for s in submissions if s.task.gpu_models}
    async with in_memory_scheduler(scheduler_config(strategy, profile), cluster) as sched:
        started, cpu_started = time.perf_counter(), time.process_time()
        for submission in submissions:
            task = submission.task
            run.pods += 1
            run.arrived_milli += task.total_gpu_milli
            sched.backend.apply(PODS, Pod.model_validate(pod_manifest(submission)))
            bound = await sched.outcome(NAMESPACE, submission.pod_name)
            if bound is not None:
                run.allocated_milli += _granted_milli(bound)
            elif task.num_gpu:
                run.failed_gpu_pods += 1
                run.failed_gpu_milli += task.total_gpu_milli
            else:
                run.failed_cpu_pods += 1
            if bound is None:
                explanation = sched.app.explanations.get(NAMESPACE, submission.pod_name)
                run.failures.append(
                    Failure(
                        pod=submission.pod_name,
                        cpu_milli=task.cpu_milli,
                        memory_mib=task.memory_mib,
                        num_gpu=task.num_gpu,
                        gpu_milli=task.gpu_milli,
                        arrived_percent=round(run.arrived_percent, 3),
                        reason=explanation.message if explanation else "",
                    )
                )
                await sched.withdraw(NAMESPACE, submission.pod_name)
            if task.num_gpu:
                run.gpu_pods += 1
            else:
                run.cpu_pods += 1
            _record(run)
            if progress is not None and (run.pods % progress_every == 0 or run.pods == len(submissions)):
                elapsed = time.perf_counter() - started
                progress(
                    f"openb {strategy}: {run.pods}/{len(submissions)} pods, "
                    f"{run.pods / elapsed:.1f} pods/s, arrived {run.arrived_percent:.1f}%, "
                    f"allocated {run.allocated_percent:.1f}%, "
                    f"failed {run.failed_gpu_pods} GPU + {run.failed_cpu_pods} CPU-only"
                )
        run.seconds = time.perf_counter() - started
        run.cpu_seconds = time.process_time() - cpu_started
        run.complete = len(submissions) == len(order)
        run.audit = audit(sched.backend, gpu_models)
    if run.audit.violation_count:
        raise OverAllocationError(strategy, run.audit)
    return run
