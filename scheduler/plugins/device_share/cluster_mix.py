"""The mix of GPU request shapes of the pods in the cluster, as the Fragmentation strategy weighs it
with ``fragmentation.mix: Cluster`` (the default).

Every pod that asks for GPUs counts once while it is in the cluster, bound or pending, whatever
scheduler it names: its shape with weight 1 and the cpu and memory it asks of its node. A pod that
ends or is deleted once placed leaves the mix; one deleted while pending stays among the last
``UNSERVED_KEPT`` such pods (demand the cluster could not meet). FGD (ATC'23) scores against
the whole workload's distribution; the cluster's pods are the closest a scheduler gets to it, and
unlike the recent pods (``request_mix.RequestMix``, ``mix: Recent``) they do not swing with a
burst of one shape. The mix keeps the ``max_shapes`` most common shapes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from scheduler.plugins.device_share.host_means import HostMeans
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["UNSERVED_KEPT", "ClusterMix"]

UNSERVED_KEPT = 4096
"""Pods deleted while pending that the mix keeps counting, the most recent."""


class ClusterMix(HostMeans):
    def __init__(self, max_shapes: int) -> None:
        if max_shapes <= 0:
            raise ValueError("max_shapes must be positive")
        self._max_shapes = max_shapes
        self._pods: dict[str, tuple[GPURequest, tuple[int, int]]] = {}
        self._count: dict[GPURequest, int] = {}
        self._unserved: OrderedDict[str, None] = OrderedDict()
        """Pods deleted while pending, still counted (``leave``), oldest first."""
        self._host: dict[GPURequest, tuple[int, int]] = {}
        """Summed cpu (milli) and memory (bytes) the shape's pods ask of their node."""
        self.version = 0
        """Changes whenever the weights or the hosts change."""

    def uids(self) -> list[str]:
        """The pods counted that are still in the cluster."""
        return [uid for uid in self._pods if uid not in self._unserved]

    def add(self, uid: str, request: GPURequest, host: tuple[int, int] = (0, 0)) -> None:
        """The pod ``uid`` asks for ``request`` (again: its latest request counts)."""
        self._unserved.pop(uid, None)
        if self._pods.get(uid) == (request, host):
            return
        self.remove(uid)
        self.version += 1
        self._pods[uid] = (request, host)
        self._count[request] = self._count.get(request, 0) + 1
        cpu, memory = self._host.get(request, (0, 0))
        self._host[request] = (cpu + host[0], memory + host[1])

    def leave(self, uid: str, served: bool) -> None:
        """The pod is gone; one that was never ``served`` (deleted while pending) stays in the mix
        among the last ``UNSERVED_KEPT`` such pods: its shape is the demand the cluster could not meet,
        and were it dropped the shapes that fail most (whole nodes) would fade from the mix."""
        if served or uid not in self._pods:
            self.remove(uid)
            return
        self._unserved[uid] = None
        self._unserved.move_to_end(uid)
        if len(self._unserved) > UNSERVED_KEPT:
            oldest, _ = self._unserved.popitem(last=False)
            self.remove(oldest)

    def remove(self, uid: str) -> None:
        self._unserved.pop(uid, None)
        entry = self._pods.pop(uid, None)
        if entry is None:
            return
        self.version += 1
        request, host = entry
        left = self._count[request] - 1
        if left:
            self._count[request] = left
            cpu, memory = self._host[request]
            self._host[request] = (cpu - host[0], memory - host[1])
        else:
            del self._count[request]
            del self._host[request]

    def weights_seen(self) -> dict[GPURequest, float]:
        """The ``max_shapes`` most common shapes, weighted by their pods."""
        common = sorted(self._count.items(), key=lambda item: item[1], reverse=True)[: self._max_shapes]
        return {shape: float(count) for shape, count in common}

    def weights(self, current: GPURequest) -> dict[GPURequest, float]:
        """The mix to score ``current`` against, ``current`` among it with weight 1 at least."""
        weights = self.weights_seen()
        weights[current] = max(weights.get(current, 0.0), 1.0)
        return weights

    def hosts_seen(self) -> dict[GPURequest, tuple[int, int]]:
        """The mean cpu and memory a pod of each shape asks of its node."""
        return dict(zip(self._host, self.hosts_of(self._host), strict=True))

    def hosts_of(
        self,
        shapes: Iterable[GPURequest],
        current: GPURequest | None = None,
        current_host: tuple[int, int] = (0, 0),
    ) -> list[tuple[int, int]]:
        """``hosts(current, current_host)`` (``hosts_seen`` where ``current`` is None) of ``shapes``
        in order, (0, 0) for a shape of neither: the mix counts every shape, the Fragmentation
        strategy asks for the ``max_shapes`` most common."""
        means = []
        for shape in shapes:
            summed = self._host.get(shape)
            if summed is None:
                means.append(current_host if shape == current else (0, 0))
            else:
                count = self._count[shape]
                means.append((round(summed[0] / count), round(summed[1] / count)))
        return means
