"""Reservations for the throughput benchmark (``--reservations N``, ``--owner-share S``).

``N`` Reservations (cluster-scoped, template ``schedulerName: koord-scheduler``, 500m CPU and
512Mi) are created and placed by koord-scheduler before the measured pods exist, so they hold
room on their nodes as a real cluster's reservations do. Reservation ``reserved-<i>`` is owned by
the pods labelled ``app=reserved-<i>``: the measured pods carry ``app=bench`` and match none,
except a share ``S`` of them, spread evenly through the workload, labelled
``app=reserved-<k mod N>`` (the k-th such pod), so that they go through the restore path. The
reservations are ``allocateOnce: false``, so every owner pod (not only the first of each) has
its reservation's room restored and allocates from it.

kube-scheduler does not know Reservations: its pods (the same workload, labels included) see no
reserved room.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from e2e.bench.bindings import BindWatcher
from e2e.bench.harness import log_progress
from e2e.bench.kube_api import Api
from e2e.bench.processes import KOORD, wait_ready
from e2e.bench.throughput_model import Options, PlacementResult
from e2e.components import LocalComponent

__all__ = [
    "RESERVATIONS_PATH",
    "RESERVATION_CPU",
    "RESERVATION_MEMORY",
    "PlacedWatcher",
    "count_allocated",
    "owner_label",
    "place_reservations",
    "placed_reservations",
    "reservations",
]

RESERVATIONS_PATH = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
RESERVATION_CPU = "500m"
RESERVATION_MEMORY = "512Mi"


def _name(i: int, count: int) -> str:
    return f"reserved-{i:0{max(5, len(str(count - 1)))}d}"


def reservations(count: int) -> list[dict[str, Any]]:
    """``count`` pending Reservations ``reserved-00000`` ..., each owned by ``app=<its name>``."""
    objects = []
    for i in range(count):
        name = _name(i, count)
        objects.append(
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Reservation",
                "metadata": {"name": name},
                "spec": {
                    "template": {
                        "metadata": {"namespace": "default"},
                        "spec": {
                            "schedulerName": KOORD,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {
                                        "requests": {"cpu": RESERVATION_CPU, "memory": RESERVATION_MEMORY}
                                    },
                                }
                            ],
                        },
                    },
                    "owners": [{"labelSelector": {"matchLabels": {"app": name}}}],
                    "allocateOnce": False,
                },
            }
        )
    return objects


def owner_label(i: int, share: float, count: int) -> str | None:
    """The ``app`` label that makes pod ``i`` of the workload an owner of one of ``count``
    reservations, or None for a pod that owns none: ``floor(pods * share)`` owners, evenly
    spread, the k-th owning ``reserved-<k mod count>``."""
    if count <= 0 or share <= 0:
        return None
    k = int(i * share)
    if int((i + 1) * share) == k:
        return None
    return _name(k % count, count)


def placed_reservations(objects: Sequence[dict[str, Any]], nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The reservations as if already placed (Available, round-robin over ``nodes``), for
    ``koordctl simulate``, which has no placement phase."""
    placed = []
    for i, obj in enumerate(objects):
        placed.append(
            {
                **obj,
                "metadata": {**obj["metadata"], "uid": f"uid-{obj['metadata']['name']}"},
                "status": {
                    "phase": "Available",
                    "nodeName": nodes[i % len(nodes)],
                    "allocatable": {"cpu": RESERVATION_CPU, "memory": RESERVATION_MEMORY},
                },
            }
        )
    return placed


async def count_allocated(api: Api, namespace: str) -> int:
    """The pods of ``namespace`` that koord-scheduler allocated from a reservation."""
    pods, _ = await api.list(f"/api/v1/namespaces/{namespace}/pods")
    return sum(
        1
        for pod in pods
        if ANNOTATION_RESERVATION_ALLOCATED in ((pod.get("metadata") or {}).get("annotations") or {})
    )


class PlacedWatcher(BindWatcher):
    """Counts the reservations koord-scheduler has placed (phase Available with a node)."""

    def __init__(self, api: Api, expected: int) -> None:
        super().__init__(api, "", expected, path=RESERVATIONS_PATH)

    def is_bound(self, obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return status.get("phase") == "Available" and bool(status.get("nodeName"))


async def place_reservations(
    api: Api, opts: Options, component: LocalComponent, ready_url: str
) -> PlacementResult:
    """Run koord-scheduler until it has placed every reservation; the clock runs from its
    ``/readyz`` (or its first placement, if earlier) to the last reservation seen Available."""
    result = PlacementResult(reservations=opts.reservations)
    watcher = PlacedWatcher(api, opts.reservations)
    await watcher.start()
    started = time.monotonic()
    component.log_file.unlink(missing_ok=True)
    component.start()
    try:
        ready_at = await wait_ready(component, ready_url, opts.ready_timeout)
        result.startup_seconds = round(ready_at - started, 2)
        first = watcher.times[0] if watcher.times else ready_at
        clock = min(ready_at, first)

        def progress(count: int) -> None:
            elapsed = time.monotonic() - clock
            log_progress(
                f"reservations: {count}/{opts.reservations} Available in {elapsed:.1f}s "
                f"({count / max(elapsed, 1e-9):.0f}/s)"
            )

        try:
            await watcher.wait(opts.stall_timeout, progress)
        except Exception as exc:
            result.error = str(exc)
        result.placed = len(watcher.times)
        if watcher.times:
            clock = min(clock, watcher.times[0])
            elapsed = max(max(watcher.times) - clock, 1e-9)
            result.seconds = round(elapsed, 3)
            result.per_second = round(result.placed / elapsed, 1)
    finally:
        component.stop()
        await watcher.close()
    log_progress(
        f"reservations: {result.placed}/{opts.reservations} placed by {KOORD} in {result.seconds:.1f}s "
        f"({result.per_second:.0f}/s)"
    )
    return result
