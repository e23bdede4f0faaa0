"""Where koord-scheduler's start-up CPU goes, without a cluster: its imports and its first lists.

``python -m e2e.bench.startup_cpu --nodes 5000 --pending 25000 --bound 25000 [--imports 5]``

The start-up bench's backlog (``startup_time``: the throughput bench's nodes, ``--bound`` pods on
them round-robin, ``--pending`` pods of its one profile) written as the bench's KWOK API server
lists it (pages of 500, no ``apiVersion``/``kind`` on the items; the fields the API server
defaults, its service-account token volume and ``managedFields``; on the bound pods, the status
KWOK writes), then, in process and in CPU seconds (``time.process_time``, so the machine's other
load counts far less than in wall time):

- **imports**: ``--imports`` fresh interpreters each importing ``scheduler.__main__`` (what the
  process does before ``main``), their mean CPU, interpreter included, the bytecode compiled first
  as the image has it (``startup_time.compile_bytecode``);
- **decode**: each page validated as ``KubernetesBackend`` does, with the scheduler's transform
  (each pod's PodInfo made as its page is decoded, ``scheduler.cache.decode_ahead``); with
  ``--streamed``, the pod list as the one compact body a ``resourceVersion=0`` list is, fed in
  chunks of 64 KiB and cut into pages as the backend's first pod list is
  (``apis.client.liststream``), the cutting counted in;
- **handle**: the app's handling of the first node list and of the first pod list: each pod page
  but the last as it is decoded (a LISTED event, as the backend's ``paged_lists`` emits them
  when the API server keeps the list waiting: the plugins' pod informers and the bound pods'
  cache entries, work that then fills those waits), then what is left after the last page (the
  REPLACED: the last page, the queue); the plugins' pod informers each, over both.

Both with the collector as koord-scheduler has it until synced: paused over each bulk, which is
frozen as it ends (``apis.gcpause.freezing_lists``).

The list's HTTP and the API server's own CPU are not here: ``startup_time`` measures those.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from apis.client.backend import NODES, PODS, EventType, ResourceType, WatchEvent
from apis.client.kubernetes import KubernetesBackend
from apis.client.liststream import ListCutter
from apis.core import Node, Pod
from apis.gcpause import freezing_lists, list_paused
from e2e.bench.startup_time import BOUND_NAMESPACE, PENDING_NAMESPACE, PROFILE, compile_bytecode
from e2e.bench.throughput_model import Options
from e2e.bench.throughput_workload import bench_description, scheduler_config, workload
from e2e.cluster.controlplane import repo_root
from scheduler.__main__ import settings_of
from scheduler.app import SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.decode_ahead import decode_ahead
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

__all__ = ["backlog", "import_cpu_seconds", "listed_pages", "main", "measure"]

PAGE_SIZE = 500
_SERVER_TOLERATIONS = [
    {
        "key": f"node.kubernetes.io/{taint}",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    for taint in ("not-ready", "unreachable")
]


def _versions() -> Iterator[int]:
    version = 1000
    while True:
        version += 1
        yield version


def _as_listed(obj: dict[str, Any], version: int) -> dict[str, Any]:
    """``obj`` as the API server lists it: uid, resourceVersion, the defaulted pod fields."""
    obj.pop("apiVersion", None)
    obj.pop("kind", None)
    obj["metadata"].update(
        uid=str(uuid.UUID(int=version)),
        resourceVersion=str(version),
        creationTimestamp="2026-12-06T10:00:00Z",
    )
    spec = obj.get("spec") or {}
    if "containers" in spec:
        for container in spec["containers"]:
            container.update(
                terminationMessagePath="/dev/termination-log",
                terminationMessagePolicy="File",
                imagePullPolicy="IfNotPresent",
            )
        spec.update(
            restartPolicy="Always",
            terminationGracePeriodSeconds=30,
            dnsPolicy="ClusterFirst",
            serviceAccountName="default",
            serviceAccount="default",
            securityContext={},
            priority=0,
            enableServiceLinks=True,
            preemptionPolicy="PreemptLowerPriority",
            tolerations=_SERVER_TOLERATIONS,
        )
        _mount_service_account_token(spec, version)
        bound = bool(spec.get("nodeName"))
        obj["status"] = _kwok_status(version) if bound else {"phase": "Pending", "qosClass": "Burstable"}
        obj["metadata"]["managedFields"] = _managed_fields(obj, bound)
    return obj


_TIME = "2026-12-06T10:00:00Z"
_ROOT_CA = {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}


def _mount_service_account_token(spec: dict[str, Any], version: int) -> None:
    """The ``kube-api-access-*`` volume and mounts the ServiceAccount admission plugin adds."""
    name = f"kube-api-access-{version:05x}"[-21:]
    spec["volumes"] = [
        *spec.get("volumes", ()),
        {
            "name": name,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    _ROOT_CA,
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ],
                "defaultMode": 420,
            },
        },
    ]
    mount = {"name": name, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    for container in spec["containers"]:
        container["volumeMounts"] = [*container.get("volumeMounts", ()), mount]


def _kwok_status(version: int) -> dict[str, Any]:
    """A running pod's status as KWOK's pod stages write it."""
    ip = f"10.{version >> 16 & 255}.{version >> 8 & 255}.{version & 255}"
    condition = {"status": "True", "lastProbeTime": None, "lastTransitionTime": _TIME}
    return {
        "phase": "Running",
        "conditions": [{"type": t, **condition} for t in ("Initialized", "Ready", "ContainersReady")],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": _TIME,
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": _TIME}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": "registry.k8s.io/pause:3.10",
                "imageID": "",
            }
        ],
        "qosClass": "Burstable",
    }


def _fields_v1(value: Any) -> Any:
    """``value``'s keys as server-side apply's ``fieldsV1`` names them (lists by their names)."""
    if isinstance(value, dict):
        return {f"f:{k}": _fields_v1(v) for k, v in value.items()} | ({".": {}} if value else {})
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return {f'k:{{"name":"{v["name"]}"}}': _fields_v1(v) for v in value}
    return {}


def _managed_fields(obj: dict[str, Any], bound: bool) -> list[dict[str, Any]]:
    """The creator's ``managedFields`` entry and, on a bound pod, KWOK's for the status."""
    entry = {"operation": "Update", "apiVersion": "v1", "time": _TIME, "fieldsType": "FieldsV1"}
    spec = {k: v for k, v in obj["spec"].items() if k not in ("volumes", "tolerations", "priority")}
    created = {"f:metadata": {"f:labels": _fields_v1(obj["metadata"].get("labels", {}))}}
    created |= {"f:spec": _fields_v1(spec)}
    managed = [{"manager": "koordinator-py-bench", **entry, "fieldsV1": created}]
    if bound:
        status = {"f:status": _fields_v1(obj["status"])}
        managed.append({"manager": "kwok-controller", **entry, "fieldsV1": status, "subresource": "status"})
    return managed


def listed_pages(items: list[dict[str, Any]], resource_version: int) -> list[bytes]:
    """``items`` as the bodies of a paginated list."""
    pages = []
    for start in range(0, len(items), PAGE_SIZE):
        metadata: dict[str, Any] = {"resourceVersion": str(resource_version)}
        if start + PAGE_SIZE < len(items):
            metadata["continue"] = f"page-{start + PAGE_SIZE}"
        body = {
            "kind": "List",
            "apiVersion": "v1",
            "metadata": metadata,
            "items": items[start : start + PAGE_SIZE],
        }
        pages.append(json.dumps(body).encode())
    return pages


def streamed_pages(items: list[dict[str, Any]], resource_version: int) -> Iterator[bytes]:
    """``items`` as one compact list body (written here, before the clock runs) fed in chunks of
    ``STREAM_CHUNK`` bytes, cut into pages as ``KubernetesBackend``'s streamed first list cuts it
    (a page that does not parse is a bug here: the body is valid), the last being
    ``ListCutter.end``'s: the cutting runs as the pages are asked for."""
    listed = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(resource_version)}}
    body = json.dumps({**listed, "items": items}, separators=(",", ":")).encode()

    def cut() -> Iterator[bytes]:
        cutter = ListCutter()
        for start in range(0, len(body), STREAM_CHUNK):
            cutter.feed(body[start : start + STREAM_CHUNK])
            while (page := cutter.page()) is not None:
                yield page
        yield cutter.end()

    return cut()


