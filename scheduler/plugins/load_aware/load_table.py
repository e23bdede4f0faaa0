"""Every node's reported and estimated usage in numpy arrays, one row per node row of the cache's
``NodeTable`` and one column per tracked resource (algorithms 7.3).

A row is recomputed only when its inputs change: its NodeMetric (a watch event), the pods
assigned to it (the cache's observer), or its Node object (annotations carry per-node
thresholds). A cycle then reads the rows it is given with no per-node Python work.

What a row holds, per resource, before the incoming pod's own estimate is added:

- ``filter_used``: the usage the filter compares with the non-prod thresholds: the node's usage
  (its aggregate of the node's filter profile when that profile is aggregated, falling back to
  the latest usage) plus, for every assigned pod still estimated, what its estimate exceeds its
  reported usage; without any node usage, the sum of every assigned pod's estimate;
- ``score_used``: the same over the score's usage (``aggregated.scoreAggregationType``);
- ``prod_used``: the reported usage of prod pods (plus system usage with ``prodUsageIncludeSys``)
  plus the estimates of prod pods not measured yet;
- ``usage_limits`` / ``prod_limits``: the node's filter profile (plugin args, or the node's
  ``scheduling.koordinator.sh/usage-thresholds`` annotation) as ``threshold + 0.5`` per resource,
  infinite where there is none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from apis.client.backend import WatchEvent, each
from apis.core import Node
from apis.duration import parse_go_duration_ns
from apis.slo.nodemetric import NodeMetric
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.assigned import AssignedPod, AssignedPods
from scheduler.plugins.load_aware.node_metrics import NodeLoad, decode
from scheduler.plugins.load_aware.thresholds import FilterProfile, node_profile, plugin_profile

__all__ = ["FloatArray", "LoadTable"]

FloatArray = npt.NDArray[np.float64]


class LoadTable:
    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        resources: Sequence[str],
        report: Callable[[Node, str], None] | None = None,
    ) -> None:
        self.args = args
        self.report = report
        """Told about a node whose thresholds annotation is ignored."""
        self.resources = tuple(resources)
        self._index = {name: i for i, name in enumerate(self.resources)}
        self.default_profile = plugin_profile(args)
        agg = args.aggregated
        self._score_aggregate: tuple[str, int] | None = None
        if agg is not None and agg.score_active and agg.score_aggregation_type is not None:
            self._score_aggregate = (
                agg.score_aggregation_type,
                parse_go_duration_ns(agg.score_aggregated_duration),
            )
        self.loads: dict[str, NodeLoad] = {}
        self._profiles: dict[str, FilterProfile] = {}
        """Nodes whose annotation sets their own thresholds."""
        self._dirty: set[str] = set()
        self._generation = -1
        self._node_ids: list[int] = []
        self._allocate(64)

    def _allocate(self, rows: int) -> None:
        """Arrays for ``rows`` rows, all empty: every row is rebuilt at the next refresh."""
        width = len(self.resources)
        self.has_metric: BoolArray = np.zeros(rows, dtype=np.bool_)
        self.update_time: FloatArray = np.full(rows, -np.inf, dtype=np.float64)
        self.aggregated_filter: BoolArray = np.zeros(rows, dtype=np.bool_)
        self.filter_used: IntArray = np.zeros((rows, width), dtype=np.int64)
        self.score_used: IntArray = np.zeros((rows, width), dtype=np.int64)
        self.prod_used: IntArray = np.zeros((rows, width), dtype=np.int64)
        self.usage_limits: FloatArray = np.full((rows, width), np.inf, dtype=np.float64)
        self.prod_limits: FloatArray = np.full((rows, width), np.inf, dtype=np.float64)
        self.uses_prod_thresholds: BoolArray = np.zeros(rows, dtype=np.bool_)
        self._generation = -1
        self._node_ids = []

    # ---- inputs ------------------------------------------------------------------------------

    def on_metric_event(self, event: WatchEvent[NodeMetric]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, metrics: Sequence[NodeMetric]) -> None:
        gone = set(self.loads) - {metric.metadata.name or "" for metric in metrics}
        each(metrics, self._upsert)
        for name in gone:
            del self.loads[name]
            self._dirty.add(name)

    def _upsert(self, metric: NodeMetric) -> str:
        name = metric.metadata.name or ""
        self.loads[name] = decode(metric)
        self._dirty.add(name)
        return name

    def _delete(self, metric: NodeMetric) -> None:
        name = metric.metadata.name or ""
        self.loads.pop(name, None)
        self._dirty.add(name)

    def changed(self, node: str) -> None:
        """The pods assigned to ``node`` changed."""
        self._dirty.add(node)

    # ---- rows --------------------------------------------------------------------------------

    def refresh(self, snapshot: Snapshot, assigned: AssignedPods) -> None:
        """Bring every row the cycle may read up to date."""
        table = snapshot.table
        if table.row_count > self.has_metric.shape[0]:
            self._allocate(max(64, 2 * table.row_count))
        if snapshot.generation != self._generation:
            self._generation = snapshot.generation
            if len(self._node_ids) < table.row_count:
                self._node_ids.extend([0] * (table.row_count - len(self._node_ids)))
            for row, name in enumerate(table.names):
                info = snapshot.node(name) if name else None
                node_id = id(info.node) if info is not None and info.node is not None else 0
                if node_id != self._node_ids[row]:
                    self._node_ids[row] = node_id
                    self._set_profile(row, name, info.node if info is not None else None)
                    self._dirty.add(name)
        for name in self._dirty:
            at = table.row.get(name)
            if at is not None:
                self._build_row(at, name, assigned)
        self._dirty.clear()
        assigned.settle()

    def _vector(self, amounts: Mapping[str, int]) -> IntArray:
        out = np.zeros(len(self.resources), dtype=np.int64)
        for name, amount in amounts.items():
            i = self._index.get(name)
            if i is not None:
                out[i] = amount
        return out

    def _limits(self, thresholds: Mapping[str, int]) -> FloatArray:
        """``threshold + 0.5`` per resource (infinite where none): ``round(p) > t`` iff ``p >= t + 0.5``
        for Go's rounding of a non-negative percentage ``p`` and an integer ``t``."""
        limits = np.full(len(self.resources), np.inf, dtype=np.float64)
        for name, threshold in thresholds.items():
            i = self._index.get(name)
            if i is not None and threshold > 0:
                limits[i] = threshold + 0.5
        return limits

    def _set_profile(self, row: int, name: str, node: Node | None) -> None:
        """The node's thresholds (its Node object changed)."""
        profile = node_profile(node, self.default_profile, self.report)
        if profile is self.default_profile:
            self._profiles.pop(name, None)
        else:
            self._profiles[name] = profile
        thresholds = profile.aggregated[0] if profile.aggregated else profile.usage
        self.usage_limits[row] = self._limits(thresholds)
        self.prod_limits[row] = self._limits(profile.prod)
        self.uses_prod_thresholds[row] = any(profile.prod.get(r, 0) > 0 for r in self.resources)
        self.aggregated_filter[row] = profile.aggregated is not None

    def _build_row(self, row: int, name: str, assigned: AssignedPods) -> None:
        """The node's usage rows (its NodeMetric or its pods changed)."""
        load = self.loads.get(name)
        profile = self._profiles.get(name, self.default_profile)
        if load is None:
            self.has_metric[row] = False
            self.update_time[row] = -np.inf
            return
        self.has_metric[row] = True
        self.update_time[row] = load.update_time if load.update_time is not None else -np.inf
        delta, estimated, prod = self._pods(load, assigned.by_node.get(name, {}).values())
        filter_usage = load.node_usage if load.has_node_metric else {}
        if profile.aggregated is not None:
            _, kind, window = profile.aggregated
            filter_usage = load.aggregated_usage(window, kind) or filter_usage
        score_usage = load.node_usage if load.has_node_metric else {}
        if self._score_aggregate is not None:
            kind, window = self._score_aggregate
            score_usage = load.aggregated_usage(window, kind) or score_usage
        self.filter_used[row] = self._vector(filter_usage) + delta if filter_usage else estimated
        self.score_used[row] = self._vector(score_usage) + delta if score_usage else estimated
        self.prod_used[row] = prod

    def _pods(self, load: NodeLoad, pods: Iterable[AssignedPod]) -> tuple[IntArray, IntArray, IntArray]:
        """(node delta, every pod's estimate, prod usage) from the pods assigned to the node."""
        width = len(self.resources)
        delta = np.zeros(width, dtype=np.int64)
        estimated = np.zeros(width, dtype=np.int64)
        prod = (
            self._vector(load.system_usage) if self.args.prod_usage_include_sys else np.zeros(width, np.int64)
        )
        updated = load.update_time if load.update_time is not None else -np.inf
        for pod in pods:
            reported = load.pods.get(pod.key)
            usage = self._vector(reported.usage) if reported is not None else None
            pending = (
                usage is None
                or pod.assigned_at > updated - load.report_interval
                or (pod.deadline is not None and pod.deadline > updated)
            )
            above = np.maximum(pod.estimate - usage, 0) if usage is not None else pod.estimate
            if pending:
                delta += above
            estimated += pod.estimate
            if pod.prod:
                if reported is not None and reported.prod and usage is not None:
                    prod += usage
                    if pending:
                        prod += above
                else:
                    prod += pod.estimate
        return delta, estimated, prod
