"""Equivalence classes: pods of one template share their Filter and Score pass (beyond Koordinator,
whose batch-scheduling change is still open; kube-scheduler's opportunistic batching, KEP-5598,
reuses a ranking only while each node takes one pod).

A class is the pods whose scheduling fields are equal (``class_key``: everything of the spec but
its volumes, with the namespace, labels and annotations): the replicas of a Deployment or a Job.
For each class the entry keeps, per node row, what the ``RowLocal`` plugins answered (their
Filter verdict and raw Score). Those that read only the Node object (``RowInputs.NODE``: node
affinity, taints, images) answer once per row for the entry's life; those that read what is
accounted on the row too (``RowInputs.ACCOUNTING``: resources, host ports) are asked again only
about the rows whose stamp (``NodeTable.versions``) moved since, in practice the node the last
replica took, and scored only when such a row is in a pod's sample. Every other plugin
(spread, inter-pod affinity, volumes, quota, devices, reservations: what reads beyond one node
or outside the cache) runs for every pod as before, on the same rows in the same order. Scores
are normalized over each pod's own sample of nodes, so the pick is the one a pod-by-pod cycle
makes: the same rows, the same totals, the same random tie-break.

An entry is dropped when any node changes (``Cache.generation``) or rows are reused
(``NodeTable.layout``), and a class gets one on its second pod, so a stream of distinct pods pays
only for its keys. A cycle that finds no feasible node this way counts its diagnosis in a second
pass in the plain cycle's plugin order, where the row-local Filters' answers are read from what
the entry recorded of them (``FilterRecord``) and the other plugins run again, so the pod's
diagnosis, PostFilter and event are exactly those of the plain cycle.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np
from pydantic_core import to_json

from apis.core import PodSpec
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.sharing import SHARED_SPEC_PARTS
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RowInputs, RowLocal
from scheduler.framework.filter_record import FilterRecord
from scheduler.framework.interfaces import Diagnosis
from scheduler.framework.profile import ExtensionPoint
from scheduler.framework.runtime import Framework

__all__ = ["ClassView", "EquivalenceClasses", "class_key"]

_NOT_IN_KEY = {"volumes"}
"""Per-pod (a service account token volume has a random name) and read only by the volume
plugins, which are never row-local."""

_SHARED_PARTS = SHARED_SPEC_PARTS
"""The spec's parts ``PodInfo`` shares among equal pods (``scheduler.cache.sharing``): keyed by
identity, not serialized (most of a spec's JSON is its containers)."""
_REST = tuple(name for name in PodSpec.model_fields if name not in {*_NOT_IN_KEY, *_SHARED_PARTS})
_PLAIN = (str, int, type(None))
_parts_of = attrgetter(*_SHARED_PARTS)
_rest_of = attrgetter(*_REST)

ClassKey = tuple[object, ...]
"""The pod's namespace and annotations, the rest of its spec (plain values as they are, the others
serialized), and per shared part (labels first) its id, or whether it is None where it is empty."""


def class_key(pod: PodInfo) -> tuple[ClassKey, tuple[object, ...]]:
    """What makes two pods one class: equal for the replicas of one template, different whenever
    any field a plugin reads differs; with the parts whose ids the key holds, which whoever
    keeps the key keeps too (a part's id is not reused while it lives).

    Equal parts that are not one object (not shared, or shared apart once the sharing table
    forgot the first) give two keys for one template: two classes, each correct."""
    spec = pod.pod.spec
    parts = (pod.labels, *_parts_of(spec))
    rest = tuple([value if type(value) in _PLAIN else to_json(value) for value in _rest_of(spec)])
    ids = tuple(id(part) if part else part is None for part in parts)
    return (pod.namespace, tuple(pod.annotations.items()), rest, ids), parts


@dataclass
class _Group:
    """The row-local plugins of one kind of input at one extension point, and what they answered."""

    plugins: frozenset[str]
    stamps: IntArray
    """Per row, the stamp it was answered at (0: never; for ``RowInputs.NODE``, 1: answered)."""
    complete: bool = False
    """``RowInputs.NODE`` only: every active row is answered, so none is ever due again (a row that
    becomes active is a node change, which drops the entry)."""


@dataclass
class _Entry:
    generation: int
    layout: int
    filters: dict[RowInputs, _Group]
    scorers: dict[RowInputs, _Group]
    feasible: dict[RowInputs, BoolArray]
    """Per kind of input, whether that group's Filters accept each row answered."""
    records: dict[str, FilterRecord]
    """Per row-local Filter plugin, its answers (for a failed cycle's diagnosis)."""
    parts: tuple[object, ...]
    """What the entry's ``class_key`` holds the ids of."""
    raw: dict[str, IntArray] = field(default_factory=dict)
    score_skipped: frozenset[str] = frozenset()
    local_filters: frozenset[str] = field(init=False)
    local_scores: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        # Every cycle of the class hands these to the Framework: made once, not per pod.
        self.local_filters = frozenset().union(*(g.plugins for g in self.filters.values()))
        self.local_scores = frozenset().union(*(g.plugins for g in self.scorers.values()))


def _due(group: _Group, inputs: RowInputs, rows: IntArray, versions: IntArray) -> IntArray:
    """The rows of ``rows`` whose answer from ``group`` is missing or out of date."""
    if group.complete:
        return rows[:0]
    stale = group.stamps[rows] == 0 if inputs is RowInputs.NODE else group.stamps[rows] != versions[rows]
    due: IntArray = rows[stale]
    return due


def _answered(group: _Group, inputs: RowInputs, rows: IntArray, snapshot: Snapshot) -> None:
    table = snapshot.table
    if inputs is RowInputs.NODE:
        group.stamps[rows] = 1
        size = group.stamps.shape[0]
        group.complete = bool(group.stamps[table.active[:size]].all())
    else:
        group.stamps[rows] = table.versions[rows]


@dataclass
class ClassView:
    """One cycle's share of its class's entry."""

    local_filters: frozenset[str]
    """The row-local Filter plugins whose verdict the entry holds (they run on the rest no more)."""
    local_scores: frozenset[str]
    passed: IntArray
    """The rows asked that every row-local Filter accepts."""
    records: dict[str, FilterRecord]
    """The row-local Filters' answers, current on the rows asked."""
    _entry: _Entry
    _fwk: Framework
    _state: CycleState
    _pod: PodInfo
    _snapshot: Snapshot

    def raw_scores(self, rows: IntArray) -> dict[str, IntArray] | None:
        """Row-local Score plugin -> raw scores, row-count long, current on ``rows`` (the pod's
        sample of the feasible rows: only those are brought up to date); None: a plugin failed."""
        entry, state = self._entry, self._state
        versions = self._snapshot.table.versions
        for inputs, group in entry.scorers.items():
            due = _due(group, inputs, rows, versions)
            if not due.size:
                continue
            fwk, pod, snapshot = self._fwk, self._pod, self._snapshot
            if not fwk.pre_score_rows(state, pod, snapshot, due, only=group.plugins).ok:
                return None
            entry.score_skipped = (entry.score_skipped - group.plugins) | (group.plugins & state.skip_score)
            raw, status = fwk.raw_scores(state, pod, snapshot, due, only=group.plugins)
            if not status.ok:
                return None
            for name, scores in raw.items():
                into = entry.raw.get(name)
                if into is None:
                    into = entry.raw[name] = np.zeros(group.stamps.shape[0], dtype=np.int64)
                into[due] = scores
            _answered(group, inputs, due, self._snapshot)
        state.skip_score.update(entry.score_skipped)
        return entry.raw


_Key = tuple[Framework, ClassKey, frozenset[str]]
"""The profile, the pod's ``class_key`` and the plugins PreFilter skipped."""

_SkipKey = tuple[Framework, ClassKey, frozenset[str]]
"""The profile, the pod's ``class_key`` and the plugins whose SKIP its class shares
(``Framework.class_skips``: which depends on whether the pod has volumes)."""

_NONE: frozenset[str] = frozenset()


@dataclass
class EquivalenceClasses:
    capacity: int = 64
    """Classes with an entry (least recently used dropped first)."""
    hits: int = 0
    """Cycles served from an entry."""
    _entries: OrderedDict[_Key, _Entry] = field(default_factory=OrderedDict)
    _seen: OrderedDict[_Key, tuple[object, ...]] = field(default_factory=OrderedDict)
    """Per key of a class's first pod, the parts the key holds the ids of."""
    _skips: OrderedDict[_SkipKey, tuple[frozenset[str], tuple[object, ...]]] = field(
        default_factory=OrderedDict
    )
    """Per class, the PreFilter plugins that skipped one of its pods and promise to skip them all
    (``ext.SkipByClass``), with the parts the key holds the ids of."""

    def known_skips(self, fwk: Framework, pod: PodInfo, key: ClassKey) -> frozenset[str]:
        """The PreFilter plugins a pod of ``pod``'s class skipped that skip every pod of it
        (``Framework.run_pre_filter``'s ``known_skips``)."""
        known = self._skips.get((fwk, key, fwk.class_skips(pod)))
        return known[0] if known is not None else _NONE

    def learn_skips(
        self, fwk: Framework, state: CycleState, pod: PodInfo, key: ClassKey, parts: tuple[object, ...]
    ) -> None:
        """Keep what ``pod``'s PreFilter (run in ``state``) skipped of the plugins whose SKIP is its
        class's; a PreFilter that stopped early adds the rest at a later pod."""
        eligible = fwk.class_skips(pod)
        if not eligible:
            return
        skip_key = (fwk, key, eligible)
        known = self._skips.get(skip_key)
        found = eligible.intersection(state.skip_filter)
        if known is not None and found <= known[0]:
            return
        self._skips[skip_key] = (found | known[0] if known is not None else found, parts)
        if len(self._skips) > self.capacity * 4:
            self._skips.popitem(last=False)

    def view(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        keyed: tuple[ClassKey, tuple[object, ...]] | None = None,
    ) -> ClassView | None:
        """The entry of ``pod``'s class brought up to date on ``rows`` (after PreFilter, in the
        pod's CycleState), or None: the pod's first of its class, or a plugin failed (the cycle
        then runs pod by pod). ``keyed``: ``class_key(pod)``, when the caller has it."""
        # The Framework itself, not its name: a reloaded profile's plugins may score differently.
        pod_key, parts = class_key(pod) if keyed is None else keyed
        key = (fwk, pod_key, frozenset(state.skip_filter))
        entry = self._entry(key, parts, fwk, pod, snapshot)
        if entry is None:
            return None
        versions = snapshot.table.versions
        passed = rows
        for inputs, group in entry.filters.items():
            due = _due(group, inputs, rows, versions)
            if due.size:
                accepted, status = fwk.filter_rows(
                    state, pod, snapshot, due, Diagnosis(), only=group.plugins, into=entry.records
                )
                if not status.ok:
                    self._entries.pop(key, None)
                    return None
                feasible = entry.feasible[inputs]
                feasible[due] = False
                feasible[accepted] = True
                _answered(group, inputs, due, snapshot)
            passed = passed[entry.feasible[inputs][passed]]
        self.hits += 1
        return ClassView(
            entry.local_filters, entry.local_scores, passed, entry.records, entry, fwk, state, pod, snapshot
        )

    def _entry(
        self, key: _Key, parts: tuple[object, ...], fwk: Framework, pod: PodInfo, snapshot: Snapshot
    ) -> _Entry | None:
        table = snapshot.table
        entry = self._entries.get(key)
        if entry is not None:
            if entry.generation == snapshot.generation and entry.layout == table.layout:
                self._entries.move_to_end(key)
                return entry
            del self._entries[key]
        elif key not in self._seen:  # a class's first pod: remember it, cache nothing yet
            self._seen[key] = parts
            if len(self._seen) > self.capacity * 4:
                self._seen.popitem(last=False)
            return None
        size = table.row_count  # rows in use: a new row changes the layout, which drops the entry
        filters = _local(fwk, ExtensionPoint.FILTER, pod, size)
        entry = _Entry(
            generation=snapshot.generation,
            layout=table.layout,
            filters=filters,
            scorers=_local(fwk, ExtensionPoint.SCORE, pod, size),
            feasible={inputs: np.zeros(size, dtype=np.bool_) for inputs in filters},
            records={name: FilterRecord.empty(size) for group in filters.values() for name in group.plugins},
            parts=parts,
        )
        self._entries[key] = entry
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return entry


def _local(fwk: Framework, point: ExtensionPoint, pod: PodInfo, size: int) -> dict[RowInputs, _Group]:
    """The profile's row-local plugins at ``point`` for ``pod``, grouped by what they read."""
    found: dict[RowInputs, set[str]] = {}
    for plugin in fwk.runs_at(point):
        inputs = plugin.row_inputs(pod) if isinstance(plugin, RowLocal) else None
        if inputs is not None:
            found.setdefault(inputs, set()).add(plugin.name)
    return {
        inputs: _Group(frozenset(names), np.zeros(size, dtype=np.int64)) for inputs, names in found.items()
    }
