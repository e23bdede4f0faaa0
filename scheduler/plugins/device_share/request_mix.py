"""The recent mix of GPU request shapes, as the Fragmentation scoring strategy weighs it.

Every pod that asks for GPUs adds its shape with weight 1; all weights decay by half every
``half_life`` pods, so the mix follows the workload as it changes. At most ``max_shapes`` shapes
are kept (the lightest go first) and a shape whose weight has decayed below ``_FORGET`` is
forgotten, so the mix stays small however many pods pass.

Each shape also carries the cpu and memory its pods ask of their node (``host``): the mean over
its pods, weighted as the shapes are, so that a GPU whose node has too little CPU left for the
shape's pods counts as fragmented for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.plugins.device_share.host_means import HostMeans
from scheduler.plugins.device_share.request import GPURequest

__all__ = ["RequestMix"]

_FORGET = 1e-3


class RequestMix(HostMeans):
    def __init__(self, half_life: int, max_shapes: int) -> None:
        if half_life <= 0 or max_shapes <= 0:
            raise ValueError("half_life and max_shapes must be positive")
        self._decay = 0.5 ** (1.0 / half_life)
        self._max_shapes = max_shapes
        self._weights: dict[GPURequest, float] = {}
        self._hosts: dict[GPURequest, tuple[float, float]] = {}
        """Weighted sums of the cpu (milli) and memory (bytes) the shape's pods asked of their node."""
        self.version = 0
        """Changes whenever the weights or the hosts change."""

    def observe(self, request: GPURequest, host: tuple[int, int] = (0, 0)) -> None:
        weights = {shape: w * self._decay for shape, w in self._weights.items() if w * self._decay >= _FORGET}
        weights[request] = weights.get(request, 0.0) + 1.0
        if len(weights) > self._max_shapes:
            kept = sorted(weights.items(), key=lambda item: item[1], reverse=True)[: self._max_shapes]
            weights = dict(kept)
        hosts = {
            shape: (cpu * self._decay, memory * self._decay)
            for shape, (cpu, memory) in self._hosts.items()
            if shape in weights
        }
        cpu, memory = hosts.get(request, (0.0, 0.0))
        hosts[request] = (cpu + host[0], memory + host[1])
        self._weights, self._hosts = weights, hosts
        self.version += 1

    def weights(self, current: GPURequest) -> dict[GPURequest, float]:
        """The mix to score ``current`` against: the recent shapes, ``current`` among them (as FGD
        counts the arriving task in its target workload) with weight 1 at least."""
        weights = dict(self._weights)
        weights[current] = max(weights.get(current, 0.0), 1.0)
        return weights

    def weights_seen(self) -> dict[GPURequest, float]:
        """The recent shapes alone (for a pod that asks for no GPU)."""
        return dict(self._weights)

    def hosts_seen(self) -> dict[GPURequest, tuple[int, int]]:
        """The cpu and memory a pod of each recent shape asks of its node (weighted means)."""
        seen = [shape for shape in self._hosts if self._weights.get(shape, 0.0) > 0]
        return dict(zip(seen, self.hosts_of(seen), strict=True))

    def hosts_of(
        self,
        shapes: Iterable[GPURequest],
        current: GPURequest | None = None,
        current_host: tuple[int, int] = (0, 0),
    ) -> list[tuple[int, int]]:
        """``hosts(current, current_host)`` (``hosts_seen`` where ``current`` is None) of ``shapes``
        in order, (0, 0) for a shape of neither."""
        means = []
        for shape in shapes:
            summed = self._hosts.get(shape)
            weight = self._weights.get(shape, 0.0)
            if summed is not None and weight > 0:
                means.append((round(summed[0] / weight), round(summed[1] / weight)))
            else:
                means.append(current_host if shape == current else (0, 0))
        return means
