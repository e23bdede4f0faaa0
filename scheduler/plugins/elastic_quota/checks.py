"""The quota checks of PreFilter and Reserve: ``used + request <= runtime`` (or max) on every
resource of the quota's max, ``non-preemptible used + request <= min``, and the same for every
ancestor below the root with ``enableCheckParentQuota``; None when they pass, the reason otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from apis.extension import gang as gang_ext
from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota import messages
from scheduler.plugins.elastic_quota.args import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.forest import OUTSIDE, Forest
from scheduler.plugins.elastic_quota.ledger import Ledger, RequestsOf, gang_key
from scheduler.plugins.elastic_quota.quotas import QuotaIndex
from scheduler.quota import Figures, QuotaSpec, Resources, Usage

__all__ = ["QuotaChecks", "masked_sum", "outside_figures", "outside_spec", "spec_figures"]


def masked_sum(pods: Iterable[PodInfo], names: Iterable[str], requests_of: RequestsOf) -> dict[str, int]:
    keys = list(names)
    total = dict.fromkeys(keys, 0)
    for pod in pods:
        requests = requests_of(pod)
        for name in keys:
            total[name] += requests.get(name, 0)
    return total


def outside_spec(index: QuotaIndex, quota: str) -> QuotaSpec | None:
    """The spec of ``quota`` when it is the system or default quota under the default root, which
    stays outside the sharing (its runtime is its max); None for any other quota."""
    info = index.quotas.get(quota)
    if quota not in OUTSIDE or info is None or info.spec.parent != quota_ext.ROOT_QUOTA_NAME:
        return None
    return info.spec


def outside_figures(index: QuotaIndex, ledger: Ledger, quota: str) -> Figures | None:
    """The figures of the system or default quota under the default root (``outside_spec``): read
    from the ledger alone, so that the pods of clusters without quotas of their own never wait
    for a tree computation."""
    spec = outside_spec(index, quota)
    return None if spec is None else spec_figures(spec, ledger.usage_of(quota))


def spec_figures(spec: QuotaSpec, usage: Usage) -> Figures:
    """The figures of a quota outside the sharing (``outside_spec``) from its sums."""
    keys = list(spec.max)
    return Figures(
        name=spec.name,
        parent=spec.parent,
        min=dict(spec.min),
        max=dict(spec.max),
        auto_scale_min=dict(spec.min),
        shared_weight=dict(spec.shared_weight),
        child_request={k: usage.request.get(k, 0) for k in keys},
        request={k: min(usage.request.get(k, 0), spec.max[k]) for k in keys},
        used={k: usage.used.get(k, 0) for k in keys},
        non_preemptible_request={k: usage.non_preemptible_request.get(k, 0) for k in keys},
        non_preemptible_used={k: usage.non_preemptible_used.get(k, 0) for k in keys},
        runtime=dict(spec.max),
    )


def _within(used: Mapping[str, int], request: Mapping[str, int], limits: Mapping[str, int]) -> bool:
    """``used + request <= limits`` on every resource of ``limits`` (``messages``' test)."""
    return all(used.get(name, 0) + request.get(name, 0) <= limit for name, limit in limits.items())


def _job_words(pods: Sequence[PodInfo]) -> str:
    gangs = {g for p in pods if (g := gang_key(p)) is not None}
    if not gangs:
        return ""
    if len(gangs) == 1:
        return f" of gang {next(iter(gangs))} ({len(pods)} pending members)"
    return f" of gang group {gang_ext.gang_group_id(gangs)} ({len(pods)} pending members)"


class QuotaChecks:
    def __init__(self, args: ElasticQuotaArgs, ledger: Ledger) -> None:
        self.args = args
        self.ledger = ledger

    def check(self, forest: Forest, quota: str, pods: Sequence[PodInfo]) -> str | None:
        """Why ``pods`` (all charged to ``quota``) cannot be admitted together; None if they can."""
        figures = forest.figures.get(quota)
        if figures is None:
            return f"quota {quota} is not part of any quota tree"
        parents: list[Figures] = []
        if self.args.enable_check_parent_quota:
            root = forest.tree_of.get(quota)
            parent = forest.figures.get(figures.parent)
            while parent is not None and parent.name != root:
                parents.append(parent)
                parent = forest.figures.get(parent.parent)
        return self.check_figures(figures, pods, parents=parents)

    def limits(self, figures: Figures) -> tuple[Resources, str]:
        """What the quota's use is held to: its runtime, or its max without ``enableRuntimeQuota``."""
        if self.args.enable_runtime_quota:
            return figures.runtime, "runtime"
        return figures.max, "max"

    def fits_outside(self, quota: str, spec: QuotaSpec, pods: Sequence[PodInfo]) -> bool:
        """Whether ``check_figures`` passes ``pods`` on ``outside_figures(quota)``, read from the
        ledger's sums in place: every pod of a cluster without quotas of its own asks this, and
        the figures (eleven dicts) are only needed to word a rejection."""
        usage = self.ledger.usage_of(quota)
        requests_of = self.ledger.requests_of
        if not _within(usage.used, masked_sum(pods, spec.max, requests_of), spec.max):
            return False  # the runtime of a quota outside the sharing is its max
        keep_out = [p for p in pods if not quota_ext.is_preemptible(p.labels)]
        if not keep_out:
            return True
        # The figures hold only the names of max: a name of min alone reads as nothing used.
        held = usage.non_preemptible_used
        used = {name: held.get(name, 0) for name in spec.min if name in spec.max}
        return _within(used, masked_sum(keep_out, spec.min, requests_of), spec.min)

    def check_figures(
        self, figures: Figures, pods: Sequence[PodInfo], *, parents: Sequence[Figures]
    ) -> str | None:
        what = _job_words(pods)
        requests_of = self.ledger.requests_of
        limits, limit_name = self.limits(figures)
        problem = messages.insufficient(
            figures.name, figures.used, masked_sum(pods, limits, requests_of), limits, limit_name, what
        )
        if problem is not None:
            return problem
        keep_out = [p for p in pods if not quota_ext.is_preemptible(p.labels)]
        if keep_out:
            problem = messages.insufficient_non_preemptible(
                figures.name,
                figures.non_preemptible_used,
                masked_sum(keep_out, figures.min, requests_of),
                figures.min,
                what,
            )
            if problem is not None:
                return problem
        topology = [figures.name]
        for parent in parents:
            topology.insert(0, parent.name)
            limits, limit_name = self.limits(parent)
            problem = messages.insufficient_parent(
                topology, parent.used, masked_sum(pods, limits, requests_of), limits, limit_name, what
            )
            if problem is not None:
                return problem
        return None
