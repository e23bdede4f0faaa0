"""Hashable label selectors over pods, and per-node counts of the assigned pods they match.

InterPodAffinity and PodTopologySpread ask the same question on every cycle: how many pods
matching (namespaces, label selector) run on each node, then per topology domain. kube-scheduler
answers it by walking every node's pods each cycle. Here the answer is an int array over node rows
(``PodSelectorCounts.counts``), built once per distinct selector by one pass over the assigned
pods and then kept up to date as pods are added to and removed from nodes (the cache notifies its
``PodObserver``s, simulated removals by preemption included), so a cycle pays a few numpy
operations whatever the number of pods. Per-domain counts are a ``np.bincount`` of it over the
domain id of each row (``Snapshot.label_domains``).

Selectors follow ``metav1.LabelSelector``: requirements ANDed, ``In`` / ``NotIn`` / ``Exists`` /
``DoesNotExist``; an unknown operator makes the selector match nothing (``LabelSelectorAsSelector``
fails and the plugins then match nothing); a null selector matches nothing, an empty one every pod.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from apis.meta import LabelSelector
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo

__all__ = ["PodMatcher", "PodObserver", "PodSelectorCounts", "Requirement", "Selector"]

_OPERATORS = frozenset(("In", "NotIn", "Exists", "DoesNotExist"))


class PodObserver(Protocol):
    """Told of every pod the cache accounts on a node row, and of every one it stops accounting."""

    def pod_added(self, pod: PodInfo, row: int) -> None: ...

    def pod_removed(self, pod: PodInfo, row: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def holds(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        return self.key not in labels  # DoesNotExist


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled label selector; ``nothing``: it matches no pod (null or invalid)."""

    requirements: frozenset[Requirement] = frozenset()
    nothing: bool = False

    @staticmethod
    def of(selector: LabelSelector | None) -> Selector:
        if selector is None:
            return Selector(nothing=True)
        reqs = {Requirement(k, "In", frozenset((v,))) for k, v in (selector.match_labels or {}).items()}
        for expression in selector.match_expressions or ():
            if expression.operator not in _OPERATORS:
                return Selector(nothing=True)
            reqs.add(Requirement(expression.key, expression.operator, frozenset(expression.values or ())))
        return Selector(frozenset(reqs))

    def adding(self, requirements: Iterable[Requirement]) -> Selector:
        """This selector ANDed with more requirements (``matchLabelKeys`` and the like)."""
        if self.nothing:
            return self
        return Selector(self.requirements | frozenset(requirements))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.holds(labels) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class PodMatcher:
    """Pods in ``namespaces`` (None: any namespace) whose labels ``selector`` matches; with
    ``skip_terminating``, pods being deleted do not count (as PodTopologySpread counts)."""

    selector: Selector
    namespaces: frozenset[str] | None = None
    skip_terminating: bool = False

    def matches(self, pod: PodInfo) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        if self.skip_terminating and pod.pod.metadata.deletion_timestamp is not None:
            return False
        return self.selector.matches(pod.labels)


class PodSelectorCounts:
    """Per-row counts of matching assigned pods, one array per matcher asked for, kept up to date.

    At most ``capacity`` matchers are tracked; the least recently asked for is dropped (and
    rebuilt by one pass over the pods if it is asked for again), so a stream of one-off selectors
    costs memory bounded by ``capacity`` arrays and per-pod upkeep bounded by ``capacity`` matches.
    """

    def __init__(self, pods: _AssignedPods, capacity: int = 512) -> None:
        self._pods = pods
        self._capacity = capacity
        self._counts: OrderedDict[PodMatcher, IntArray] = OrderedDict()

    def counts(self, matcher: PodMatcher, size: int) -> IntArray:
        """How many assigned pods ``matcher`` matches on each of the first ``size`` rows (a view:
        read it, do not keep or write it)."""
        counts = self._counts.get(matcher)
        if counts is None:
            counts = np.zeros(max(size, 1), dtype=np.int32)
            for pod, row in self._pods.assigned_rows():
                if matcher.matches(pod):
                    counts = _grown(counts, row + 1)
                    counts[row] += 1
            self._counts[matcher] = counts
            if len(self._counts) > self._capacity:
                self._counts.popitem(last=False)
        else:
            self._counts.move_to_end(matcher)
        if counts.size < size:
            counts = _grown(counts, size)
            self._counts[matcher] = counts
        return counts[:size]

    def pod_added(self, pod: PodInfo, row: int) -> None:
        self._change(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._change(pod, row, -1)

    def _change(self, pod: PodInfo, row: int, delta: int) -> None:
        grown: list[tuple[PodMatcher, IntArray]] = []
        for matcher, counts in self._counts.items():
            if matcher.matches(pod):
                if counts.size <= row:
                    counts = _grown(counts, row + 1)
                    grown.append((matcher, counts))
                counts[row] += delta
        for matcher, counts in grown:
            self._counts[matcher] = counts

    def __len__(self) -> int:
        return len(self._counts)


class _AssignedPods(Protocol):
    def assigned_rows(self) -> Iterable[tuple[PodInfo, int]]: ...


def _grown(counts: IntArray, size: int) -> IntArray:
    if counts.size >= size:
        return counts
    grown = np.zeros(max(size, counts.size * 2), dtype=counts.dtype)
    grown[: counts.size] = counts
    return grown
