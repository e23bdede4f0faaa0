"""Pod events: each pod's charge in the ledger (a reserve pod is charged by the reservation watch
instead), the quota hooks told of pods on nodes, and the revoke controller started once the
scheduler's event loop runs."""

from __future__ import annotations

from collections.abc import Callable

from apis.client.backend import EventType, WatchEvent
from apis.core import Pod
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota.hooks import Hooks
from scheduler.plugins.elastic_quota.ledger import Charge, Ledger
from scheduler.plugins.elastic_quota.writer import FiguresWriter

__all__ = ["PodHandler"]


class PodHandler:
    def __init__(
        self,
        ledger: Ledger,
        hooks: Hooks,
        writer: FiguresWriter,
        quota_name: Callable[[PodInfo], str],
        on_any: Callable[[], None],
    ) -> None:
        self.ledger = ledger
        self.hooks = hooks
        self.writer = writer
        self._quota_name = quota_name
        self._on_any = on_any
        """Called first on every event (starts the revoke controller)."""

    def on_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:
            # A page of the first list, charged as its REPLACED would; the revoke controller and
            # the figures' writer start with that REPLACED, as without pages.
            self._charge([PodInfo.of(p) for p in event.objects])
            return
        self._on_any()
        if event.type is EventType.REPLACED:
            self._replace([PodInfo.of(p) for p in event.objects], event.told)
        elif event.obj is not None:
            if is_reserve_pod(event.obj.metadata.annotations):
                return  # a reservation's stand-in: charged by the reservation watch
            info = PodInfo.of(event.obj)
            old = self.ledger.charge(info.uid)
            if event.type is EventType.DELETED:
                self.ledger.remove(info.uid)
            else:
                self.ledger.on_pod(info, self._quota_name(info))
            self._pod_hooks(old, self.ledger.charge(info.uid))
        self.writer.changed()

    def _replace(self, infos: list[PodInfo], told: int) -> None:
        """The relisted pods; the first ``told`` were charged already (LISTED pages)."""
        present = {p.uid for p in infos}
        for uid in self.ledger.uids():
            charge = self.ledger.charge(uid)
            if charge is None or is_reserve_pod(charge.pod.annotations):
                continue  # a reservation's charge: kept by the reservation watch
            if uid not in present and not charge.reserved:
                self.ledger.remove(uid)
                self._pod_hooks(charge, None)
        self._charge(infos[told:] if told else infos)

    def _charge(self, infos: list[PodInfo]) -> None:
        for info in infos:
            old = self.ledger.charge(info.uid)
            self.ledger.on_pod(info, self._quota_name(info))
            self._pod_hooks(old, self.ledger.charge(info.uid))

    def _pod_hooks(self, old: Charge | None, new: Charge | None) -> None:
        """The pod-update hook, for a pod on a node before or after (as Koordinator's, which
        follows the quotas' used)."""
        if not self.hooks.hooks:
            return
        before = old.pod if old is not None and old.assigned else None
        after = new.pod if new is not None and new.assigned else None
        if before is not None or after is not None:
            quota = new.quota if new is not None and after is not None else old.quota if old else ""
            self.hooks.on_pod_updated(quota, before, after)
