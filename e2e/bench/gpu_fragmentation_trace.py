"""The replayed mixed GPU trace of the fragmentation benchmark: shapes, arrivals and departures.

Arrivals are a Poisson process (mean gap 1 time unit), durations exponential; the mean duration
is chosen so that the offered GPU load is ``load`` times the cluster's GPUs. The same seed gives
the same trace, so every strategy replays exactly the same events.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any, Literal

from scheduler.plugins.device_share.request import GPURequest

__all__ = ["SHAPES", "Event", "Shape", "make_trace", "pod_manifest"]


@dataclass(frozen=True, slots=True)
class Shape:
    label: str
    gpus: float
    """GPUs asked for in total (a share of one card below 1)."""
    limits: dict[str, str]
    """The container's GPU requests (and limits)."""
    request: GPURequest
    """The same, as DeviceShare reads it (the mix the bench measures fragmentation for)."""
    popularity: float


def _shared(label: str, percent: int, popularity: float) -> Shape:
    limits = {"koordinator.sh/gpu-core": str(percent), "koordinator.sh/gpu-memory-ratio": str(percent)}
    return Shape(label, percent / 100, limits, GPURequest(1, percent, percent, None), popularity)


def _whole(count: int, popularity: float) -> Shape:
    return Shape(
        f"{count} GPU", count, {"nvidia.com/gpu": str(count)}, GPURequest(count, 100, 100, None), popularity
    )


SHAPES: tuple[Shape, ...] = (
    _shared("1/8 GPU", 12, 0.20),
    _shared("1/2 GPU", 50, 0.25),
    _whole(1, 0.30),
    _whole(2, 0.10),
    _whole(4, 0.10),
    _whole(8, 0.05),
)
"""Shapes and how often they arrive: mostly shared and one-card pods, few large ones, as in the
GPU-sharing traces FGD studies (1/8 GPU is 12% of a card's cores and memory)."""


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: Literal["arrive", "depart"]
    pod: int
    shape: Shape


def make_trace(pods: int, total_gpus: int, load: float, seed: int) -> list[Event]:
    """``pods`` arrivals and their departures, in time order."""
    rng = random.Random(seed)
    mean_gpus = sum(s.gpus * s.popularity for s in SHAPES) / sum(s.popularity for s in SHAPES)
    mean_duration = load * total_gpus / mean_gpus
    events: list[tuple[float, int, Event]] = []
    now = 0.0
    for index in range(pods):
        now += rng.expovariate(1.0)
        shape = rng.choices(SHAPES, weights=[s.popularity for s in SHAPES])[0]
        leave = now + rng.expovariate(1.0 / mean_duration)
        heapq.heappush(events, (now, 1, Event(now, "arrive", index, shape)))
        heapq.heappush(events, (leave, 0, Event(leave, "depart", index, shape)))
    return [heapq.heappop(events)[2] for _ in range(len(events))]


def pod_manifest(event: Event, namespace: str) -> dict[str, Any]:
    """The Pod an arrival creates (1 CPU, 4Gi, its GPU shape)."""
    resources = {"cpu": "1", "memory": "4Gi", **event.shape.limits}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"job-{event.pod}", "namespace": namespace},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }
