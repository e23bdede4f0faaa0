"""The revoke controller's reach into the cluster (revoke.py decides): a quota's running pods, and
their eviction through the Eviction API, so PodDisruptionBudgets hold."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from apis.client.eviction import EvictionRequest
from apis.duration import parse_go_duration_ns
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.plugins.elastic_quota.args import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.ledger import Ledger, RequestsOf
from scheduler.plugins.elastic_quota.revoke import RevokeController
from scheduler.quota import Figures

__all__ = ["QuotaRevoker"]

log = logging.getLogger(__name__)


class QuotaRevoker:
    def __init__(
        self,
        args: ElasticQuotaArgs,
        handle: Handle,
        ledger: Ledger,
        figures: Callable[[], Mapping[str, Figures]],
        requests_of: RequestsOf,
    ) -> None:
        self.args = args
        self.handle = handle
        self.ledger = ledger
        self.controller: RevokeController | None = None
        """Only with ``monitorAllQuotas`` and ``enableRuntimeQuota``."""
        if args.monitor_all_quotas and args.enable_runtime_quota:
            self.controller = RevokeController(
                figures,
                self._running_pods,
                self._revoke,
                delay_seconds=parse_go_duration_ns(args.delay_evict_time) / 1e9,
                interval_seconds=max(parse_go_duration_ns(args.revoke_pod_interval) / 1e9, 0.01),
                clock=handle.clock,
                requests_of=requests_of,
            )

    def start(self) -> None:
        if self.controller is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a synchronous test): ``revoke.tick`` is called by hand
        self.controller.start()

    async def close(self) -> None:
        if self.controller is not None:
            await self.controller.close()

    def _running_pods(self, quota: str) -> list[PodInfo]:
        return [
            c.pod
            for c in self.ledger.charges_of(quota)
            if c.assigned and not c.reserved and not is_reserve_pod(c.pod.annotations)
        ]

    async def _revoke(self, pod: PodInfo, quota: str) -> None:
        """Evict one pod of an overused quota (Eviction API: a PodDisruptionBudget may refuse)."""
        going = await self.handle.eviction.evict(
            EvictionRequest(
                pod=pod,
                reason="QuotaRevoked",
                event_type="Warning",
                action="Evicting",
                message=(
                    f"quota {quota} used more than its runtime for longer than "
                    f"{self.args.delay_evict_time}: evicted to give the quota back"
                ),
            )
        )
        if going:
            log.info(
                "revoked %s: quota %s used more than its runtime for longer than %s",
                pod.key,
                quota,
                self.args.delay_evict_time,
            )
