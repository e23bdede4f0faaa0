"""Where each pod's CPU goes in ``koordctl simulate``: per phase of the cycle and per plugin.

``python -m e2e.bench.cycle_phases --nodes 1000 --pods 3000 [--workload mixed|identical]`` runs
the throughput bench's workload (``mixed`` requests, or ``identical``: the replicas of one
Deployment) in process (as ``scheduler_throughput``'s simulate row does) with the scheduler's
phases wrapped in CPU-time counters (``time.thread_time``: the machine's other load counts far
less than in wall time), and prints, per pod, the process's CPU and each phase's and each plugin
call's. Phases nest (``_select`` holds PreScore and Score; a plugin's figure is inside its
extension point's), so the lines do not add up to the total; what is outside every line is the
harness's submission, the queue, the binder's awaits and the event loop. ``--pod-by-pod`` turns
the equivalence classes off (every pod filtered and scored alone), the baseline of their gain. The
wrappers cost a little each: compare the figures of one run with each other, not with a run
without them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apis.core import Pod
from e2e.bench.processes import KOORD
from e2e.bench.scheduler_throughput import parse_args
from e2e.bench.throughput_model import KOORD_NAMESPACE, WORKLOADS, WorkloadKind
from e2e.bench.throughput_workload import bench_description, scheduler_config, workload
from scheduler import loop
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache
from scheduler.events import EventHandlers
from scheduler.framework.runtime import Framework
from scheduler.metrics import SchedulerMetrics
from scheduler.simulator.run import simulate

__all__ = ["PhaseClock", "main"]

_FRAMEWORK_POINTS = (
    "run_pre_filter",
    "run_filter",
    "run_pre_score",
    "run_score",
    "run_reserve",
    "run_permit",
    "run_post_bind",
)
_PLUGIN_METHODS = ("pre_filter", "filter", "pre_score", "score", "normalize_scores", "reserve", "permit")


class PhaseClock:
    """CPU seconds and calls per label, from the wrapped callables."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.thread_time() - started
                self.calls[label] += 1

        return wrapper

    def wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)
        if not inspect.iscoroutinefunction(fn):  # awaits would count other tasks' time
            setattr(owner, name, self.timed(label, fn))

    def install(self) -> None:
        """Wrap the phases (class attributes, restored by ``uninstall``) and, through the
        Framework's constructor, every plugin's cycle methods."""
        self._saved = [
            (owner, name, getattr(owner, name))
            for owner, name in [
                *((Framework, point) for point in _FRAMEWORK_POINTS),
                (Framework, "__init__"),
                (loop.SchedulingLoop, "_select"),
                (Cache, "assume"),
                (EventHandlers, "handle_pod_event"),
                (SchedulerMetrics, "observe_extension_point"),
                (SchedulerMetrics, "observe_plugin"),
                (MemoryBackend, "apply"),
            ]
        ]
        for point in _FRAMEWORK_POINTS:
            self.wrap(Framework, point, f"framework.{point}")
        self.wrap(loop.SchedulingLoop, "_select", "loop._select (PreScore, Score, the pick)")
        self.wrap(Cache, "assume", "cache.assume")
        self.wrap(EventHandlers, "handle_pod_event", "events.handle_pod_event (informers)")
        self.wrap(SchedulerMetrics, "observe_extension_point", "metrics.observe_extension_point")
        self.wrap(SchedulerMetrics, "observe_plugin", "metrics.observe_plugin")
        self.wrap(MemoryBackend, "apply", "backend.apply (the harness submitting)")
        built = Framework.__init__
        clock = self

        def init(framework: Framework, *args: Any, **kwargs: Any) -> None:
            built(framework, *args, **kwargs)
            for plugin_name, plugin in framework.plugins.items():
                for method in _PLUGIN_METHODS:
                    if callable(getattr(plugin, method, None)):
                        clock.wrap(plugin, method, f"  {plugin_name}.{method}")

        setattr(Framework, "__init__", init)  # noqa: B010 - mypy refuses assigning to __init__

    def uninstall(self) -> None:
        for owner, name, fn in self._saved:
            setattr(owner, name, fn)

    def report(self, pods: int, cpu_seconds: float, smallest_ms: float = 0.004) -> list[str]:
        lines = [f"process CPU {cpu_seconds:.2f} s = {cpu_seconds / pods * 1000:.3f} ms per pod"]
        for label, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            per_pod = seconds / pods * 1000
            if per_pod >= smallest_ms:
                lines.append(
                    f"  {label:50s} {per_pod:7.3f} ms  ({self.calls[label] / pods:.1f} calls per pod)"
                )
        return lines


async def measure(nodes: int, pods: int, kind: WorkloadKind = "mixed", *, classes: bool = True) -> list[str]:
    opts, _ = parse_args(["--nodes", str(nodes), "--pods", str(pods), "--workload", kind])
    description = bench_description(opts)
    models = [Pod.model_validate(p) for p in workload(KOORD_NAMESPACE, KOORD, opts.pods, kind=kind)]
    config_text = scheduler_config(opts, Path("kubeconfig-unused"), KOORD)
    clock = PhaseClock()
    clock.install()
    try:
        started = time.process_time()
        result = await simulate(description, models, config_text=config_text, equivalence_classes=classes)
        cpu = time.process_time() - started
    finally:
        clock.uninstall()
    bound = len(result.scheduled)
    rate = f"{result.seconds:.1f} s ({result.pods_per_second:.0f} pods/s)"
    how = "" if classes else ", pod by pod"
    header = f"{bound}/{pods} {kind} pods bound on {nodes} nodes in {rate}{how}"
    return [header, *clock.report(max(bound, 1), cpu)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--workload", choices=WORKLOADS, default="mixed")
    parser.add_argument(
        "--pod-by-pod", action="store_true", help="no equivalence classes: each pod filtered and scored alone"
    )
    args = parser.parse_args(argv)
    lines = asyncio.run(measure(args.nodes, args.pods, args.workload, classes=not args.pod_by_pod))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
