"""Runs a profile's plugins at each extension point; the bookkeeping lives here, not in plugins.

As kube-scheduler's ``runtime/framework.go``: the runtime stamps the plugin's name on a
rejection, turns an unexpected exception into an Error status naming the plugin, honours
PreFilter SKIPs, and times every extension point and, in a sample of the cycles, every plugin call
(``observe`` feeds the Prometheus metrics).

Filter is vectorized: each Filter plugin sees only the rows that every earlier plugin accepted,
and a rejected node is counted once per reason of the first plugin that rejected it, which is
what kube-scheduler's "0/50 nodes are available: ..." message counts.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework import extensions as ext
from scheduler.framework import interfaces as fw
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.filter_record import FilterRecord
from scheduler.framework.handle import Handle
from scheduler.framework.profile import EXTENSION_POINT_METHODS, ExtensionPoint, ResolvedProfile
from scheduler.framework.registry import Registry
from scheduler.framework.status import Code, Status
from scheduler.solver.problem import SpreadConstraint

__all__ = ["PLUGIN_METRICS_SAMPLE_PERCENT", "Framework", "MetricsSample", "Observer", "PointObserver"]

log = logging.getLogger(__name__)

Observer = Callable[[str, str, str, float], None]
"""(extension point, plugin, status code name, seconds): one plugin call."""

PointObserver = Callable[[str, str, str, float], None]
"""(extension point, status code name, profile, seconds): every plugin of one point for one pod
(``scheduler_framework_extension_point_duration_seconds``)."""


# The extension points' label values, looked up once: the loops below run every cycle.
PRE_FILTER = ExtensionPoint.PRE_FILTER.value
FILTER = ExtensionPoint.FILTER.value
PRE_SCORE = ExtensionPoint.PRE_SCORE.value
SCORE = ExtensionPoint.SCORE.value
RESERVE = ExtensionPoint.RESERVE.value
PRE_ENQUEUE = ExtensionPoint.PRE_ENQUEUE.value
POST_FILTER = ExtensionPoint.POST_FILTER.value
PERMIT = ExtensionPoint.PERMIT.value
PRE_BIND = ExtensionPoint.PRE_BIND.value
BIND = ExtensionPoint.BIND.value
POST_BIND = ExtensionPoint.POST_BIND.value


def _no_observer(point: str, plugin: str, code: str, seconds: float) -> None:
    return None


_SUCCESS, _SKIP, _UNSCHEDULABLE, _WAIT = Code.SUCCESS, Code.SKIP, Code.UNSCHEDULABLE, Code.WAIT
"""The codes the loops below compare with, read once: a member read off ``Code`` is a descriptor call."""
_CODE_NAMES = {code: code.name for code in Code}
"""Each code's name, looked up in a dict: ``Code.name`` goes through the enum's descriptor."""


def _status_of(result: Any) -> str:
    """The status code name in whatever an extension point's runner returns."""
    if isinstance(result, Status):
        return _CODE_NAMES[result.code]
    if isinstance(result, tuple):
        for part in result:
            if isinstance(part, Status):
                return _CODE_NAMES[part.code]
    elif isinstance(result, fw.PostFilterResult):
        return _CODE_NAMES[result.status.code]
    return _CODE_NAMES[_SUCCESS]


PLUGIN_METRICS_SAMPLE_PERCENT = 10
"""kube-scheduler's ``metricsSamplePercent``: the share of scheduling cycles whose plugins are each
timed into ``plugin_execution_duration_seconds`` (every extension point is timed in every cycle)."""


class MetricsSample:
    """Which cycles time their plugins: every ``100 / percent``-th, the first one included.

    kube-scheduler draws ``rand.Intn(100) < metricsSamplePercent``; counting gives the same share
    without a random draw, and a scheduler's first cycles are always in the histogram."""

    __slots__ = ("_count", "_every")

    def __init__(self, percent: int = PLUGIN_METRICS_SAMPLE_PERCENT) -> None:
        if not 0 < percent <= 100:
            raise ValueError(f"plugin metrics sample percent must be in (0, 100], not {percent}")
        self._every = round(100 / percent)
        self._count = -1

    def take(self) -> bool:
        self._count += 1
        return self._count % self._every == 0


_R = TypeVar("_R")


