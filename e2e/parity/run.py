"""The parity run: one fresh cluster, the node set, and every workload given to kube-scheduler and
then to koord-scheduler, one workload at a time, each checked by ``e2e.parity.checker``.

Only one scheduler runs at a time and only one workload's pods exist at a time: a workload runs in
its own namespace (``<scheduler>-<workload>``), step by step, and its pods are deleted (grace 0)
before the next workload starts. kube-scheduler (``.bin/kube-scheduler``, one profile
``kube-parity``, default plugins) runs with the cluster's admin kubeconfig; koord-scheduler (its
default profile) with a token of the chart's ServiceAccount, so that a plugin whose RBAC the chart
lacks fails here as it would in a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apis.client.backend import NotFound
from apis.client.kubernetes import request_json
from apis.core import Node, Pod
from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api, create_all, create_namespace
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.bench.processes import KOORD, KUBE, kube_scheduler, wait_ready
from e2e.cluster.__main__ import apply_description
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_scheduler
from e2e.parity.checker import Violation, bound_pods, check, soft_scores
from e2e.parity.volumes import PersistentVolume, PersistentVolumeClaim
from e2e.parity.workloads import OBJECT_PATHS, Workload
from e2e.scheduler_process import free_port, install_scheduler_rbac
from scheduler.simulator.description import ClusterDescription

__all__ = ["KUBE_PROFILE", "Outcome", "ParityOptions", "ParityReport", "run_parity"]

KUBE_PROFILE = "kube-parity"
"""The schedulerName of kube-scheduler's profile (its pods name it)."""
SCHEDULER_NAMES = {KUBE: KUBE_PROFILE, KOORD: KOORD}
NAMESPACE_PREFIX = {KUBE: "kube", KOORD: "koord"}


@dataclass(frozen=True)
class ParityOptions:
    cluster_name: str = "parity"
    quiet_seconds: float = 1.5
    """A step is settled when every pod is bound or marked unschedulable and nothing changed for
    this long (kube-scheduler retries an unschedulable pod after a backoff of 1 s or more)."""
    step_limit_seconds: float = 20.0
    """A step not settled by then is left as it is (its pending pods count as not bound)."""
    ready_timeout: float = 120.0
    claim_bind_seconds: float = 60.0
    """How long a step's Immediate claims may take to be bound before its pods are created."""
    keep: bool = False
    schedulers: tuple[str, ...] = (KUBE, KOORD)


@dataclass
class Outcome:
    """One workload's result under one scheduler."""

    workload: str
    scheduler: str
    pods: int
    bound: int = 0
    unschedulable: int = 0
    placements: dict[str, str] = field(default_factory=dict)
    """Pod name -> node, for the bound pods."""
    violations: list[Violation] = field(default_factory=list)
    soft: dict[str, float] = field(default_factory=dict)
    unsettled_steps: int = 0
    seconds: float = 0.0


@dataclass
class ParityReport:
    workloads: list[Workload]
    outcomes: list[Outcome] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def outcome(self, workload: str, scheduler: str) -> Outcome | None:
        return next((o for o in self.outcomes if (o.workload, o.scheduler) == (workload, scheduler)), None)


def _scheduler_config(kubeconfig: Path, scheduler_name: str) -> str:
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
        "clientConnection:\n"
        f"  kubeconfig: {kubeconfig}\n"
        "profiles:\n"
        f"- schedulerName: {scheduler_name}\n"
    )


async def _start(cp: ControlPlane, scheduler: str, ready_timeout: float) -> LocalComponent:
    port = free_port()
    if scheduler == KUBE:
        config = cp.state_dir / "kube-scheduler-parity.yaml"
        config.write_text(_scheduler_config(cp.kubeconfig, KUBE_PROFILE))
        component = kube_scheduler(cp, config, port)
        url = f"https://127.0.0.1:{port}/readyz"
    else:
        kubeconfig = await asyncio.to_thread(install_scheduler_rbac, cp)
        config = cp.state_dir / "koord-scheduler-parity.yaml"
        config.write_text(_scheduler_config(kubeconfig, KOORD))
        component = koord_scheduler(cp, kubeconfig=kubeconfig, port=port, config=config, leader_elect=False)
        url = f"http://127.0.0.1:{port}/readyz"
    component.log_file.unlink(missing_ok=True)
    component.start()
    try:
        await wait_ready(component, url, ready_timeout)
    except BaseException:
        component.stop()
        raise
    return component


