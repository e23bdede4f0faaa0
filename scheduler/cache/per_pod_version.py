"""A value computed from one version of a pod, kept while that version is among the last asked
(a what-if builds the same members' placement problem a dozen times; each build used to
serialise every member's affinity and tolerations again)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from apis.core import Pod
from scheduler.cache.pod_info import PodInfo

__all__ = ["PerPodVersion"]

T = TypeVar("T")


class PerPodVersion(Generic[T]):
    """``compute(pod)``, once per pod version: a new version is a new ``Pod`` object (the cache
    decodes each watch event's object once and never edits it), so the object's identity is the
    key; the entry keeps the object, so its id is not reused while the entry lives."""

    def __init__(self, compute: Callable[[PodInfo], T], size: int = 16_384) -> None:
        self._compute = compute
        self._size = size
        self._kept: OrderedDict[int, tuple[Pod, T]] = OrderedDict()

    def __call__(self, pod: PodInfo) -> T:
        key = id(pod.pod)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is pod.pod:
            return kept[1]
        value = self._compute(pod)
        self._kept[key] = (pod.pod, value)
        if len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return value
