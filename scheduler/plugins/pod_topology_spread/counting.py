"""Per-domain counts of matching pods, vectorised over node rows.

A constraint's domains are the values of its topology key; the cache gives a domain id per row
(``Snapshot.label_domains``) and per-row counts of the pods a selector matches
(``Snapshot.matching_pod_counts``), so a domain's count is one ``np.bincount`` over the rows that
take part. Which rows take part follows upstream: nodes with every constraint's topology key,
then per constraint its node inclusion policies (the pod's required node affinity; with
``nodeTaintsPolicy: Honor``, no NoSchedule/NoExecute taint the pod does not tolerate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from apis.meta import Toleration
from apis.tolerations import NO_EXECUTE, NO_SCHEDULE, tolerations_tolerate
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.helper.node_selector import fit_mask, required_node_mask
from scheduler.plugins.helper.taints import node_index
from scheduler.plugins.pod_topology_spread.constraints import Constraint

__all__ = ["DomainCounts", "NodeMasks", "domain_counts"]


@dataclass(slots=True)
class NodeMasks:
    """Full-length row masks a cycle needs, each built once."""

    snapshot: Snapshot
    pod: PodInfo
    size: int
    _exists: BoolArray | None = None
    _affinity: BoolArray | None = None
    _affinity_done: bool = False
    _tolerated: BoolArray | None = None

    @property
    def exists(self) -> BoolArray:
        if self._exists is None:
            self._exists = self.snapshot.full_mask(self.snapshot.candidate_rows())[: self.size]
        return self._exists

    def has_keys(self, constraints: Sequence[Constraint]) -> BoolArray:
        mask = np.ones(self.size, dtype=np.bool_)
        for key in {c.topology_key for c in constraints}:
            mask &= fit_mask(self.snapshot.label_mask(key), self.size)
        return mask

    def affinity(self) -> BoolArray | None:
        if not self._affinity_done:
            self._affinity = required_node_mask(self.pod.pod, self.snapshot, self.size)
            self._affinity_done = True
        return self._affinity

    def tolerated(self) -> BoolArray:
        if self._tolerated is None:
            self._tolerated = _tolerated(self.snapshot, self.pod.pod.spec.tolerations or [], self.size)
        return self._tolerated

    def included(self, constraint: Constraint, base: BoolArray) -> BoolArray:
        """``base`` narrowed by the constraint's node inclusion policies."""
        mask = base
        affinity = self.affinity() if constraint.honor_affinity else None
        if affinity is not None:
            mask = mask & affinity
        if constraint.honor_taints:
            mask = mask & self.tolerated()
        return mask


def _tolerated(snapshot: Snapshot, tolerations: Sequence[Toleration], size: int) -> BoolArray:
    """Rows without a NoSchedule/NoExecute taint the tolerations miss (once per taint set)."""
    index = node_index(snapshot)
    if not index.groups:
        return np.ones(size, dtype=np.bool_)
    ok = np.ones(len(index.groups) + 1, dtype=np.bool_)  # the last slot is group -1: no taints
    for gid, taints in enumerate(index.groups):
        ok[gid] = all(
            t.effect not in (NO_SCHEDULE, NO_EXECUTE) or tolerations_tolerate(tolerations, t) for t in taints
        )
    groups = np.full(size, -1, dtype=np.int64)
    known = min(size, index.group_of.size)
    groups[:known] = index.group_of[:known]
    result: BoolArray = ok[groups]
    return result


@dataclass(frozen=True, slots=True)
class DomainCounts:
    """One constraint's view of the cluster: a domain id per row, matching pods per domain."""

    domain_of: IntArray
    """Full-length: the domain id of each row (-1: the node lacks the topology key)."""
    counts: IntArray
    """Per domain id: matching pods on the rows that take part."""
    present: BoolArray
    """Per domain id: some row that takes part lies in it (upstream's map has the key)."""
    taking: IntArray
    """The rows that take part (and have the key)."""
    included: BoolArray
    """Full-length: ``taking`` as a mask."""
    values: tuple[str, ...]
    """Each domain id's label value."""


def domain_counts(
    snapshot: Snapshot, constraint: Constraint, namespace: str, rows_in: BoolArray, size: int
) -> DomainCounts:
    """Counts per domain over the rows of ``rows_in`` (full-length mask)."""
    ids, values = snapshot.label_domains(constraint.topology_key)
    domain_of = np.full(size, -1, dtype=np.int64)
    known = min(size, ids.size)
    domain_of[:known] = ids[:known]
    per_row = snapshot.matching_pod_counts(constraint.matcher(namespace))
    taking = np.flatnonzero(rows_in & (domain_of >= 0))
    n = len(values)
    counts = np.bincount(domain_of[taking], weights=per_row[taking], minlength=n).astype(np.int64)
    present = np.bincount(domain_of[taking], minlength=n) > 0
    included = np.zeros(size, dtype=np.bool_)
    included[taking] = True
    return DomainCounts(
        domain_of=domain_of, counts=counts, present=present, taking=taking, included=included, values=values
    )