def _pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def _unschedulable(pod: Pod) -> bool:
    return any(c.type == "PodScheduled" and c.status == "False" for c in pod.status.conditions or ())


async def _list_pods(api: Api, namespace: str) -> list[Pod]:
    items, _ = await api.list(_pods_path(namespace))
    return [Pod.model_validate(item) for item in items]


async def _settle(api: Api, namespace: str, names: set[str], opts: ParityOptions) -> bool:
    """Until every pod of ``names`` is bound or unschedulable and nothing changed for the quiet
    period; False when the step limit passed first."""
    began = time.monotonic()
    last: tuple[tuple[str, str], ...] | None = None
    since = began
    while True:
        pods = [p for p in await _list_pods(api, namespace) if p.metadata.name in names]
        state = tuple(
            sorted(
                (p.metadata.name or "", p.spec.node_name or ("unschedulable" if _unschedulable(p) else ""))
                for p in pods
            )
        )
        now = time.monotonic()
        if state != last:
            last, since = state, now
        decided = len(pods) == len(names) and all(where for _, where in state)
        if decided and now - since >= opts.quiet_seconds:
            return True
        if now - began > opts.step_limit_seconds:
            return False
        await asyncio.sleep(0.2)


async def _delete_pods(api: Api, namespace: str, within: float = 60.0) -> None:
    await request_json(
        api.client,
        "DELETE",
        _pods_path(namespace),
        what=f"delete pods in {namespace}",
        query=[("gracePeriodSeconds", "0")],
        body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
    )
    deadline = time.monotonic() + within
    while await _list_pods(api, namespace):
        if time.monotonic() > deadline:
            raise BenchError(f"{namespace}: pods still present {within:.0f}s after deleting them")
        await asyncio.sleep(0.2)


def _object_path(obj: dict[str, Any], namespace: str) -> str:
    return OBJECT_PATHS[obj["kind"]].format(namespace=namespace)


async def _delete_objects(api: Api, namespace: str, created: list[dict[str, Any]]) -> None:
    """Claims first, then the cluster-scoped objects (their protection finalizers go once nothing
    uses them; the names are the run's own, so nothing waits for them)."""
    if any(o["kind"] == "PersistentVolumeClaim" for o in created):
        path = OBJECT_PATHS["PersistentVolumeClaim"].format(namespace=namespace)
        await request_json(api.client, "DELETE", path, what=f"delete claims in {namespace}")
    for obj in created:
        if obj["kind"] == "PersistentVolumeClaim":
            continue
        path = f"{_object_path(obj, namespace)}/{obj['metadata']['name']}"
        with contextlib.suppress(NotFound):
            await request_json(api.client, "DELETE", path, what=f"delete {path}")


async def _volume_state(
    api: Api, namespace: str
) -> tuple[list[PersistentVolumeClaim], list[PersistentVolume]]:
    claims, _ = await api.list(OBJECT_PATHS["PersistentVolumeClaim"].format(namespace=namespace))
    volumes, _ = await api.list(OBJECT_PATHS["PersistentVolume"])
    return (
        [PersistentVolumeClaim.model_validate(c) for c in claims],
        [PersistentVolume.model_validate(v) for v in volumes],
    )


def _immediate_claims(step: Sequence[dict[str, Any]], created: Sequence[dict[str, Any]]) -> set[str]:
    """The step's claims of a class that binds at once (the PV controller's, not the scheduler's);
    ``created``: every object of the workload so far, the step's included."""
    waiting = {
        o["metadata"]["name"]
        for o in created
        if o["kind"] == "StorageClass" and o.get("volumeBindingMode") == "WaitForFirstConsumer"
    }
    return {
        o["metadata"]["name"]
        for o in step
        if o["kind"] == "PersistentVolumeClaim" and o.get("spec", {}).get("storageClassName") not in waiting
    }


