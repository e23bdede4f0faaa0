"""Every node's allocatable and requested amounts in int64 arrays: one row per node, one column per
resource name, so that resource Filter and Score run vectorized over all nodes at once.

Units are those of ``apis.resources.to_int_units``: milli-CPU for ``cpu``, whole units (bytes,
pods, devices) for the rest. Rows of deleted nodes are reused; ``active`` marks the rows in use.
A column is added the first time a resource name is seen on a node or in a pod.

No amount written here can wrap (see ``quantity_range``): allocatable and request amounts are
clamped into ``[0, MAX_UNITS]``, and a node's requested amount saturates at ``REQUESTED_CAP``
while its exact sum is kept in ``_exact``, so removing the pods again restores it exactly.

``versions`` stamps each row whenever anything this table or the cache accounts on it changes
(requests, non-zero requests, allocatable, the row's node): a result computed from a row stays
true while its stamp does (``scheduler.framework.equivalence``).

``non_zero`` holds, per row, kube-scheduler's ``NodeInfo.NonZeroRequested``: the cpu and memory of
the pods assigned to the node as the resource scorers count them (``PodInfo.non_zero``, defaults for
containers without requests). It counts assigned pods only, not nominations: kube-scheduler adds
nominated pods for Filter, never for Score.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from scheduler.cache.quantity_range import MAX_UNITS, REQUESTED_CAP, clamp

__all__ = ["NON_ZERO_CPU", "NON_ZERO_MEMORY", "NodeTable"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_A = TypeVar("_A", bound=npt.NDArray[Any])

NON_ZERO_CPU, NON_ZERO_MEMORY = 0, 1
"""Columns of ``NodeTable.non_zero``."""


class NodeTable:
    def __init__(self, node_capacity: int = 64, resource_capacity: int = 8) -> None:
        self.resources: list[str] = []
        self.column: dict[str, int] = {}
        self.names: list[str] = []
        self.row: dict[str, int] = {}
        self._free_rows: list[int] = []
        self.allocatable: IntArray = np.zeros((node_capacity, resource_capacity), dtype=np.int64)
        self.requested: IntArray = np.zeros((node_capacity, resource_capacity), dtype=np.int64)
        self.non_zero: IntArray = np.zeros((node_capacity, 2), dtype=np.int64)
        """rows x (cpu, memory): the assigned pods' non-zero requests (``NON_ZERO_CPU``, ...)."""
        self._active: BoolArray = np.zeros(node_capacity, dtype=np.bool_)
        self.active: BoolArray = _read_only(self._active)
        """Per row, whether it is a candidate (a node that exists and is valid): written through
        ``set_active``, which keeps ``active_rows`` current."""
        self._active_rows: IntArray | None = None
        self._rows_used = 0
        self._exact: dict[tuple[int, int], int] = {}
        """(row, column) -> the exact requested sum, for the cells saturated at REQUESTED_CAP."""
        self._exact_non_zero: dict[tuple[int, int], int] = {}
        self.layout = 0
        """Changes whenever a row gets or loses its node (``names`` changes)."""
        self.versions: IntArray = np.zeros(node_capacity, dtype=np.int64)
        """Per row, the stamp of its last change (``touch``); stamps only grow."""
        self._stamp = 0

    # ---- shape -------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """Rows ever used (active or free); arrays are valid up to here."""
        return self._rows_used

    def column_of(self, resource: str) -> int:
        """The column of ``resource``, added (all zeros) if this is the first time it is seen."""
        col = self.column.get(resource)
        if col is not None:
            return col
        col = len(self.resources)
        if col >= self.allocatable.shape[1]:
            self._grow(cols=max(8, self.allocatable.shape[1] * 2))
        self.resources.append(resource)
        self.column[resource] = col
        return col

    def _grow(self, rows: int | None = None, cols: int | None = None) -> None:
        new_rows = rows or self.allocatable.shape[0]
        new_cols = cols or self.allocatable.shape[1]
        for attr in ("allocatable", "requested"):
            old: IntArray = getattr(self, attr)
            grown = np.zeros((new_rows, new_cols), dtype=np.int64)
            grown[: old.shape[0], : old.shape[1]] = old
            setattr(self, attr, grown)
        active = np.zeros(new_rows, dtype=np.bool_)
        active[: self._active.shape[0]] = self._active
        self._active, self.active = active, _read_only(active)
        if new_rows > self.non_zero.shape[0]:
            non_zero = np.zeros((new_rows, 2), dtype=np.int64)
            non_zero[: self.non_zero.shape[0]] = self.non_zero
            self.non_zero = non_zero
            versions = np.zeros(new_rows, dtype=np.int64)
            versions[: self.versions.shape[0]] = self.versions
            self.versions = versions

    def touch(self, rows: int | list[int] | IntArray) -> None:
        """Stamp ``rows`` as changed (what is accounted on them, or their node)."""
        self._stamp += 1
        self.versions[rows] = self._stamp

    # ---- nodes -------------------------------------------------------------------------------

    def add_node(self, name: str) -> int:
        if name in self.row:
            return self.row[name]
        if self._free_rows:
            row = self._free_rows.pop()
            self.names[row] = name
        else:
            row = self._rows_used
            if row >= self.allocatable.shape[0]:
                self._grow(rows=max(64, self.allocatable.shape[0] * 2))
            self._rows_used += 1
            self.names.append(name)
        self.row[name] = row
        self.layout += 1
        self.touch(row)
        self.set_active(row, True)
        self.allocatable[row] = 0
        self._clear_requested(row)
        return row

    def remove_node(self, name: str) -> None:
        row = self.row.pop(name, None)
        if row is None:
            return
        self.set_active(row, False)
        self.allocatable[row] = 0
        self._clear_requested(row)
        self.names[row] = ""
        self.layout += 1
        self.touch(row)
        self._free_rows.append(row)

    def _clear_requested(self, row: int) -> None:
        self.requested[row] = 0
        self.non_zero[row] = 0
        for exact in (self._exact, self._exact_non_zero):
            for key in [k for k in exact if k[0] == row]:
                del exact[key]

    def set_allocatable(self, row: int, allocatable: Mapping[str, int]) -> None:
        cols = [self.column_of(name) for name in allocatable]
        self.touch(row)
        self.allocatable[row] = 0
        self.allocatable[row, cols] = [clamp(amount) for amount in allocatable.values()]

    def add_requests(self, row: int, requests: Mapping[str, int], sign: int = 1) -> None:
        """Add (``sign`` 1) or take away (-1) a pod's requests; each amount is clamped into range."""
        self.touch(row)
        for name, amount in requests.items():
            _saturating_add(self.requested, self._exact, row, self.column_of(name), sign * clamp(amount))

    def add_non_zero(self, row: int, non_zero: tuple[int, int], sign: int = 1) -> None:
        """Add (``sign`` 1) or take away (-1) a pod's non-zero cpu and memory (``PodInfo.non_zero``)."""
        self.touch(row)
        for col, amount in enumerate(non_zero):
            _saturating_add(self.non_zero, self._exact_non_zero, row, col, sign * clamp(amount))

    def add_requests_many(self, rows: list[int], requests: list[Mapping[str, int]], sign: int = 1) -> None:
        """``add_requests`` for many pods at once (lifting a gang's nominations every cycle, taking
        out a preemption's candidate victims): one vectorised update while no cell is saturated;
        the exact path otherwise."""
        if not rows:
            return
        self.touch(rows)
        # Flattened with C-level iteration (a preemption takes out thousands of pods at once).
        names = list(itertools.chain.from_iterable(requests))
        for name in dict.fromkeys(names):  # new columns in the order one by one adds them
            self.column_of(name)
        values = list(itertools.chain.from_iterable(pod_requests.values() for pod_requests in requests))
        if values and not 0 <= min(values) <= max(values) <= MAX_UNITS:
            values = [clamp(amount) for amount in values]
        r = np.repeat(np.asarray(rows, dtype=np.int64), [len(pod_requests) for pod_requests in requests])
        c = np.fromiter(map(self.column.__getitem__, names), dtype=np.int64, count=len(names))
        if self._exact and any(bool(np.any((r == row) & (c == col))) for row, col in self._exact):
            for row, pod_requests in zip(rows, requests, strict=True):
                self.add_requests(row, pod_requests, sign)
            return
        delta = sign * np.asarray(values, dtype=np.int64)
        np.add.at(self.requested, (r, c), delta)
        if np.any(np.abs(self.requested[r, c]) > REQUESTED_CAP):  # past the saturation point: redo exactly
            np.add.at(self.requested, (r, c), -delta)
            for row, pod_requests in zip(rows, requests, strict=True):
                self.add_requests(row, pod_requests, sign)

    def add_non_zero_many(self, rows: list[int], non_zero: list[tuple[int, int]], sign: int = 1) -> None:
        """``add_non_zero`` for many pods at once (a preemption's candidate victims taken out and
        put back): one vectorised update while no cell is saturated; the exact path otherwise."""
        if not rows:
            return
        self.touch(rows)
        touched = sorted(set(rows))
        if self._exact_non_zero and any((r, c) in self._exact_non_zero for r in touched for c in (0, 1)):
            for row, amounts in zip(rows, non_zero, strict=True):
                self.add_non_zero(row, amounts, sign)
            return
        at = np.asarray(rows, dtype=np.int64)
        flat = list(itertools.chain.from_iterable(non_zero))
        if not 0 <= min(flat) <= max(flat) <= MAX_UNITS:
            flat = [clamp(amount) for amount in flat]
        delta = sign * np.asarray(flat, dtype=np.int64).reshape(-1, 2)
        np.add.at(self.non_zero, at, delta)
        if np.any(np.abs(self.non_zero[np.asarray(touched, dtype=np.int64)]) > REQUESTED_CAP):
            np.add.at(self.non_zero, at, -delta)  # past the saturation point: redo exactly
            for row, amounts in zip(rows, non_zero, strict=True):
                self.add_non_zero(row, amounts, sign)

    def requested_exact(self, row: int, resource: str) -> int:
        """The exact requested amount of ``resource`` on ``row`` (the table may show it saturated)."""
        col = self.column.get(resource)
        if col is None:
            return 0
        return self._exact.get((row, col), int(self.requested[row, col]))

    def non_zero_exact(self, row: int, col: int) -> int:
        """The exact non-zero sum in column ``col`` (``NON_ZERO_CPU`` ...) of ``row``."""
        return self._exact_non_zero.get((row, col), int(self.non_zero[row, col]))

    # ---- queries -----------------------------------------------------------------------------

    def set_active(self, row: int, active: bool) -> None:
        self._active[row] = active
        self._active_rows = None

    def active_rows(self) -> IntArray:
        """The candidate rows, ascending: one read-only array until a row's ``active`` changes
        (every cycle asks; nodes come and go far less often)."""
        rows = self._active_rows
        if rows is None:
            found = np.flatnonzero(self._active[: self._rows_used]).astype(np.int64)
            rows = self._active_rows = _read_only(found)
        return rows

    def request_vector(self, requests: Mapping[str, int]) -> tuple[IntArray, IntArray]:
        """(columns, amounts) of a pod's requests; unknown resources get a column (all nodes: 0)."""
        cols = np.fromiter((self.column_of(n) for n in requests), dtype=np.int64, count=len(requests))
        amounts = np.fromiter((clamp(a) for a in requests.values()), dtype=np.int64, count=len(requests))
        return cols, amounts

    def free(self, rows: IntArray, cols: IntArray) -> IntArray:
        """allocatable - requested for those rows and columns (a rows x cols array)."""
        if rows.size * 8 < self._rows_used:  # a few rows (an equivalence class's changed ones)
            few: IntArray = self.allocatable[rows][:, cols] - self.requested[rows][:, cols]
            return few
        # Column slices first (contiguous copies of a few columns), then the rows: cheaper than np.ix_.
        result: IntArray = (self.allocatable[:, cols] - self.requested[:, cols])[rows]
        return result


def _read_only(array: _A) -> _A:
    """A view of ``array`` that refuses writes (the array itself stays writable)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _saturating_add(
    array: IntArray, exact: dict[tuple[int, int], int], row: int, col: int, delta: int
) -> None:
    """``array[row, col] += delta``, saturating at +-REQUESTED_CAP with the exact sum kept in ``exact``."""
    known = exact.get((row, col))
    total = (int(array[row, col]) if known is None else known) + delta
    if -REQUESTED_CAP <= total <= REQUESTED_CAP:
        array[row, col] = total
        if known is not None:
            del exact[(row, col)]
    else:
        array[row, col] = REQUESTED_CAP if total > 0 else -REQUESTED_CAP
        exact[(row, col)] = total
