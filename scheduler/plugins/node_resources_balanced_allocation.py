"""NodeResourcesBalancedAllocation: favour nodes whose resources are used evenly after placing the pod
(kube-scheduler's ``noderesources/balanced_allocation.go``), vectorized over the node table.

Per node and configured resource (default cpu and memory), the fraction ``requested / allocatable``
capped at 1, where ``requested`` is what the node's pods request plus the pod's request. Unlike
NodeResourcesFit's scoring, both sides are the real requests (upstream's ``useRequested: true``): no
100m/200Mi defaults. A resource the node does not have (allocatable 0) is left out, and so is an
extended resource the pod does not request. With two fractions the deviation is ``|f1 - f2| / 2``,
with more it is their standard deviation, with fewer 0; the score is ``int((1 - std) * 100)``, in
float64 in the same order of operations as Go so that the truncation agrees.

A pod that requests none of the resources (best-effort) is skipped at PreScore, so that such pods
do not all pile onto one node (kubernetes#129138); Score gives 0 then (the same total).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, model_validator

from apis.base import KoordModel
from scheduler.cache.node_table import IntArray, NodeTable
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import RowInputs
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.resources import (
    FEW_ROWS,
    ResourceSpec,
    ScoredColumn,
    default_resources,
    scored_columns,
)

__all__ = ["NAME", "PLUGIN", "NodeResourcesBalancedAllocation", "NodeResourcesBalancedAllocationArgs", "new"]

NAME = "NodeResourcesBalancedAllocation"

FloatArray = npt.NDArray[np.float64]


class NodeResourcesBalancedAllocationArgs(KoordModel):
    """kube-scheduler's ``NodeResourcesBalancedAllocationArgs`` (kubescheduler.config.k8s.io/v1)."""

    model_config = ConfigDict(extra="forbid")

    resources: list[ResourceSpec] = Field(default_factory=default_resources)
    """The balanced resources, each with weight 1 (unset means 1); empty means cpu and memory."""

    @model_validator(mode="after")
    def _defaults_and_checks(self) -> NodeResourcesBalancedAllocationArgs:
        if not self.resources:
            self.resources = default_resources()
        seen: set[str] = set()
        for i, spec in enumerate(self.resources):
            if spec.name in seen:
                raise ValueError(f"resources[{i}].name: Duplicate value: {spec.name!r}")
            seen.add(spec.name)
            if spec.weight == 0:
                spec.weight = 1
            if spec.weight != 1:
                raise ValueError(f"resources[{i}].weight: Invalid value: {spec.weight}: must be 1")
        return self