STREAM_CHUNK = 1 << 16


def import_cpu_seconds(runs: int) -> float:
    """Mean CPU seconds of a fresh interpreter importing ``scheduler.__main__``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run([sys.executable, "-c", "import scheduler.__main__"], check=True, env=os.environ.copy())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / runs


def _cpu_timed(
    seconds: dict[str, float], name: str, listener: Callable[[Any], None]
) -> Callable[[Any], None]:
    def timed(event: Any) -> None:
        began = time.process_time()
        try:
            listener(event)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.process_time() - began

    return timed


def _listener_label(listener: Callable[..., Any]) -> str:
    owner = getattr(listener, "__self__", None)
    if owner is None:
        return getattr(listener, "__qualname__", repr(listener))
    return f"{type(owner).__module__.removeprefix('scheduler.plugins.')}.{type(owner).__name__}"


def backlog(
    nodes: int, pending: int, bound: int, *, streamed: bool = False
) -> tuple[Options, list[bytes], Iterable[bytes]]:
    """The throughput options of the cluster, and its node and pod lists' pages (``streamed``: the
    pods' cut as they come, ``streamed_pages``)."""
    opts = Options(nodes=nodes, pods=max(pending, 1), cluster_name="startup-cpu")
    versions = _versions()
    node_items = [_as_listed(n, next(versions)) for n in bench_description(opts).nodes()]
    names = [n["metadata"]["name"] for n in node_items]
    on_nodes = workload(BOUND_NAMESPACE, PROFILE, bound)
    for i, pod in enumerate(on_nodes):
        pod["spec"]["nodeName"] = names[i % len(names)]
    pod_items = [
        _as_listed(p, next(versions)) for p in on_nodes + workload(PENDING_NAMESPACE, PROFILE, pending)
    ]
    last = next(versions)
    pod_pages = streamed_pages(pod_items, last) if streamed else listed_pages(pod_items, last)
    return opts, listed_pages(node_items, last), pod_pages


