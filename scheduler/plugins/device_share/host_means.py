"""What the two mixes of the Fragmentation strategy (``request_mix``, ``cluster_mix``) share: the
cpu and memory a pod of each shape asks of its node, with the pod being scored standing in for a
shape the mix has not seen."""

from __future__ import annotations

import abc

from scheduler.plugins.device_share.request import GPURequest

__all__ = ["HostMeans"]


class HostMeans(abc.ABC):
    @abc.abstractmethod
    def hosts_seen(self) -> dict[GPURequest, tuple[int, int]]:
        """The mean cpu and memory a pod of each shape the mix holds asks of its node."""

    def hosts(self, current: GPURequest, current_host: tuple[int, int]) -> dict[GPURequest, tuple[int, int]]:
        """``hosts_seen``, with ``current_host`` for ``current`` when the mix has not seen its shape."""
        means = self.hosts_seen()
        means.setdefault(current, current_host)
        return means
