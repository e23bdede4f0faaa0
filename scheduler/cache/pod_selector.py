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
    rebuilt if it is asked for again), so a stream of one-off selectors costs memory bounded by
    ``capacity`` arrays.

    Selectors almost always pin a label (``app: web``): such a matcher is *anchored* on its ``In``
    requirement with the fewest values, and the pods are indexed by label, so a new matcher is
    counted over the pods carrying its anchor rather than over every pod, and a pod added or
    removed is matched only against the matchers anchored on one of its labels (and the few with
    no anchor), not against all of them.
    """

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._counts: OrderedDict[PodMatcher, IntArray] = OrderedDict()
        self._pods: dict[str, tuple[PodInfo, int]] = {}
        self._by_label: dict[tuple[str, str], dict[str, tuple[PodInfo, int]]] = {}
        self._anchored: dict[tuple[str, str], set[PodMatcher]] = {}
        self._unanchored: set[PodMatcher] = set()

    def counts(self, matcher: PodMatcher, size: int) -> IntArray:
        """How many assigned pods ``matcher`` matches on each of the first ``size`` rows (a view:
        read it, do not keep or write it)."""
        counts = self._counts.get(matcher)
        if counts is None:
            counts = self._count(matcher, size)
            self._track(matcher, counts)
        else:
            self._counts.move_to_end(matcher)
        if counts.size < size:
            counts = _grown(counts, size)
            self._counts[matcher] = counts
        return counts[:size]

    def _count(self, matcher: PodMatcher, size: int) -> IntArray:
        counts: IntArray = np.zeros(max(size, 1), dtype=np.int64)
        if matcher.selector.nothing:
            return counts
        anchor = _anchor(matcher)
        if anchor is None:
            candidates: Iterable[tuple[PodInfo, int]] = self._pods.values()
        else:
            key, values = anchor
            candidates = (
                entry for value in values for entry in self._by_label.get((key, value), {}).values()
            )
        rows = [row for pod, row in candidates if matcher.matches(pod)]
        if rows:
            found = np.asarray(rows, dtype=np.int64)
            counts = _grown(counts, int(found.max()) + 1)
            np.add.at(counts, found, 1)
        return counts

    def _track(self, matcher: PodMatcher, counts: IntArray) -> None:
        self._counts[matcher] = counts
        anchor = _anchor(matcher)
        if anchor is None:
            self._unanchored.add(matcher)
        else:
            for value in anchor[1]:
                self._anchored.setdefault((anchor[0], value), set()).add(matcher)
        if len(self._counts) > self._capacity:
            dropped, _ = self._counts.popitem(last=False)
            dropped_anchor = _anchor(dropped)
            if dropped_anchor is None:
                self._unanchored.discard(dropped)
            else:
                for value in dropped_anchor[1]:
                    anchored = self._anchored.get((dropped_anchor[0], value))
                    if anchored is not None:
                        anchored.discard(dropped)
                        if not anchored:
                            del self._anchored[(dropped_anchor[0], value)]

    def pod_added(self, pod: PodInfo, row: int) -> None:
        entry = (pod, row)
        self._pods[pod.uid] = entry
        for label in pod.labels.items():
            self._by_label.setdefault(label, {})[pod.uid] = entry
        self._change(pod, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        self._pods.pop(pod.uid, None)
        for label in pod.labels.items():
            same = self._by_label.get(label)
            if same is not None:
                same.pop(pod.uid, None)
                if not same:
                    del self._by_label[label]
        self._change(pod, row, -1)

    def pod_replaced(self, old: PodInfo, pod: PodInfo, row: int) -> None:
        """``pod``, a new version of ``old`` on the same row, replaces it (a binding confirmed):
        where nothing a matcher reads changed, every count stays and only the entries are swapped,
        instead of matching the pod twice against its label's matchers."""
        if (
            old.uid != pod.uid
            or old.labels != pod.labels
            or old.namespace != pod.namespace
            or (old.pod.metadata.deletion_timestamp is None) != (pod.pod.metadata.deletion_timestamp is None)
            or self._pods.get(old.uid) != (old, row)
        ):
            self.pod_removed(old, row)
            self.pod_added(pod, row)
            return
        entry = (pod, row)
        self._pods[pod.uid] = entry
        for label in pod.labels.items():
            self._by_label[label][pod.uid] = entry

    def _change(self, pod: PodInfo, row: int, delta: int) -> None:
        concerned = set(self._unanchored)
        for label in pod.labels.items():
            concerned.update(self._anchored.get(label, ()))
        for matcher in concerned:
            if matcher.matches(pod):
                counts = self._counts[matcher]
                if counts.size <= row:
                    counts = _grown(counts, row + 1)
                    self._counts[matcher] = counts
                counts[row] += delta

    def __len__(self) -> int:
        return len(self._counts)


def _anchor(matcher: PodMatcher) -> tuple[str, frozenset[str]] | None:
    """The ``In`` requirement with the fewest values: a pod the matcher matches carries one of
    those labels (None: the selector pins no label)."""
    best: Requirement | None = None
    for requirement in matcher.selector.requirements:
        if requirement.operator == "In" and (best is None or len(requirement.values) < len(best.values)):
            best = requirement
    return None if best is None else (best.key, best.values)


def _grown(counts: IntArray, size: int) -> IntArray:
    if counts.size >= size:
        return counts
    grown = np.zeros(max(size, counts.size * 2), dtype=counts.dtype)
    grown[: counts.size] = counts
    return grown
