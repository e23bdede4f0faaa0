"""Equivalence classes: pods of one template share their Filter and Score pass (beyond Koordinator,
whose batch-scheduling change is still open; kube-scheduler's opportunistic batching, KEP-5598,
reuses a ranking only while each node takes one pod).

A class is the pods whose scheduling fields are equal (``class_key``: everything of the spec but
its volumes, with the namespace, labels and annotations): the replicas of a Deployment or a Job.
For each class the entry keeps, per node row, what the ``RowLocal`` plugins answered (their
Filter verdict and raw Score) and the row's stamp then (``NodeTable.versions``). The next pod of
the class asks those plugins again only about the rows whose stamp moved since, in practice the
nodes the last placements took; every other plugin (spread, inter-pod affinity, volumes, quota,
devices, reservations: what reads beyond one node or outside the cache) runs for every pod as
before, on the same rows in the same order. Scores are normalized over each pod's own sample of
nodes, so the pick is the one a pod-by-pod cycle makes: the same rows, the same totals, the same
random tie-break.

An entry is dropped when any node changes (``Cache.generation``) or rows are reused
(``NodeTable.layout``), and a class gets one on its second pod, so a stream of distinct pods pays
only for its keys. A cycle that finds no feasible node this way is run again pod by pod, so the
pod's diagnosis, PostFilter and event are exactly those of the plain cycle.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from pydantic_core import to_json

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowLocal
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.profile import ExtensionPoint
from scheduler.framework.runtime import Framework

__all__ = ["ClassView", "EquivalenceClasses", "class_key"]

_NOT_IN_KEY = {"volumes"}
"""Per-pod (a service account token volume has a random name) and read only by the volume
plugins, which are never row-local."""


def class_key(pod: PodInfo) -> bytes:
    """What makes two pods one class: equal for the replicas of one template, different whenever
    any field a plugin reads differs."""
    head = to_json((pod.namespace, pod.labels, pod.annotations))
    return head + pod.pod.spec.model_dump_json(exclude=_NOT_IN_KEY).encode()


@dataclass
class _Entry:
    generation: int
    layout: int
    filters: frozenset[str]
    scorers: frozenset[str]
    versions: IntArray
    """Per row, its stamp when the row-local Filters last ran there (0: never)."""
    feasible: BoolArray
    scored: IntArray
    """Per row, its stamp when the row-local Scores last ran there (0: never)."""
    raw: dict[str, IntArray] = field(default_factory=dict)
    score_skipped: frozenset[str] = frozenset()


@dataclass
class ClassView:
    """One cycle's share of its class's entry."""

    local_filters: frozenset[str]
    """The row-local Filter plugins whose verdict the entry holds (they run on the rest no more)."""
    local_scores: frozenset[str]
    passed: IntArray
    """The rows asked that every row-local Filter accepts."""
    _entry: _Entry
    _fwk: Framework
    _state: CycleState
    _pod: PodInfo
    _snapshot: Snapshot

    def raw_scores(self, rows: IntArray) -> dict[str, IntArray] | None:
        """Row-local Score plugin -> raw scores, row-count long, current on ``rows`` (the pod's
        sample of the feasible rows: only those are brought up to date); None: a plugin failed."""
        entry = self._entry
        versions = self._snapshot.table.versions
        stale = rows[entry.scored[rows] != versions[rows]]
        if stale.size:
            fwk, state, pod, snapshot = self._fwk, self._state, self._pod, self._snapshot
            if not fwk.pre_score_rows(state, pod, snapshot, stale, only=entry.scorers).ok:
                return None
            entry.score_skipped = frozenset(entry.scorers & state.skip_score)
            raw, status = fwk.raw_scores(state, pod, snapshot, stale, only=entry.scorers)
            if not status.ok:
                return None
            size = entry.versions.shape[0]
            for name, scores in raw.items():
                into = entry.raw.get(name)
                if into is None:
                    into = entry.raw[name] = np.zeros(size, dtype=np.int64)
                into[stale] = scores
            entry.scored[stale] = versions[stale]
        else:
            self._state.skip_score.update(entry.score_skipped)
        return entry.raw


_Key = tuple[Framework, bytes, frozenset[str]]
"""The profile, the pod's ``class_key`` and the plugins PreFilter skipped."""


@dataclass
class EquivalenceClasses:
    capacity: int = 64
    """Classes with an entry (least recently used dropped first)."""
    hits: int = 0
    """Cycles served from an entry."""
    _entries: OrderedDict[_Key, _Entry] = field(default_factory=OrderedDict)
    _seen: OrderedDict[_Key, None] = field(default_factory=OrderedDict)

    def view(
        self, fwk: Framework, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray
    ) -> ClassView | None:
        """The entry of ``pod``'s class brought up to date on ``rows`` (after PreFilter, in the
        pod's CycleState), or None: the pod's first of its class, or a plugin failed (the cycle
        then runs pod by pod)."""
        # The Framework itself, not its name: a reloaded profile's plugins may score differently.
        key = (fwk, class_key(pod), frozenset(state.skip_filter))
        entry = self._entry(key, fwk, pod, snapshot)
        if entry is None:
            return None
        versions = snapshot.table.versions
        stale = rows[entry.versions[rows] != versions[rows]]
        if stale.size:
            passed = stale
            if entry.filters:
                passed, status = fwk.filter_rows(state, pod, snapshot, stale, Diagnosis(), only=entry.filters)
                if not status.ok:
                    self._entries.pop(key, None)
                    return None
            entry.feasible[stale] = False
            entry.feasible[passed] = True
            entry.versions[stale] = versions[stale]
        self.hits += 1
        passed = rows[entry.feasible[rows]]
        return ClassView(entry.filters, entry.scorers, passed, entry, fwk, state, pod, snapshot)

    def _entry(self, key: _Key, fwk: Framework, pod: PodInfo, snapshot: Snapshot) -> _Entry | None:
        table = snapshot.table
        entry = self._entries.get(key)
        if entry is not None:
            if entry.generation == snapshot.generation and entry.layout == table.layout:
                self._entries.move_to_end(key)
                return entry
            del self._entries[key]
        elif key not in self._seen:  # a class's first pod: remember it, cache nothing yet
            self._seen[key] = None
            if len(self._seen) > self.capacity * 4:
                self._seen.popitem(last=False)
            return None
        size = table.versions.shape[0]
        entry = _Entry(
            generation=snapshot.generation,
            layout=table.layout,
            filters=_local(fwk, ExtensionPoint.FILTER, pod),
            scorers=_local(fwk, ExtensionPoint.SCORE, pod),
            versions=np.zeros(size, dtype=np.int64),
            feasible=np.zeros(size, dtype=np.bool_),
            scored=np.zeros(size, dtype=np.int64),
        )
        self._entries[key] = entry
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return entry


def _local(fwk: Framework, point: ExtensionPoint, pod: PodInfo) -> frozenset[str]:
    return frozenset(
        plugin.name
        for plugin in fwk.runs_at(point)
        if isinstance(plugin, RowLocal) and plugin.rows_are_local(pod)
    )
