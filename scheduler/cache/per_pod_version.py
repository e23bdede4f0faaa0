"""A value computed from one version of a pod, kept while that version lives (a what-if builds
the same members' placement problem a dozen times; each build used to serialise every member's
affinity and tolerations again)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from apis.core import Pod
from scheduler.cache.pod_info import PodInfo

__all__ = ["PerPodVersion"]

T = TypeVar("T")


class PerPodVersion(Generic[T]):
    """``compute(pod)``, once per pod version: a new version is a new ``Pod`` object (the cache
    decodes each watch event's object once and never edits it), so the object's identity is the
    key. The entry holds the object weakly and goes when it does: a what-if's made-up pods (one
    set per change it tries) are not kept alive by it."""

    def __init__(self, compute: Callable[[PodInfo], T]) -> None:
        self._compute = compute
        self._kept: dict[int, tuple[weakref.ref[Pod], T]] = {}

    def __call__(self, pod: PodInfo) -> T:
        key = id(pod.pod)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is pod.pod:
            return kept[1]
        value = self._compute(pod)
        kept_map = self._kept

        def forget(_: weakref.ref[Pod]) -> None:
            kept_map.pop(key, None)

        kept_map[key] = (weakref.ref(pod.pod, forget), value)
        return value

    def __len__(self) -> int:
        return len(self._kept)