def _point(point: ExtensionPoint) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """Time all plugins of ``point`` for one pod (extension_point_duration_seconds)."""

    label = point.value  # an enum's value is a descriptor read: read once, not per call

    def wrap(run: Callable[..., _R]) -> Callable[..., _R]:
        if inspect.iscoroutinefunction(run):

            @functools.wraps(run)
            async def timed_async(self: Framework, *args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                result = await run(self, *args, **kwargs)
                self._observe_point(
                    label, _status_of(result), self.scheduler_name, time.perf_counter() - started
                )
                return result

            return cast("Callable[..., _R]", timed_async)

        @functools.wraps(run)
        def timed(self: Framework, *args: Any, **kwargs: Any) -> _R:
            started = time.perf_counter()
            result = run(self, *args, **kwargs)
            self._observe_point(label, _status_of(result), self.scheduler_name, time.perf_counter() - started)
            return result

        return timed

    return wrap


class Framework:
    """The plugins of one profile (one schedulerName), built once.

    The Framework is also what the profile offers its plugins (``handle.ProfileView``): it binds
    the ``Handle`` it is given to itself before it builds the plugins, and finds the plugins that
    resolve jobs or take part in preemption by their protocols, so that no plugin assigns into
    the Handle or imports another."""

    def __init__(
        self,
        profile: ResolvedProfile,
        registry: Registry,
        handle: Handle,
        *,
        observe: Observer = _no_observer,
        observe_point: PointObserver = _no_observer,
    ) -> None:
        self.profile = profile
        self.scheduler_name = profile.scheduler_name
        self.handle = dataclasses.replace(handle, profile=self)
        self._observe = observe
        self._observe_point = observe_point
        self._cycle_sample = MetricsSample()
        self._pre_enqueue_sample = MetricsSample()
        self._planning_sample = MetricsSample()
        self.plugins: dict[str, Any] = {}
        for refs in profile.plugins.values():
            for ref in refs:
                if ref.name not in self.plugins:
                    spec = registry.get(ref.name)
                    raw_args = profile.plugin_args.get(ref.name, {})
                    args = spec.args_model.model_validate(raw_args) if spec.args_model else None
                    self.plugins[ref.name] = spec.factory(args, self.handle)
        self._points: dict[str, list[Any]] = {}
        """By the point's label (``point.value``): an enum member hashes in Python, a str does not."""
        self.score_weights: dict[str, int] = {}
        for point, refs in profile.plugins.items():
            plugins = []
            for ref in refs:
                plugin = self.plugins[ref.name]
                missing = [
                    m for m in EXTENSION_POINT_METHODS[point] if not callable(getattr(plugin, m, None))
                ]
                if missing:
                    raise TypeError(
                        f"plugin {ref.name} is enabled at {point} but has no {', '.join(missing)}"
                    )
                plugins.append(plugin)
                if point is ExtensionPoint.SCORE:
                    self.score_weights[ref.name] = ref.weight
            self._points[point.value] = plugins
        self._scorers = tuple(
            (
                plugin,
                plugin.name,
                getattr(plugin, "normalize_scores", None),
                self.score_weights.get(plugin.name, 1),
            )
            for plugin in self._points.get(SCORE, [])
        )
        """Per Score plugin, what ``run_score`` reads of it every cycle: its name, its normalization
        (None: none) and its weight."""
        self._named: dict[str, tuple[tuple[Any, str], ...]] = {
            label: tuple((plugin, plugin.name) for plugin in plugins)
            for label, plugins in self._points.items()
        }
        """Per point, each plugin with its name: the loops below read a plugin's name per cycle (a
        property call each time)."""
        self._pre_filters: tuple[tuple[fw.PreFilterPlugin, str], ...] = self._named.get(PRE_FILTER, ())
        self._only: dict[tuple[str, frozenset[str]], tuple[tuple[Any, str], ...]] = {}
        class_skips = {
            plugin.name: plugin.pre_filter_skip_reads
            for plugin in self._points.get(PRE_FILTER, [])
            if isinstance(plugin, ext.SkipByClass) and plugin.pre_filter_skip_reads is not None
        }
        self._skips_by_spec = frozenset(n for n, reads in class_skips.items() if reads is ext.SkipReads.SPEC)
        self._skips_without_volumes = frozenset(class_skips)
        self._job_resolvers = [p for p in self.plugins.values() if isinstance(p, ext.JobResolver)]
        self._preemption_extensions = tuple(
            p for p in self.plugins.values() if isinstance(p, ext.PreemptionExtension)
        )
        self._spread_sources = [p for p in self.plugins.values() if isinstance(p, ext.GangSpreadSource)]
        self._preemptor = next((p for p in self.plugins.values() if isinstance(p, ext.Preemptor)), None)
        self._prefer_nodes = next(
            (p for p in self.plugins.values() if isinstance(p, ext.PreferNodesPlugin)), None
        )
        self._reserved_room = [p for p in self.plugins.values() if isinstance(p, ext.ReservedRoom)]
        self._reservation_filters = tuple(
            p for p in self.plugins.values() if isinstance(p, ext.ReservationFilterPlugin)
        )
        self._member_rooms = [p for p in self.plugins.values() if isinstance(p, ext.MemberRoom)]
        self._off_cycle = tuple(p for p in self.plugins.values() if isinstance(p, ext.OffCycleWork))
        self._numa_hint_providers = tuple(
            p for p in self.plugins.values() if isinstance(p, ext.NUMAHintProvider)
        )
        self._queue_precedence = tuple(p for p in self.plugins.values() if isinstance(p, ext.QueuePrecedence))
        sorts = self._points.get(ExtensionPoint.QUEUE_SORT.value, [])
        if len(sorts) != 1:
            raise ValueError(f"profile {self.scheduler_name}: exactly one queueSort plugin must be enabled")
        self._queue_sort: fw.QueueSortPlugin = sorts[0]

    def cycle_state(self) -> CycleState:
        """A scheduling cycle's state; a sample of the cycles time each plugin (``MetricsSample``)."""
        return CycleState(record_plugin_metrics=self._cycle_sample.take())

    # ---- the ProfileView offered to plugins ---------------------------------------------------

    def feasible_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray | None = None) -> IntArray:
        """The rows (of ``rows``; None: every node) every PreFilter and Filter accept for ``pod``,
        in a planning CycleState of its own (so a plugin that plans several pods does not recurse)."""
        state = CycleState(planning=True, record_plugin_metrics=self._planning_sample.take())
        status, allowed = self.run_pre_filter(state, pod, snapshot)
        if rows is None:
            rows = snapshot.candidate_rows()
        if not status.ok:
            return rows[:0]
        if allowed is not None:
            rows = rows[snapshot.rows_named(rows, allowed)]
        feasible, status = self.run_filter(state, pod, snapshot, rows, fw.Diagnosis())
        return feasible if status.ok else rows[:0]

    def score_rows(self, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        """The profile's weighted Score total for ``pod`` on ``rows`` (what the cycle would rank by)."""
        state = CycleState(planning=True, record_plugin_metrics=self._planning_sample.take())
        if rows.size == 0 or not self.run_pre_filter(state, pod, snapshot)[0].ok:
            return np.zeros(rows.size, dtype=np.int64)
        if not self.run_pre_score(state, pod, snapshot, rows).ok:
            return np.zeros(rows.size, dtype=np.int64)
        total, _, status = self.run_score(state, pod, snapshot, rows)
        return total if status.ok else np.zeros(rows.size, dtype=np.int64)

    def job_of(self, pod: PodInfo) -> str:
        for resolver in self._job_resolvers:
            return resolver.job_of(pod)
        return pod.uid

    def off_cycle_tasks(self) -> int:
        """The plugins' work for pods in flight off the cycle (``ext.OffCycleWork``)."""
        return sum(plugin.off_cycle_tasks() for plugin in self._off_cycle)

    def preemption_extensions(self) -> Sequence[ext.PreemptionExtension]:
        return self._preemption_extensions

    def gang_spread(self, members: Sequence[PodInfo], snapshot: Snapshot) -> tuple[SpreadConstraint, ...]:
        return tuple(c for source in self._spread_sources for c in source.gang_spread(members, snapshot))

    def preemptor(self) -> ext.Preemptor | None:
        return self._preemptor

    def restore_reserved(self, pods: Sequence[PodInfo], snapshot: Snapshot) -> None:
        for plugin in self._reserved_room:
            plugin.restore_for(pods, snapshot)

    def reservation_filters(self) -> Sequence[ext.ReservationFilterPlugin]:
        return self._reservation_filters

    def numa_hint_providers(self) -> Sequence[ext.NUMAHintProvider]:
        return self._numa_hint_providers

    def member_room(
        self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int
    ) -> list[ext.Room]:
        rooms = (plugin.member_room(pod, snapshot, nodes, limit) for plugin in self._member_rooms)
        return [room for room in rooms if room is not None]

    # ---- lookup ------------------------------------------------------------------------------

    def has(self, point: ExtensionPoint) -> bool:
        return bool(self._points.get(point.value))

    def plugin(self, name: str) -> Any | None:
        return self.plugins.get(name)

    def runs_at(self, point: ExtensionPoint) -> Sequence[fw.Plugin]:
        """The plugins enabled at ``point``, in their order."""
        return tuple(self._points.get(point.value, ()))

    # ---- helpers -----------------------------------------------------------------------------

    def _narrowed(self, point: str, only: frozenset[str] | None) -> tuple[tuple[Any, str], ...]:
        """The plugins at ``point`` (a label) named in ``only`` (None: all), in their order, kept
        per set asked: an equivalence class asks for the same few every cycle."""
        if only is None:
            return self._named.get(point, ())
        key = (point, only)
        found = self._only.get(key)
        if found is None:
            if len(self._only) >= 64:  # a handful of sets in practice; bounded all the same
                self._only.clear()
            found = self._only[key] = tuple(pair for pair in self._named.get(point, ()) if pair[1] in only)
        return found

    def _timed(
        self, record: bool, point: ExtensionPoint, plugin: fw.Plugin, status: Status, started: float
    ) -> Status:
        if record:
            self._observe(point.value, plugin.name, _CODE_NAMES[status.code], time.perf_counter() - started)
        return status.with_plugin(plugin.name) if not status.ok else status

    def _fault(self, point: ExtensionPoint, plugin: fw.Plugin, exc: BaseException) -> Status:
        log.exception("plugin %s failed at %s", plugin.name, point.value)
        return Status.error(f"{type(exc).__name__}: {exc}").with_plugin(plugin.name)

    # ---- queue -------------------------------------------------------------------------------

    def queue_sort_key(self, pod: PodInfo) -> tuple[Any, ...]:
        """The queueSort plugin's key, after the pod's priority and whether a ``QueuePrecedence``
        plugin sends it first among the pods of that priority."""
        first = any(p.queue_first(pod) for p in self._queue_precedence)
        return (-pod.priority, not first, *self._queue_sort.sort_key(pod))

    @_point(ExtensionPoint.PRE_ENQUEUE)
    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        record = self._pre_enqueue_sample.take()
        for plugin in cast("list[fw.PreEnqueuePlugin]", self._points.get(PRE_ENQUEUE, [])):
            started = time.perf_counter()
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as exc:
                return self._fault(ExtensionPoint.PRE_ENQUEUE, plugin, exc)
            status = self._timed(record, ExtensionPoint.PRE_ENQUEUE, plugin, status, started)
            if not status.ok:
                return status
        return Status.success()

    # ---- filtering ---------------------------------------------------------------------------

    def class_skips(self, pod: PodInfo) -> frozenset[str]:
        """The PreFilter plugins whose SKIP for ``pod`` holds for every pod of its class
        (``ext.SkipByClass``): those that read the spec only, and, for a pod without volumes,
        those that read its volumes too."""
        return self._skips_by_spec if pod.pod.spec.volumes else self._skips_without_volumes

    @_point(ExtensionPoint.PRE_FILTER)
    def run_pre_filter(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        *,
        known_skips: frozenset[str] = frozenset(),
    ) -> tuple[Status, frozenset[str] | None]:
        """``known_skips``: plugins that skipped a pod of this pod's class (of ``class_skips``),
        counted as SKIP without asking them, but in the cycles that time each plugin."""
        record = state.record_plugin_metrics
        if record:
            known_skips = frozenset()
        allowed: frozenset[str] | None = None
        for plugin, name in self._pre_filters:
            if known_skips and name in known_skips:
                state.skip_filter.add(name)
                continue
            started = time.perf_counter() if record else 0.0
            try:
                result = plugin.pre_filter(state, pod, snapshot)
            except Exception as exc:
                return self._fault(ExtensionPoint.PRE_FILTER, plugin, exc), None
            code = result.status.code
            if record:
                self._observe(PRE_FILTER, name, _CODE_NAMES[code], time.perf_counter() - started)
            if code is _SKIP:
                state.skip_filter.add(name)
                continue
            if code is not _SUCCESS:
                return result.status.with_plugin(name), None
            if result.node_names is not None:
                allowed = result.node_names if allowed is None else allowed & result.node_names
        return Status.success(), allowed

    def run_prefer_nodes(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, allowed: frozenset[str] | None
    ) -> str | None:
        """The first node the profile's ``PreferNodesPlugin`` names that every Filter accepts
        (Koordinator's ``RunPreferNodesPlugin``); None: no preference, or none of them fits."""
        plugin = self._prefer_nodes
        if plugin is None:
            return None
        try:
            nodes = plugin.prefer_nodes(state, pod, allowed)
        except Exception:
            log.exception("plugin %s failed to name preferred nodes for %s", plugin.name, pod.key)
            return None
        for node in nodes:
            row = snapshot.table.row.get(node)
            if row is None or snapshot.node(node) is None:
                continue
            feasible, status = self.run_filter(
                state, pod, snapshot, np.array([row], dtype=np.int64), fw.Diagnosis()
            )
            if status.ok and feasible.size:
                return node
            log.debug("preferred node %s does not fit %s", node, pod.key)
        return None

    @_point(ExtensionPoint.FILTER)
    def run_filter(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        diagnosis: fw.Diagnosis,
        *,
        skip: frozenset[str] = frozenset(),
        recorded: Mapping[str, FilterRecord] | None = None,
    ) -> tuple[IntArray, Status]:
        """The rows every Filter accepts; rejections are counted into ``diagnosis``. ``skip``: the
        plugins whose verdicts an equivalence class holds; ``recorded``: plugins whose answers are
        read from their records instead of asked (each record current on ``rows``)."""
        return self.filter_rows(state, pod, snapshot, rows, diagnosis, skip=skip, recorded=recorded)

    def filter_rows(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        diagnosis: fw.Diagnosis,
        *,
        only: frozenset[str] | None = None,
        skip: frozenset[str] = frozenset(),
        recorded: Mapping[str, FilterRecord] | None = None,
        into: Mapping[str, FilterRecord] | None = None,
    ) -> tuple[IntArray, Status]:
        """``run_filter``, narrowed to ``only``, without timing the extension point: work a cycle
        does beside its one Filter pass (an equivalence class asking about the rows that changed).
        ``into``: the records each named plugin's answers are stored in."""
        record = state.record_plugin_metrics
        skipped = state.skip_filter
        named = cast("tuple[tuple[fw.FilterPlugin, str], ...]", self._narrowed(FILTER, only))
        for plugin, name in named:
            if name in skipped or (skip and name in skip) or rows.size == 0:
                continue
            kept = recorded.get(name) if recorded else None
            if kept is not None:
                rows = self._count_rejections(kept.replay(rows), name, rows, diagnosis)
                continue
            started = time.perf_counter() if record else 0.0
            try:
                result = plugin.filter(state, pod, snapshot, rows)
            except Exception as exc:
                return rows[:0], self._fault(ExtensionPoint.FILTER, plugin, exc)
            if result.error is not None:
                status = self._timed(
                    record, ExtensionPoint.FILTER, plugin, Status.error(result.error), started
                )
                return rows[:0], status
            if into is not None:
                into[name].store(rows, result)
            code = _SUCCESS if result.feasible.all() else _UNSCHEDULABLE
            if record:
                self._observe(FILTER, name, _CODE_NAMES[code], time.perf_counter() - started)
            if code is not _SUCCESS:
                rows = self._count_rejections(result, name, rows, diagnosis)
        return rows, Status.success()

    @staticmethod
    def _count_rejections(
        result: fw.FilterResult, plugin: str, rows: IntArray, diagnosis: fw.Diagnosis
    ) -> IntArray:
        """``rows`` less those ``plugin`` rejected, each counted into ``diagnosis`` per reason."""
        if result.feasible.all():
            return rows
        rejected = ~result.feasible
        diagnosis.rejecting_plugins.add(plugin)
        for reason, mask in result.rejections:
            count = int(np.count_nonzero(mask & rejected))
            if count:
                diagnosis.reason_counts[reason] = diagnosis.reason_counts.get(reason, 0) + count
        if result.unresolvable is not None:
            diagnosis.unresolvable_rows.update(int(r) for r in rows[result.unresolvable & rejected])
        kept: IntArray = rows[result.feasible]
        return kept

    @_point(ExtensionPoint.POST_FILTER)
    async def run_post_filter(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, diagnosis: fw.Diagnosis
    ) -> fw.PostFilterResult:
        record = state.record_plugin_metrics
        last = fw.PostFilterResult(Status.unschedulable("no postFilter plugin made the pod schedulable"))
        # Each plugin that could not help says why; the pod's message keeps every reason, joined as
        # kube-scheduler joins its PostFilter plugins' reasons.
        reasons: list[str] = []
        for plugin in cast("list[fw.PostFilterPlugin]", self._points.get(POST_FILTER, [])):
            diagnosis.post_filter_message = None
            started = time.perf_counter()
            try:
                result = await plugin.post_filter(state, pod, snapshot, diagnosis)
            except Exception as exc:
                return fw.PostFilterResult(self._fault(ExtensionPoint.POST_FILTER, plugin, exc))
            status = self._timed(record, ExtensionPoint.POST_FILTER, plugin, result.status, started)
            if status.ok or status.code == Code.ERROR:
                return fw.PostFilterResult(status, result.nominated_node)
            if diagnosis.post_filter_message:
                reasons.append(diagnosis.post_filter_message)
            last = fw.PostFilterResult(status)
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                # As kube-scheduler's RunPostFilterPlugins: the plugins after it do not run (a job
                # whose victims are still going must not get a second preemption from another one).
                break
        diagnosis.post_filter_message = ", ".join(reasons) or None
        return last

    # ---- scoring -----------------------------------------------------------------------------

    @_point(ExtensionPoint.PRE_SCORE)
    def run_pre_score(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        *,
        skip: frozenset[str] = frozenset(),
    ) -> Status:
        return self.pre_score_rows(state, pod, snapshot, rows, skip=skip)

    def pre_score_rows(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        *,
        only: frozenset[str] | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> Status:
        """``run_pre_score``, narrowed to ``only``, without timing the extension point (as
        ``filter_rows``)."""
        record = state.record_plugin_metrics
        for plugin, name in cast(
            "tuple[tuple[fw.PreScorePlugin, str], ...]", self._narrowed(PRE_SCORE, only)
        ):
            if skip and name in skip:
                continue
            started = time.perf_counter() if record else 0.0
            try:
                status = plugin.pre_score(state, pod, snapshot, rows)
            except Exception as exc:
                return self._fault(ExtensionPoint.PRE_SCORE, plugin, exc)
            if record:
                self._observe(PRE_SCORE, name, _CODE_NAMES[status.code], time.perf_counter() - started)
            if status.code is _SKIP:
                state.skip_score.add(name)
            elif status.code is not _SUCCESS:
                return status.with_plugin(name)
        return Status.success()

    @_point(ExtensionPoint.SCORE)
    def run_score(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: Snapshot,
        rows: IntArray,
        *,
        raw: Mapping[str, IntArray] | None = None,
    ) -> tuple[IntArray, dict[str, IntArray], Status]:
        """Weighted sum of every Score plugin's (normalized) scores, plus each plugin's scores.
        ``raw``: plugin -> its raw scores already known, row-count long (an equivalence class's),
        read instead of asking the plugin; normalized over ``rows`` as the plugin's own would be."""
        record = state.record_plugin_metrics
        total = np.zeros(rows.size, dtype=np.int64)
        per_plugin: dict[str, IntArray] = {}
        skipped = state.skip_score
        for plugin, name, normalize, weight in self._scorers:
            if name in skipped:
                continue
            started = time.perf_counter() if record else 0.0
            known = raw.get(name) if raw is not None else None
            try:
                scores = (
                    np.asarray(plugin.score(state, pod, snapshot, rows), dtype=np.int64)
                    if known is None
                    else known[rows]
                )
                if normalize is not None:
                    scores = np.asarray(normalize(state, pod, scores), dtype=np.int64)
            except Exception as exc:
                return total, per_plugin, self._fault(ExtensionPoint.SCORE, plugin, exc)
            if record:
                self._observe(SCORE, name, "SUCCESS", time.perf_counter() - started)
            per_plugin[name] = scores
            if weight == 1:  # most plugins: no temporary array of products
                total += scores
            else:
                total += scores * weight
        return total, per_plugin, Status.success()

    def raw_scores(
        self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray, *, only: frozenset[str]
    ) -> tuple[dict[str, IntArray], Status]:
        """The raw (not normalized) scores of the Score plugins in ``only`` not skipped, on ``rows``."""
        record = state.record_plugin_metrics
        found: dict[str, IntArray] = {}
        for plugin, name in cast("tuple[tuple[fw.ScorePlugin, str], ...]", self._narrowed(SCORE, only)):
            if name in state.skip_score:
                continue
            started = time.perf_counter() if record else 0.0
            try:
                found[name] = np.asarray(plugin.score(state, pod, snapshot, rows), dtype=np.int64)
            except Exception as exc:
                return found, self._fault(ExtensionPoint.SCORE, plugin, exc)
            if record:
                self._observe(SCORE, name, "SUCCESS", time.perf_counter() - started)
        return found, Status.success()

    # ---- reserve / permit / bind -------------------------------------------------------------

    @_point(ExtensionPoint.RESERVE)
    def run_reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        record = state.record_plugin_metrics
        for plugin, name in cast("tuple[tuple[fw.ReservePlugin, str], ...]", self._named.get(RESERVE, ())):
            started = time.perf_counter() if record else 0.0
            try:
                status = plugin.reserve(state, pod, node)
            except Exception as exc:
                return self._fault(ExtensionPoint.RESERVE, plugin, exc)
            if record:
                self._observe(RESERVE, name, _CODE_NAMES[status.code], time.perf_counter() - started)
            if status.code is not _SUCCESS:
                return status.with_plugin(name)
        return Status.success()

    @_point(ExtensionPoint.RESERVE)
    def run_unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for plugin in reversed(cast("list[fw.ReservePlugin]", self._points.get(RESERVE, []))):
            try:
                plugin.unreserve(state, pod, node)
            except Exception:
                log.exception("plugin %s failed to unreserve %s", plugin.name, pod.key)

    @_point(ExtensionPoint.PERMIT)
    def run_permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        """SUCCESS, a rejection, or WAIT (the pod is registered in ``handle.waiting_pods``)."""
        record = state.record_plugin_metrics
        waits: dict[str, float] = {}
        for plugin in cast("list[fw.PermitPlugin]", self._points.get(PERMIT, [])):
            started = time.perf_counter() if record else 0.0
            try:
                status, timeout = plugin.permit(state, pod, node)
            except Exception as exc:
                return self._fault(ExtensionPoint.PERMIT, plugin, exc)
            code = status.code
            if record:
                self._observe(PERMIT, plugin.name, _CODE_NAMES[code], time.perf_counter() - started)
            if code is _SUCCESS:
                continue
            if code is _WAIT:
                waits[plugin.name] = timeout
            elif not status.ok:
                return status.with_plugin(plugin.name)
        if waits:
            self.handle.waiting_pods.add(pod, node, waits)
            return Status.wait()
        return Status.success()

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        waiting = self.handle.waiting_pods.get(pod.uid)
        if waiting is None:
            return Status.success()
        try:
            return await waiting.wait()
        finally:
            self.handle.waiting_pods.remove(pod.uid)

    @_point(ExtensionPoint.PRE_BIND)
    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        record = state.record_plugin_metrics
        for plugin in cast("list[fw.PreBindPlugin]", self._points.get(PRE_BIND, [])):
            started = time.perf_counter() if record else 0.0
            try:
                status = await plugin.pre_bind(state, pod, node)
            except Exception as exc:
                return self._fault(ExtensionPoint.PRE_BIND, plugin, exc)
            if record:
                self._observe(PRE_BIND, plugin.name, _CODE_NAMES[status.code], time.perf_counter() - started)
            if not status.ok:
                return status.with_plugin(plugin.name)
        return Status.success()

    @_point(ExtensionPoint.BIND)
    async def run_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        record = state.record_plugin_metrics
        for plugin in cast("list[fw.BindPlugin]", self._points.get(BIND, [])):
            started = time.perf_counter() if record else 0.0
            try:
                status = await plugin.bind(state, pod, node)
            except Exception as exc:
                return self._fault(ExtensionPoint.BIND, plugin, exc)
            if record:
                self._observe(BIND, plugin.name, _CODE_NAMES[status.code], time.perf_counter() - started)
            if status.code is not _SKIP:
                return status if status.ok else status.with_plugin(plugin.name)
        return Status.error("no bind plugin bound the pod")

    @_point(ExtensionPoint.POST_BIND)
    def run_post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        for plugin in cast("list[fw.PostBindPlugin]", self._points.get(POST_BIND, [])):
            try:
                plugin.post_bind(state, pod, node)
            except Exception:
                log.exception("plugin %s failed at postBind for %s", plugin.name, pod.key)
