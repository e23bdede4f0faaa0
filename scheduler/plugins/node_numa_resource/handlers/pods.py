"""Pod events: the CPUs and NUMA amounts a bound pod holds, read back from its ``resource-status``
so that a restart rebuilds the ledger; a pod that ends gives them back."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from apis.client.backend import EventType, ObjectRef, WatchEvent, each
from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS, get_resource_spec
from scheduler.plugins.node_numa_resource.resource_status import held
from scheduler.plugins.node_numa_resource.store import NUMAStore, Record
from scheduler.plugins.node_numa_resource.warning_events import WarningEvents

__all__ = ["PodHandler"]

log = logging.getLogger(__name__)


class PodHandler:
    def __init__(self, store: NUMAStore, events: WarningEvents) -> None:
        self.store = store
        self._events = events
        self._reported: dict[str, str] = {}
        """Pod uid -> the resource-status problem last reported on it."""

    def on_event(self, event: WatchEvent[Pod]) -> None:
        if event.type is EventType.LISTED:  # a page of the first list; its REPLACED skips it
            each(event.objects, self.upsert)
            return
        event.dispatch(lambda pods: self.replace(pods, untold=event.untold), self.upsert, self.delete)

    def replace(
        self,
        pods: Sequence[Pod],
        upsert: Callable[[Pod], None] | None = None,
        *,
        untold: Sequence[Pod] | None = None,
    ) -> None:
        """The relisted pods; ``upsert``: what handles each (``upsert`` unless told); ``untold``:
        those not handled yet (all unless told: the others came in LISTED pages)."""
        present = {pod.metadata.uid or "" for pod in pods}
        for uid, record in list(self.store.records.items()):
            if uid not in present and not record.assumed and not record.reservation:
                self.store.release(uid)
        each(pods if untold is None else untold, upsert or self.upsert)

    def delete(self, pod: Pod) -> None:
        self.store.release(pod.metadata.uid or "")
        self._reported.pop(pod.metadata.uid or "", None)

    def upsert(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self.store.release(uid)
            return
        node = pod.spec.node_name
        if not node:
            return  # not bound: only Reserve (an assumed pod) holds for it
        annotations = pod.metadata.annotations or {}
        if ANNOTATION_RESOURCE_STATUS not in annotations:
            return  # bound without a record (or the Binding's annotations not seen yet)
        try:
            cpus, numa = held(annotations)
            exclusive = get_resource_spec(annotations).preferred_cpu_exclusive_policy or "None"
        except (InvalidAnnotation, ValueError) as exc:
            # Nothing is held for it: say so on the pod, once per problem.
            message = f"{ANNOTATION_RESOURCE_STATUS} not counted: {exc}"
            if self._reported.get(uid) != message:
                self._reported[uid] = message
                log.warning("pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, message)
                regarding = ObjectRef(
                    kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name or "", uid=uid
                )
                self._events.warn(regarding, message)
            return
        self.store.hold(uid, Record(node, cpus, numa, exclusive, assumed=False))