async def _claims_bound(api: Api, namespace: str, names: set[str], within: float) -> None:
    """Until the PV controller has bound every claim of ``names``. Its first try can miss a volume
    its informer has not seen yet, and then it retries only at its next resync: pods created
    before that would be unschedulable under either scheduler, by a race, not by a decision."""
    deadline = time.monotonic() + within
    while True:
        items, _ = await api.list(OBJECT_PATHS["PersistentVolumeClaim"].format(namespace=namespace))
        claims = [PersistentVolumeClaim.model_validate(item) for item in items]
        unbound = names - {c.metadata.name for c in claims if c.spec.volume_name}
        if not unbound:
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"{namespace}: claims {sorted(unbound)} not bound {within:.0f}s after creating them"
            )
        await asyncio.sleep(0.2)


async def _run_workload(
    api: Api, nodes: Sequence[Node], workload: Workload, scheduler: str, opts: ParityOptions
) -> Outcome:
    namespace = f"{NAMESPACE_PREFIX[scheduler]}-{workload.name}"
    outcome = Outcome(workload=workload.name, scheduler=scheduler, pods=workload.pods())
    began = time.monotonic()
    await create_namespace(api, namespace)
    step_of: dict[str, int] = {}
    created: list[dict[str, Any]] = []
    for index, step in enumerate(workload.steps):
        for obj in step.manifests_of_objects(namespace):
            await api.create(_object_path(obj, namespace), obj)
            created.append(obj)
        immediate = _immediate_claims(step.manifests_of_objects(namespace), created)
        if immediate:
            await _claims_bound(api, namespace, immediate, opts.claim_bind_seconds)
        manifests: list[dict[str, Any]] = [
            m for pod_set in step.pods for m in pod_set.manifests(namespace, SCHEDULER_NAMES[scheduler])
        ]
        names = {m["metadata"]["name"] for m in manifests}
        step_of.update({f"{namespace}/{n}": index for n in names})
        await create_all(api, lambda _: _pods_path(namespace), manifests, f"{namespace} step {index}", 8)
        if not await _settle(api, namespace, names, opts):
            outcome.unsettled_steps += 1
    pods = await _list_pods(api, namespace)
    bound = bound_pods(pods)
    outcome.seconds = round(time.monotonic() - began, 1)
    outcome.bound = len(bound)
    outcome.unschedulable = sum(1 for p in pods if not p.spec.node_name and _unschedulable(p))
    outcome.placements = {p.metadata.name or "": p.spec.node_name or "" for p in bound}
    claims, volumes = await _volume_state(api, namespace) if created else ([], [])
    outcome.violations = check(pods, nodes, step_of=step_of, claims=claims, volumes=volumes)
    outcome.soft = soft_scores(pods, nodes)
    await _delete_pods(api, namespace)
    await _delete_objects(api, namespace, created)
    log_progress(
        f"{scheduler} {workload.name}: {outcome.bound}/{outcome.pods} bound, "
        f"{len(outcome.violations)} violation(s) in {outcome.seconds:.1f}s"
    )
    return outcome


async def _create_nodes(api: Api, *, cp: ControlPlane, description: ClusterDescription) -> None:
    """The described nodes (and Devices), Ready and rid of the ``not-ready`` taint (their own
    taints stay)."""
    await asyncio.to_thread(apply_description, cp, description)
    await wait_nodes_schedulable(api, len(description.nodes()), 8, within=60.0)


async def run_parity(
    description: ClusterDescription, workloads: Sequence[Workload], opts: ParityOptions
) -> ParityReport:
    """Every workload under every scheduler of ``opts``; errors land in ``report.errors`` and the
    cluster is stopped in any case (unless ``opts.keep``)."""
    report = ParityReport(workloads=[w for w in workloads if w.enabled()])
    # The PV controller retries a claim it found no volume for at each resync (15 s by default).
    cp = ControlPlane(name=opts.cluster_name, controller_manager_args=(("pvclaimbinder-sync-period", "2s"),))
    api: Api | None = None
    try:
        nodes_step = functools.partial(_create_nodes, cp=cp, description=description)
        api = await start_cluster(cp, nodes_step, connections=8, phases=report.phases)
        node_items, _ = await api.list("/api/v1/nodes")
        nodes = [Node.model_validate(item) for item in node_items]
        for scheduler in opts.schedulers:
            with phase(report.phases, scheduler):
                component = await _start(cp, scheduler, opts.ready_timeout)
                try:
                    for workload in report.workloads:
                        report.outcomes.append(await _run_workload(api, nodes, workload, scheduler, opts))
                finally:
                    component.stop()
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        log_progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep)
    return report
