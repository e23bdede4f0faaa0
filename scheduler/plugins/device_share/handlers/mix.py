"""Pod events for the Fragmentation strategy's cluster mix (``cluster_mix.py``): every pod that asks
for GPUs counts while it is in the cluster, bound or pending; one that ends or is deleted leaves."""

from __future__ import annotations

from collections.abc import Sequence

from apis.client.backend import EventType, WatchEvent, each
from apis.core import Pod
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.device_share.cluster_mix import ClusterMix
from scheduler.plugins.device_share.request import InvalidGPURequest, gpu_request

__all__ = ["MixHandler"]


class MixHandler:
    def __init__(self, mix: ClusterMix) -> None:
        self.mix = mix

    def on_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:  # a page of the first list; its REPLACED skips it
            each(event.objects, self._upsert)
            return
        event.dispatch(lambda pods: self._replace(pods, event.untold), self._upsert, self._delete)

    def _delete(self, pod: Pod) -> None:
        self.mix.leave(pod.metadata.uid or "", served=bool(pod.spec.node_name))

    def _replace(self, pods: Sequence[Pod], untold: Sequence[Pod]) -> None:
        """The relisted ``pods``, of which ``untold`` are not upserted yet."""
        present = {pod.metadata.uid or "" for pod in pods}
        for uid in self.mix.uids():
            if uid not in present:
                self.mix.remove(uid)
        each(untold, self._upsert)

    def _upsert(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if is_reserve_pod(pod.metadata.annotations):
            self.mix.remove(uid)
            return
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self._delete(pod)
            return
        # The PodInfo the cache and the other informers share for this event: decoded once.
        requests = PodInfo.of(pod).requests
        try:
            request = gpu_request(requests)
        except InvalidGPURequest:
            request = None
        if request is None:
            self.mix.remove(uid)
            return
        self.mix.add(uid, request, (requests.get("cpu", 0), requests.get("memory", 0)))