async def measure(nodes: int, pending: int, bound: int, *, streamed: bool = False) -> dict[str, float]:
    """CPU seconds per step of decoding and handling the first lists (module docstring; the plugin
    informers' lines are parts of the two pod-handling lines, summed over both); raises
    when the app did not end synced with every pending pod queued and every bound pod cached."""
    opts, node_pages, pod_pages = backlog(nodes, pending, bound, streamed=streamed)
    config = load_config(scheduler_config(opts, Path("unused"), PROFILE), DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    settings = settings_of(config)
    app = SchedulerApp(settings, MemoryBackend(), DEFAULT_REGISTRY, SchedulerMetrics())
    seconds: dict[str, float] = {}
    decoder = KubernetesBackend.__new__(KubernetesBackend)  # only its page decoding is used
    decoder._transforms = {PODS: decode_ahead}

    def decode(
        kind: ResourceType[Any],
        pages: Iterable[bytes],
        handle_page: Callable[[list[Any]], None] | None = None,
    ) -> list[Any]:
        decoding = handling = 0.0
        objects: list[Any] = []
        pending_page: list[Any] | None = None  # the last page comes with the list: handled one late
        page_iter = iter(pages)
        while True:
            began = time.process_time()
            page = next(page_iter, None)
            if page is None:
                decoding += time.process_time() - began
                break
            with list_paused():
                items = decoder._decode_page(kind, page, f"list {kind.plural}")[0]
            objects.extend(items)
            decoding += time.process_time() - began
            if handle_page is not None and pending_page is not None:
                began = time.process_time()
                handle_page(pending_page)
                handling += time.process_time() - began
            pending_page = items
        seconds[f"decode {kind.plural}"] = decoding
        if handle_page is not None:
            seconds[f"handle the {kind.kind.lower()} pages as they come"] = handling
        return objects

    # As SchedulerApp.run until synced: each list bulk frozen as it ends (for no test's app).
    freezing = freezing_lists() if settings.freeze_synced_objects else contextlib.nullcontext()
    try:
        with freezing:
            listed_nodes: list[Node] = decode(NODES, node_pages)
            began = time.process_time()
            app.handlers.handle_node_event(WatchEvent(EventType.REPLACED, objects=tuple(listed_nodes)))
            seconds["handle the node list"] = time.process_time() - began
            listener_seconds: dict[str, float] = {}
            listeners = app.handlers.pod_listeners
            listeners[:] = [
                _cpu_timed(listener_seconds, f"  plugin informer {_listener_label(f)}", f) for f in listeners
            ]

            def listed(page: list[Pod]) -> None:
                app.handlers.handle_pod_event(WatchEvent(EventType.LISTED, objects=tuple(page)))

            listed_pods: list[Pod] = decode(PODS, pod_pages, listed)
            began = time.process_time()
            app.handlers.handle_pod_event(WatchEvent(EventType.REPLACED, objects=tuple(listed_pods)))
            seconds["handle the pod list after its last page"] = time.process_time() - began
    finally:
        if settings.freeze_synced_objects:
            gc.unfreeze()
    seconds.update(listener_seconds)
    queued = sum(1 for _ in app.queue.pending())
    cached = sum(1 for _ in app.cache.assigned_pods())
    if not app.handlers.synced or (queued, cached, len(app.cache.nodes)) != (pending, bound, nodes):
        raise RuntimeError(
            f"handled {queued} pending pods, {cached} bound pods, {len(app.cache.nodes)} nodes"
        )
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=25000)
    parser.add_argument("--bound", type=int, default=25000)
    parser.add_argument("--imports", type=int, default=5, help="interpreters timed importing; 0: none")
    parser.add_argument("--streamed", action="store_true", help="the pod list as one body, cut as it comes")
    args = parser.parse_args(argv)
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    seconds: dict[str, float] = {}
    if args.imports:
        compile_bytecode(repo_root())
        seconds[f"imports (mean of {args.imports})"] = import_cpu_seconds(args.imports)
    seconds.update(asyncio.run(measure(args.nodes, args.pending, args.bound, streamed=args.streamed)))
    shape = "one body, cut as it streams" if args.streamed else "pages of 500"
    print(f"{args.nodes} nodes, {args.pending} pending + {args.bound} bound pods ({shape}); CPU seconds")
    for name, value in seconds.items():
        print(f"{name:58s} {value:7.3f}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
