"""Pods' PodInfos computed as the backend decodes them, for the informer to take.

koord-scheduler's pod list is bound by the API server: between pages the scheduler waits for the
next one (``apis.client.kubernetes``). Computing each pod's PodInfo (its requests, priority, host
ports) in the backend's transform, page by page, does that work in those waits instead of after
the whole list; ``EventHandlers`` then takes the PodInfos of the event it handles. The transform
shares each pod's equal parts first, as ``share`` alone did.
"""

from __future__ import annotations

from collections.abc import Iterable

from apis.core import Pod
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.sharing import share

__all__ = ["DecodedAhead", "decode_ahead", "take_decoded"]


class DecodedAhead:
    def __init__(self) -> None:
        self._infos: dict[int, PodInfo] = {}
        """By the pod's identity; each PodInfo holds its pod, so no id is reused while kept."""

    def transform(self, pod: Pod) -> Pod:
        """The backend's transform for pods: ``pod`` shared, and its PodInfo kept for the informer."""
        try:
            self._infos[id(pod)] = PodInfo.of(pod)
        except Exception:  # the informer decodes it again, and logs why that fails
            share(pod)
        return pod

    def take(self, pods: Iterable[Pod], *, forget_the_rest: bool = False) -> dict[int, PodInfo]:
        """The PodInfos kept for ``pods``, by the pod's identity. ``forget_the_rest``: also drop
        what no one will take, the pods of lists abandoned midway (the caller handles a whole list,
        so no other pod is between its decoding and its handling)."""
        taken: dict[int, PodInfo] = {}
        for pod in pods:
            info = self._infos.pop(id(pod), None)
            if info is not None and info.pod is pod:
                taken[id(pod)] = info
        if forget_the_rest:
            self._infos.clear()
        return taken

    def __len__(self) -> int:
        return len(self._infos)


_AHEAD = DecodedAhead()


def decode_ahead(pod: Pod) -> Pod:
    """The process-wide ``DecodedAhead.transform``."""
    return _AHEAD.transform(pod)


def take_decoded(pods: Iterable[Pod], *, forget_the_rest: bool = False) -> dict[int, PodInfo]:
    """The process-wide ``DecodedAhead.take``."""
    return _AHEAD.take(pods, forget_the_rest=forget_the_rest)
