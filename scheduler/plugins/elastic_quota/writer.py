"""Writing the figures back onto the ElasticQuota objects, so that ``kubectl get eq`` shows them.

Koordinator's scheduler writes JSON ResourceList annotations (``runtime``, ``request``,
``child-request``, ``non-preemptible-request``, ``non-preemptible-used``; ``allocated`` and
``guaranteed`` with ElasticQuotaGuaranteeUsage) and ``status.used``;
ElasticQuota has no status subresource, so one JSON merge patch of the main resource carries all of
it. ``FiguresWriter`` runs in a background task: woken by a change, it waits ``interval`` seconds
(so a burst of pod events makes one patch), asks for the current payloads and patches each quota
with the figures that differ from what the object carries. As Koordinator's
``updateElasticQuotaStatusIfChanged``, two lists differ only where they differ with their zero
entries removed, and only the figures that differ are written: a quota whose runtime has always
been zero gets no ``runtime`` annotation, and one whose runtime fell to zero gets the zeros
written. Every ``interval`` it also compares ``version()`` (what the figures depend on, nodes
included: a node joining a profile's tree wakes no quota or pod listener) with the one it last
wrote, as Koordinator's controller re-syncs every second. A failed patch is logged and retried at
the next poll; it never fails a scheduling cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from apis.client.backend import NotFound
from apis.errors import InvalidValue
from apis.extension import quota as quota_ext
from apis.quantity import Quantity
from apis.resources import from_int_units
from scheduler.quota import Figures
from scheduler.quota.tree import Resources

__all__ = ["FiguresWriter", "Payload", "payload_of", "resource_json"]

log = logging.getLogger(__name__)

USED_KEY = "status.used"
"""The payload key of ``status.used`` (the others are annotation keys)."""

ANNOTATIONS = {
    quota_ext.ANNOTATION_RUNTIME: "runtime",
    quota_ext.ANNOTATION_REQUEST: "request",
    quota_ext.ANNOTATION_CHILD_REQUEST: "child_request",
    quota_ext.ANNOTATION_NON_PREEMPTIBLE_REQUEST: "non_preemptible_request",
    quota_ext.ANNOTATION_NON_PREEMPTIBLE_USED: "non_preemptible_used",
}


def _strings(amounts: Resources) -> dict[str, str]:
    return {name: str(from_int_units(name, amount)) for name, amount in sorted(amounts.items())}


def resource_json(amounts: Resources) -> str:
    """A ResourceList as compact JSON with canonical quantities: ``{"cpu":"6","memory":"4Gi"}``."""
    return json.dumps(_strings(amounts), separators=(",", ":"))


def _nonzero(text: str | None) -> dict[str, Quantity] | None:
    """The non-zero entries of a ResourceList's JSON text (None: not a ResourceList)."""
    if not text:
        return {}
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            return None
        amounts = {str(name): Quantity.parse(value) for name, value in raw.items()}
    except (ValueError, TypeError, InvalidValue):
        return None
    return {name: amount for name, amount in amounts.items() if not amount.is_zero()}


def same_figures(observed: str | None, wanted: str) -> bool:
    """Koordinator's ``quotav1.Equals(RemoveZeros(a), RemoveZeros(b))`` on two JSON texts; text that
    is no ResourceList (edited by hand) differs from anything, so it is written over."""
    if observed == wanted:
        return True
    before = _nonzero(observed)
    return before is not None and before == _nonzero(wanted)


@dataclass(frozen=True, slots=True)
class Payload:
    namespace: str
    name: str
    values: Mapping[str, str]
    """Annotation key (or ``status.used``) -> JSON text."""

    def patch(self) -> dict[str, object]:
        annotations = {k: v for k, v in self.values.items() if k != USED_KEY}
        patch: dict[str, object] = {"metadata": {"annotations": annotations}} if annotations else {}
        if USED_KEY in self.values:
            patch["status"] = {"used": json.loads(self.values[USED_KEY])}
        return patch

    def differing(self, observed: Mapping[str, str]) -> Payload:
        """The part of this payload that ``observed`` does not carry yet (``same_figures``)."""
        values = {k: v for k, v in self.values.items() if not same_figures(observed.get(k), v)}
        return Payload(self.namespace, self.name, values)


GUARANTEE_ANNOTATIONS = {
    quota_ext.ANNOTATION_ALLOCATED: "allocated",
    quota_ext.ANNOTATION_GUARANTEED: "guaranteed",
}
"""Written with ElasticQuotaGuaranteeUsage only, as Koordinator computes them only then."""


def payload_of(figures: Figures, namespace: str, *, guarantee: bool = False) -> Payload:
    written = {**ANNOTATIONS, **GUARANTEE_ANNOTATIONS} if guarantee else ANNOTATIONS
    values = {key: resource_json(getattr(figures, attr)) for key, attr in written.items()}
    values[USED_KEY] = resource_json(figures.used)
    return Payload(namespace, figures.name, values)


class FiguresWriter:
    def __init__(
        self,
        patch: Callable[[Payload], Awaitable[None]],
        payloads: Callable[[], list[tuple[Payload, Mapping[str, str]]]],
        *,
        interval: float = 1.0,
        version: Callable[[], object] | None = None,
    ) -> None:
        """``payloads()``: every quota object's current payload with the figures it carries now;
        ``version()``: changes whenever a figure may have (None: only ``changed()`` says so)."""
        self._patch = patch
        self._payloads = payloads
        self._version = version
        self.interval = interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._sent: dict[str, Mapping[str, str]] = {}
        self._written: object = None
        """``version()`` when the last flush wrote everything it had to (None: retry)."""

    def changed(self) -> None:
        """Something a figure depends on changed: write within ``interval`` seconds."""
        self._wake.set()
        if self._task is None or self._task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no event loop (a synchronous test): ``flush`` is called by hand
            self._task = loop.create_task(self._run(), name="ElasticQuota figures writer")

    def _stale(self) -> bool:
        return self._version is not None and (self._written is None or self._version() != self._written)

    async def _run(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that arrives as
            # the event fires, and close() would then wait on this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()
            if not self._wake.is_set() and not self._stale():
                continue
            await asyncio.sleep(self.interval)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:
                log.exception("writing ElasticQuota figures failed")

    async def flush(self) -> int:
        """Patch every quota whose figures differ from what it carries; returns how many were patched."""
        written = 0
        version = self._version() if self._version is not None else None
        failed = False
        for whole, observed in self._payloads():
            payload = whole.differing(observed)
            sent = self._sent.get(payload.name)
            if sent is not None and all(observed.get(k) == v for k, v in sent.items()):
                del self._sent[payload.name]  # the watch has caught up with our last patch
                sent = None
            if not payload.values or (
                sent is not None and all(sent.get(k) == v for k, v in payload.values.items())
            ):
                continue
            try:
                await self._patch(payload)
            except NotFound:
                continue
            except Exception as exc:
                log.warning("patching ElasticQuota %s/%s failed: %s", payload.namespace, payload.name, exc)
                failed = True
                continue
            self._sent[payload.name] = payload.values
            written += 1
        self._written = None if failed else version
        return written

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
