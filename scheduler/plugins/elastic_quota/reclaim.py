"""The figures' side of quota reclaim and quota preemption (``extensions.PreemptionExtension``):
who is entitled to what, read from one quota's figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota.checks import masked_sum
from scheduler.plugins.elastic_quota.ledger import RequestsOf
from scheduler.quota import Figures, Resources

__all__ = ["above_entitlement", "amounts_above_entitlement", "release_needed", "within_runtime"]


def within_runtime(claimant: Figures, request: Mapping[str, int]) -> bool:
    """The claimant's use plus ``request`` (masked to its runtime) stays within its runtime."""
    return not any(claimant.used.get(r, 0) + request[r] > limit for r, limit in claimant.runtime.items())


def above_entitlement(holder: Figures) -> bool:
    """The quota uses more than ``max(min, runtime)`` on some resource (its runtime counts the claim)."""
    return any(used > max(holder.min.get(r, 0), holder.runtime.get(r, 0)) for r, used in holder.used.items())


def amounts_above_entitlement(figures: Figures) -> dict[str, int]:
    """What the quota holds above ``max(min, runtime)``, per resource of its max."""
    keep = {r: max(figures.min.get(r, 0), figures.runtime.get(r, 0)) for r in figures.max}
    return {r: max(0, figures.used.get(r, 0) - keep[r]) for r in figures.max}


def release_needed(
    figures: Figures, pods: Sequence[PodInfo], limits: Resources, requests_of: RequestsOf
) -> dict[str, int] | None:
    """What the quota's own pods must free for ``pods`` to fit ``limits`` (runtime or max); None
    when nothing needs freeing or when the non-preemptible limit fails, which evicting preemptible
    pods cannot change."""
    keep_out = [p for p in pods if not quota_ext.is_preemptible(p.labels)]
    if keep_out:
        np_request = masked_sum(keep_out, figures.min, requests_of)
        if any(figures.non_preemptible_used.get(r, 0) + np_request[r] > m for r, m in figures.min.items()):
            return None
    request = masked_sum(pods, limits, requests_of)
    need = {r: figures.used.get(r, 0) + request[r] - limit for r, limit in limits.items()}
    need = {r: amount for r, amount in need.items() if amount > 0}
    return need or None