PRE_SCORE_KEY = StateKey[IntArray]("PreScoreNodeResourcesBalancedAllocation")


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self._names = tuple(spec.name for spec in args.resources)

    @property
    def name(self) -> str:
        return NAME

    def row_inputs(self, pod: PodInfo) -> RowInputs:
        """``RowLocal``: it reads the pod and the node's allocatable and requested amounts."""
        return RowInputs.ACCOUNTING

    def _pod_requests(self, pod: PodInfo) -> IntArray:
        return np.asarray([pod.requests.get(name, 0) for name in self._names], dtype=np.int64)

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> Status:
        requests = self._pod_requests(pod)
        if not requests.any():
            return Status.skip()
        state.write(PRE_SCORE_KEY, requests)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        requests = state.get(PRE_SCORE_KEY)
        if requests is None:
            requests = self._pod_requests(pod)
        if not requests.any():
            return np.zeros(rows.size, dtype=np.int64)
        if rows.size <= FEW_ROWS:
            return self._few_scores(snapshot.table, rows, requests)
        parts = scored_columns(snapshot.table, self._names, requests)
        if len(parts) == 2:
            two = _two_scores(snapshot.table, rows, parts[0], parts[1])
            if two is not None:
                return two
        fractions, used = self._fractions(snapshot.table, rows, requests)
        std = _deviation(fractions, used)
        result: IntArray = ((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)  # truncates as Go's int64()
        return result

    def _few_scores(self, table: NodeTable, rows: IntArray, requests: IntArray) -> IntArray:
        """``score`` on a few rows (an equivalence class's changed ones) in Python floats: the same
        float64 operations in the same order as the arrays' (``_fractions``, ``_deviation_per_row``),
        without numpy's cost per call, which is most of a call on a few rows."""
        parts = [(col, request) for _, _, col, request in scored_columns(table, self._names, requests)]
        scores = []
        for row in rows.tolist():
            fractions = []
            for col, request in parts:
                allocatable = int(table.allocatable[row, col])
                if allocatable > 0:  # a resource the node does not have is left out
                    requested = int(table.requested[row, col]) + request
                    fractions.append(min(float(requested) / float(allocatable), 1.0))
            scores.append(int((1.0 - _deviation_of(fractions)) * float(MAX_NODE_SCORE)))
        return np.asarray(scores, dtype=np.int64)

    def _fractions(
        self, table: NodeTable, rows: IntArray, requests: IntArray
    ) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """rows x resources: ``min(requested / allocatable, 1)``, and where it counts (allocatable > 0)."""
        fractions = np.zeros((rows.size, len(self._names)), dtype=np.float64)
        used = np.zeros(fractions.shape, dtype=np.bool_)
        for i, _, col, request in scored_columns(table, self._names, requests):
            allocatable = table.allocatable[rows, col]
            requested = table.requested[rows, col] + request
            used[:, i] = allocatable > 0
            safe = np.where(used[:, i], allocatable, 1).astype(np.float64)
            fractions[:, i] = np.minimum(requested.astype(np.float64) / safe, 1.0)
        return fractions, used


def _two_scores(
    table: NodeTable, rows: IntArray, first: ScoredColumn, second: ScoredColumn
) -> IntArray | None:
    """``score`` of a pod scored on two resources that every row has (cpu and memory, mostly): the
    arrays' float64 operations (``_fractions``, ``_deviation``'s two-resource case) without the
    rows x resources arrays and their masks. None when some row lacks one of them."""
    first_allocatable = table.allocatable[rows, first.column]
    second_allocatable = table.allocatable[rows, second.column]
    if not ((first_allocatable > 0).all() and (second_allocatable > 0).all()):
        return None
    first_requested = table.requested[rows, first.column] + first.request
    second_requested = table.requested[rows, second.column] + second.request
    first_fraction = np.minimum(
        first_requested.astype(np.float64) / first_allocatable.astype(np.float64), 1.0
    )
    second_fraction = np.minimum(
        second_requested.astype(np.float64) / second_allocatable.astype(np.float64), 1.0
    )
    std = np.abs((first_fraction - second_fraction) / 2.0)
    result: IntArray = ((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
    return result


def _deviation_of(fractions: list[float]) -> float:
    """``_deviation_per_row`` of one row's fractions of the resources it uses."""
    count = len(fractions)
    if count == 2:
        return abs((fractions[0] - fractions[1]) / 2.0)
    if count < 2:
        return 0.0
    total = 0.0
    for fraction in fractions:
        total = total + fraction
    mean = total / float(count)
    squares = 0.0
    for fraction in fractions:
        d = fraction - mean
        squares = squares + d * d
    return math.sqrt(squares / float(count))


def _deviation(fractions: FloatArray, used: npt.NDArray[np.bool_]) -> FloatArray:
    """``balancedResourceScorer``'s deviation per row. Most clusters balance two resources (cpu
    and memory) that every node has: then it is ``|f0 - f1| / 2`` on every row, the same
    operations ``_deviation_per_row`` does for such a row, without its passes over the columns."""
    counted = used.any(axis=0)
    if np.count_nonzero(counted) == 2 and used[:, counted].all():
        first, second = np.flatnonzero(counted).tolist()
        two: FloatArray = np.abs((fractions[:, first] - fractions[:, second]) / 2.0)
        return two
    return _deviation_per_row(fractions, used)


def _deviation_per_row(fractions: FloatArray, used: npt.NDArray[np.bool_]) -> FloatArray:
    """The deviation of each row over the resources it uses, accumulating resource by resource
    in Go's order."""
    count = used.sum(axis=1)
    rows = fractions.shape[0]
    total = np.zeros(rows, dtype=np.float64)
    first = np.zeros(rows, dtype=np.float64)
    second = np.zeros(rows, dtype=np.float64)
    seen = np.zeros(rows, dtype=np.int64)
    for j in range(fractions.shape[1]):
        f = np.where(used[:, j], fractions[:, j], 0.0)
        total = total + f
        first = np.where(used[:, j] & (seen == 0), f, first)
        second = np.where(used[:, j] & (seen == 1), f, second)
        seen = seen + used[:, j]
    two = np.abs((first - second) / 2.0)
    mean = total / np.maximum(count, 1).astype(np.float64)
    squares = np.zeros(rows, dtype=np.float64)
    for j in range(fractions.shape[1]):
        d = fractions[:, j] - mean
        squares = squares + np.where(used[:, j], d * d, 0.0)
    many = np.sqrt(squares / np.maximum(count, 1).astype(np.float64))
    result: FloatArray = np.where(count == 2, two, np.where(count > 2, many, 0.0))
    return result


def new(args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args or NodeResourcesBalancedAllocationArgs())


PLUGIN = PluginSpec(NAME, new, NodeResourcesBalancedAllocationArgs)
