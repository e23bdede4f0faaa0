"""ElasticQuota and ElasticQuotaProfile events: the quota index (through the quota hooks, which
may replace a quota), and the ledger remapped when pods' quotas change."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from apis.client.backend import WatchEvent
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.elasticquota import ElasticQuota as ElasticQuotaObject
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota.hooks import Hooks
from scheduler.plugins.elastic_quota.ledger import Ledger
from scheduler.plugins.elastic_quota.quotas import QuotaIndex
from scheduler.plugins.elastic_quota.writer import FiguresWriter

__all__ = ["QuotaHandler"]


class QuotaHandler:
    def __init__(
        self,
        index: QuotaIndex,
        ledger: Ledger,
        hooks: Hooks,
        writer: FiguresWriter,
        quota_name: Callable[[PodInfo], str],
    ) -> None:
        self.index = index
        self.ledger = ledger
        self.hooks = hooks
        self.writer = writer
        self._quota_name = quota_name
        self._mapping_version = index.mapping_version

    def on_quota_event(self, event: WatchEvent[ElasticQuotaObject]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)
        if self.index.mapping_version != self._mapping_version:
            self._mapping_version = self.index.mapping_version
            self.ledger.remap(self._quota_name)
        self.writer.changed()

    def _replace(self, quotas: Sequence[ElasticQuotaObject]) -> None:
        self.index.replace_quotas(self.hooks.replace_quotas(quotas))

    def _upsert(self, quota: ElasticQuotaObject) -> None:
        self.index.on_quota(self.hooks.on_quota(quota))

    def _delete(self, quota: ElasticQuotaObject) -> None:
        self.hooks.on_quota_deleted(quota)
        self.index.on_quota_deleted(quota)

    def on_profile_event(self, event: WatchEvent[ElasticQuotaProfile]) -> None:
        event.dispatch(self.index.replace_profiles, self.index.on_profile, self.index.on_profile_deleted)
        self.writer.changed()
