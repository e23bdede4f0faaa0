"""The recent mix of GPU request shapes, as the Fragmentation scoring strategy weighs it.

Every pod that asks for GPUs adds its shape with weight 1; all weights decay by half every
``half_life`` pods, so the mix follows the workload as it changes. At most ``max_shapes`` shapes
are kept (the lightest go first) and a shape whose weight has decayed below ``_FORGET`` is
forgotten, so the mix stays small however many pods pass.
"""

from __future__ import annotations

from scheduler.plugins.device_share.request import GPURequest

__all__ = ["RequestMix"]

_FORGET = 1e-3


class RequestMix:
    def __init__(self, half_life: int, max_shapes: int) -> None:
        if half_life <= 0 or max_shapes <= 0:
            raise ValueError("half_life and max_shapes must be positive")
        self._decay = 0.5 ** (1.0 / half_life)
        self._max_shapes = max_shapes
        self._weights: dict[GPURequest, float] = {}

    def observe(self, request: GPURequest) -> None:
        weights = {shape: w * self._decay for shape, w in self._weights.items() if w * self._decay >= _FORGET}
        weights[request] = weights.get(request, 0.0) + 1.0
        if len(weights) > self._max_shapes:
            kept = sorted(weights.items(), key=lambda item: item[1], reverse=True)[: self._max_shapes]
            weights = dict(kept)
        self._weights = weights

    def weights(self, current: GPURequest) -> dict[GPURequest, float]:
        """The mix to score ``current`` against: the recent shapes, ``current`` among them (as FGD
        counts the arriving task in its target workload) with weight 1 at least."""
        weights = dict(self._weights)
        weights[current] = max(weights.get(current, 0.0), 1.0)
        return weights
