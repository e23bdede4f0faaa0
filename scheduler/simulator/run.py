"""``koordctl simulate``: the real scheduler (same app, plugins and config) on the in-memory backend.

The simulation starts the app on a cluster built from a description, submits every pod of the
workload at once, and stops when every pod is bound or the queue has nothing left to try (every
remaining pod is unschedulable and nothing is in flight). Pods that name no schedulerName are
scheduled by the first profile, since simulating is asking "where would koord-scheduler put these".
Storage objects in the workload are applied first; ``pv_controller`` completes the volume bindings
the scheduler starts, as kube-controller-manager would.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from apis.client.backend import DEVICES, NODES, PODS, ResourceType
from apis.core import Pod
from apis.errors import InvalidValue
from apis.gcpause import freezing_lists, gc_paused
from apis.resources import from_int_units
from apis.yamltext import load_yaml_documents
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.framework.registry import Registry
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.simulator.description import ClusterDescription
from scheduler.simulator.expand import CUSTOM_KINDS, MAX_PODS, expand_document
from scheduler.simulator.pv_controller import run_pv_controller

__all__ = [
    "MAX_PODS",
    "Placement",
    "SimulationResult",
    "load_custom_resources",
    "load_workload",
    "render",
    "simulate",
]


@dataclass
class Placement:
    namespace: str
    name: str
    node: str | None
    reason: str = ""


@dataclass
class SimulationResult:
    nodes: int
    placements: list[Placement]
    seconds: float
    utilisation: dict[str, dict[str, str | float]] = field(default_factory=dict)

    @property
    def scheduled(self) -> list[Placement]:
        return [p for p in self.placements if p.node]

    @property
    def pending(self) -> list[Placement]:
        return [p for p in self.placements if not p.node]

    @property
    def pods_per_second(self) -> float:
        return len(self.scheduled) / self.seconds if self.seconds > 0 else 0.0


def load_workload(path: str | Path) -> list[Pod]:
    """Pods from a YAML stream: Pods, Lists, and the pod templates of Deployments, ReplicaSets,
    StatefulSets (``replicas``) and Jobs (``parallelism``), expanded to ``<name>-<index>``."""
    pods: list[Pod] = []
    for doc in _documents(path):
        for pod in expand_document(doc):
            pods.append(pod)
            if len(pods) > MAX_PODS:
                raise InvalidValue(f"{path}: the workload expands to more than {MAX_PODS} pods")
    return pods


def _documents(path: str | Path) -> list[dict[str, Any]]:
    docs = load_yaml_documents(Path(path).read_text(encoding="utf-8"), str(path))
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise InvalidValue(f"{path}: document {index + 1} is a {type(doc).__name__}, not an object")
    return docs


def load_custom_resources(path: str | Path) -> list[tuple[ResourceType[Any], Any]]:
    """The PodGroups, ClusterNetworkTopologies and storage objects (PersistentVolumeClaims,
    PersistentVolumes, StorageClasses, CSINodes) of a workload file (applied before its pods)."""
    return [
        (CUSTOM_KINDS[d["kind"]], CUSTOM_KINDS[d["kind"]].model.model_validate(d))
        for d in _documents(path)
        if d.get("kind") in CUSTOM_KINDS
    ]


def cluster_backend(
    cluster: ClusterDescription, custom_resources: Iterable[tuple[ResourceType[Any], Any]] = ()
) -> MemoryBackend:
    """The in-memory API server holding the description's nodes and Devices (its GPU pools:
    DeviceShare allocates their cards) and ``custom_resources``."""
    backend = MemoryBackend()
    for node in cluster.nodes():
        backend.apply(NODES, node)
    for device in cluster.devices():
        backend.apply(DEVICES, DEVICES.model.model_validate(device))
    for resource, obj in custom_resources:
        backend.apply(resource, obj)
    return backend


def memory_app(
    config_text: str,
    backend: MemoryBackend,
    registry: Registry = DEFAULT_REGISTRY,
    *,
    backoff_seconds: tuple[float, float] = (0.01, 0.05),
    equivalence_classes: bool = True,
    freeze_synced_objects: bool = False,
) -> SchedulerApp:
    """koord-scheduler with the KubeSchedulerConfiguration ``config_text`` on ``backend`` (not
    started). Backoff (initial, max) only spaces retries in time and changes no placement, so the
    simulations keep it short. ``freeze_synced_objects``: the collector regime of the
    ``koord-scheduler`` process (``AppSettings.freeze_synced_objects``), for a caller that
    unfreezes what the app froze when it is done with it."""
    config = load_config(config_text, DEFAULT_PLUGINS, registry)
    settings = AppSettings(
        profiles=tuple(config.profiles),
        parallelism=config.parallelism,
        pod_initial_backoff_seconds=backoff_seconds[0],
        pod_max_backoff_seconds=backoff_seconds[1],
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
        equivalence_classes=equivalence_classes,
        freeze_synced_objects=freeze_synced_objects,
    )
    return SchedulerApp(settings, backend, registry, SchedulerMetrics())


async def simulate(
    cluster: ClusterDescription,
    pods: list[Pod],
    *,
    config_text: str | None = None,
    registry: Registry = DEFAULT_REGISTRY,
    settle_seconds: float = 0.05,
    custom_resources: Iterable[tuple[ResourceType[Any], Any]] = (),
    equivalence_classes: bool = True,
) -> SimulationResult:
    config_text = config_text or DEFAULT_CONFIG_YAML
    # What the run makes stays alive until its end (the cluster, the workload, each bound pod with
    # its PodInfo and events), and every full collection walked it all: a fifth of the CPU of
    # 10,000 pods before the cluster and the workload were frozen, and then still 4% (0.5 of 12 s
    # for 10,000 mixed pods) as the bound pods piled up. It is moved out of the collector's reach
    # as it is made: the first lists as the app handles them (``freezing_lists``), the workload
    # once applied, and what the run keeps at every check of its progress; young collections
    # still free what dies meanwhile.
    # Only if nothing else froze objects, so that unfreezing at the end hands back exactly what
    # this run froze.
    freezing = gc.get_freeze_count() == 0
    backend = cluster_backend(cluster, custom_resources)
    app = memory_app(config_text, backend, registry, equivalence_classes=equivalence_classes)
    default_scheduler = app.settings.profiles[0].scheduler_name
    stop = asyncio.Event()
    try:
        with freezing_lists() if freezing else contextlib.nullcontext():
            runner = asyncio.create_task(app.run(stop))
            pv_controller = asyncio.create_task(run_pv_controller(backend))
            await app.handlers.synced_nodes.wait()
            await app.handlers.synced_pods.wait()
        started = time.perf_counter()
        with gc_paused():  # thousands of pods, all kept: no garbage cycles to look for
            for pod in pods:
                if not pod.spec.scheduler_name:
                    pod = pod.model_copy(
                        update={"spec": pod.spec.model_copy(update={"scheduler_name": default_scheduler})}
                    )
                backend.apply(PODS, pod)
            if freezing:
                # Before the collector is back on: its first young collection would otherwise walk
                # everything the loop made, all of it young (0.2 s of CPU for 20,000 pods).
                gc.freeze()
        finished = await _settle(app, backend, len(pods), started, settle_seconds, freezing)
        stop.set()
        await runner
    finally:
        if freezing:
            gc.unfreeze()
    pv_controller.cancel()
    placements = []
    for stored in backend.list(PODS):
        meta = stored.metadata
        namespace, name = meta.namespace or "default", meta.name or ""
        explanation = app.explanations.get(namespace, name)
        reason = "" if stored.spec.node_name else (explanation.message if explanation else "not attempted")
        placements.append(Placement(namespace, name, stored.spec.node_name, reason))
    placements.sort(key=lambda p: (p.namespace, p.name))
    return SimulationResult(
        nodes=app.cache.node_count(),
        placements=placements,
        seconds=max(finished - started, 1e-9),
        utilisation=_utilisation(app),
    )


async def _settle(
    app: SchedulerApp,
    backend: MemoryBackend,
    pods: int,
    started: float,
    settle_seconds: float,
    freezing: bool,
) -> float:
    """When the last pod was bound: waits until every pod is bound or nothing is left to try.
    ``freezing``: what is alive at each check is frozen (see ``simulate``)."""
    finished = started
    last_bound = -1
    while True:
        await asyncio.sleep(settle_seconds)
        if freezing:
            gc.freeze()
        bound = len(backend.bindings)
        if bound != last_bound:  # still making progress
            finished, last_bound = time.perf_counter(), bound
            if bound >= pods:
                return finished
            continue
        if _quiet(app):
            return finished


def _quiet(app: SchedulerApp) -> bool:
    """Nothing left to try: no pod waits its turn or is in a cycle or a binding, and no plugin works
    for pods off the cycle (a gang's placement being solved, victims being evicted)."""
    counts = app.queue.counts()
    return (
        counts.active == 0
        and counts.backoff == 0
        and app.queue.in_flight() == 0
        and app.binder.in_flight == 0
        and all(fwk.off_cycle_tasks() == 0 for fwk in app.frameworks.values())
    )


def _utilisation(app: SchedulerApp) -> dict[str, dict[str, str | float]]:
    table = app.cache.table
    rows = table.active_rows()
    result: dict[str, dict[str, str | float]] = {}
    for name, col in sorted(table.column.items()):
        allocatable = int(table.allocatable[rows, col].sum())
        if allocatable <= 0:
            continue
        requested = int(table.requested[rows, col].sum())
        result[name] = {
            "requested": str(from_int_units(name, requested)),
            "allocatable": str(from_int_units(name, allocatable)),
            "ratio": round(requested / allocatable, 4),
        }
    return result


def render(result: SimulationResult, output: str = "table") -> str:
    if output == "json":
        return json.dumps(
            {
                "nodes": result.nodes,
                "scheduled": len(result.scheduled),
                "pending": len(result.pending),
                "seconds": round(result.seconds, 4),
                "podsPerSecond": round(result.pods_per_second, 1),
                "utilisation": result.utilisation,
                "placements": [asdict(p) for p in result.placements],
            },
            indent=2,
        )
    wide = output == "wide"
    header = ["NAMESPACE", "NAME", "NODE", "STATUS"] + (["REASON"] if wide else [])
    rows = [
        [p.namespace, p.name, p.node or "<none>", "Scheduled" if p.node else "Pending"]
        + ([p.reason] if wide else [])
        for p in result.placements
    ]
    lines = _table([header, *rows])
    if result.pending and not wide:
        lines.append("")
        lines.append("Pending pods:")
        lines.extend(f"  {p.namespace}/{p.name}: {p.reason}" for p in result.pending)
    lines.append("")
    lines.append(
        f"{len(result.scheduled)} scheduled, {len(result.pending)} pending on {result.nodes} nodes "
        f"in {result.seconds:.3f}s ({result.pods_per_second:.0f} pods/s)"
    )
    for name, figures in result.utilisation.items():
        lines.append(
            f"  {name}: {figures['requested']} of {figures['allocatable']} requested "
            f"({float(figures['ratio']) * 100:.1f}%)"
        )
    return "\n".join(lines)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
