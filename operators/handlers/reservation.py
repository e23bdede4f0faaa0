"""Reservation lifecycle: owners and allocated, expiry, garbage collection, and the bound-spec rule.

koord-scheduler places a Pending reservation (status Available, ``nodeName``, ``allocatable``) and
writes ``scheduling.koordinator.sh/reservation-allocated`` on the owner pods it binds into it;
koord-manager keeps the rest of the status true (``operators.logic.reservation_status``).

- Kopf indexes the pods carrying that annotation by the reservation uid it names, and the nodes by
  name (one watch each, shared with the other operators).
- One daemon per reservation recomputes the status whenever something it depends on changes and
  otherwise sleeps until its next deadline: the expiry while it is active, the garbage-collection
  time once it finished. Watch events wake it (``Wakeups``): its own, an annotated pod's (the
  annotation names the reservation), a node's deletion. Nothing ticks per object.
- The status is written with a PUT of the whole object to the status subresource, so a write
  based on a stale read (the scheduler wrote meanwhile) fails with a conflict instead of undoing
  it; the watch event of the other write wakes the daemon to judge again. It writes only on change.
- A validating webhook refuses changes of ``spec.template`` and ``spec.owners`` once the
  reservation is bound (``operators.logic.reservation_admission.validate_update``); the other
  rules run in the generic webhook of every kind (``operators.handlers.admission``).

The daemon puts no finalizer on reservations (``operators.handlers.timers.daemon``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
from kubernetes_asyncio import client as k8s
from pydantic import ValidationError

from apis.core import Pod
from apis.errors import InvalidAnnotation, echo, summary
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED, get_reservation_allocated
from apis.scheduling.reservation import Reservation, ReservationStatus
from operators.clients import ReservationClient
from operators.config import ManagerConfig
from operators.handlers import errors, timers
from operators.handlers.admission import plain
from operators.logic import reservation_admission, reservation_status
from operators.logic.reservation_status import OwnerPod

__all__ = ["Wakeups", "register"]

OwnerIndex = kopf.Index[str, OwnerPod]
NodeIndex = kopf.Index[str, bool]
_R = Reservation.crd
_OWNED_STATUS_FIELDS = ("phase", "conditions", "currentOwners", "allocated")
"""The status fields koord-manager writes; the scheduler's (nodeName, allocatable) pass through."""
_PROBLEM = "reservation_problem"
_LATE = 0.05
"""Seconds added to a deadline's sleep, so the daemon wakes just after it rather than just before."""


class Wakeups:
    """One event per running daemon, by reservation uid: set to make the daemon look again."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def event(self, uid: str) -> asyncio.Event:
        return self._events.setdefault(uid, asyncio.Event())

    def wake(self, uid: str) -> None:
        event = self._events.get(uid)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        for event in self._events.values():
            event.set()

    def forget(self, uid: str) -> None:
        self._events.pop(uid, None)


def reservation_owners(body: kopf.Body, **_: Any) -> dict[str, OwnerPod]:
    """Index: reservation uid -> the pods allocated to it (by their annotation)."""
    owner = OwnerPod.from_pod(Pod.model_validate(plain(body)))
    return {owner.reservation_uid: owner} if owner is not None else {}


def reservation_nodes(name: str, **_: Any) -> dict[str, bool]:
    """Index: node name -> True, for "is the reservation's node still there"."""
    return {name: True}


def status_body(body: dict[str, Any], status: ReservationStatus) -> dict[str, Any]:
    """``body`` with the fields koord-manager owns replaced by ``status``'s (absent when None)."""
    owned = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    merged = dict(body.get("status") or {})
    for key in _OWNED_STATUS_FIELDS:
        value = owned.get(key)
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return {**body, "status": merged}


async def _sleep(wake: asyncio.Event, stopped: kopf.DaemonStopped, seconds: float | None) -> None:
    """Until woken, stopped, or ``seconds`` passed (None: no time limit)."""
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class Lifecycle:
    """The per-reservation daemon and its event handlers, sharing the wake-ups and the client."""

    def __init__(self, config: ManagerConfig, client: ReservationClient, wakeups: Wakeups) -> None:
        self._retention = timedelta(seconds=config.reservation_gc_duration_seconds)
        self._client = client
        self._wakeups = wakeups

    async def on_reservation_event(self, uid: str | None, **_: Any) -> None:
        if uid:
            self._wakeups.wake(uid)

    async def on_owner_event(self, annotations: kopf.Annotations, **_: Any) -> None:
        try:
            allocated = get_reservation_allocated(annotations)
        except InvalidAnnotation:
            return
        if allocated is not None and allocated.uid:
            self._wakeups.wake(allocated.uid)

    async def on_node_event(self, type: str | None, **_: Any) -> None:
        if type == "DELETED":
            self._wakeups.wake_all()  # rare; each daemon checks its own node

    async def run(
        self,
        body: kopf.Body,
        stopped: kopf.DaemonStopped,
        memo: Any,
        logger: kopf.Logger,
        reservation_owners: OwnerIndex,
        reservation_nodes: NodeIndex,
        **_: Any,
    ) -> None:
        uid = str(body.metadata.uid)
        wake = self._wakeups.event(uid)
        written: str | None = None  # the resourceVersion our last write was based on
        try:
            while not stopped:
                wake.clear()  # before reading the body: an event from now on wakes the next sleep
                delay, written = await self._step(
                    body, memo, logger, reservation_owners, reservation_nodes, written
                )
                await _sleep(wake, stopped, delay)
        finally:
            self._wakeups.forget(uid)

    async def _step(
        self,
        body: kopf.Body,
        memo: Any,
        logger: kopf.Logger,
        owners: OwnerIndex,
        nodes: NodeIndex,
        written: str | None,
    ) -> tuple[float | None, str | None]:
        """One look at the reservation: (seconds until the next deadline, the write marker)."""
        raw: dict[str, Any] = plain(body)
        try:
            reservation = Reservation.model_validate(raw)
        except ValidationError as exc:
            problem = str(errors.invalid_object("Reservation", exc))
            if memo.get(_PROBLEM) != problem:
                memo[_PROBLEM] = problem
                kopf.warn(body, reason="Invalid", message=problem)
            return None, written
        memo.pop(_PROBLEM, None)
        uid = reservation.metadata.uid or ""
        node = reservation.status.node_name if reservation.status is not None else None
        now = datetime.now(UTC)
        plan = reservation_status.plan(
            reservation,
            list(owners.get(uid, [])),
            node_exists=bool(node) and node in nodes,
            now=now,
            retention=self._retention,
        )
        try:
            if plan.delete:
                await self._client.delete(reservation.metadata.name or "", uid)
                logger.info(f"deleted: finished more than {self._retention} ago")
                return None, written  # its DELETED event stops this daemon
            version = reservation.metadata.resource_version
            if plan.status is not None and version != written:
                await self._client.replace_status(status_body(raw, plan.status))
                logger.info(f"status: phase {plan.status.phase}")
                written = version  # the write's own watch event wakes the next look
        except errors.API_ERRORS as exc:
            if isinstance(exc, k8s.ApiException) and exc.status == 409:
                return None, written  # someone wrote first; their event wakes the next look
            logger.warning(f"cannot update the reservation yet ({exc!r}); retrying")
            return errors.RETRY_DELAY_SECONDS, written
        if plan.wake_at is None:
            return None, written
        return max(0.0, (plan.wake_at - now).total_seconds()) + _LATE, written

    async def validate_update(self, body: kopf.Body, old: kopf.Body | None, **_: Any) -> None:
        if old is None:
            return
        with contextlib.suppress(ValidationError):  # the generic webhook reports what does not parse
            new_reservation = Reservation.model_validate(plain(body))
            old_reservation = Reservation.model_validate(plain(old))
            problems = reservation_admission.validate_update(new_reservation, old_reservation)
            if problems:
                name = new_reservation.metadata.name or ""
                raise kopf.AdmissionError(
                    f"Reservation {echo(name)} is invalid: {summary(problems)}", code=422
                )


def register(registry: kopf.OperatorRegistry, config: ManagerConfig, client: ReservationClient) -> None:
    """Index owner pods and nodes; run one lifecycle daemon per reservation; validate bound updates."""
    lifecycle = Lifecycle(config, client, Wakeups())
    owner_filter = {ANNOTATION_RESERVATION_ALLOCATED: kopf.PRESENT}
    kopf.index("", "v1", "pods", id="reservation_owners", annotations=owner_filter, registry=registry)(
        reservation_owners
    )
    kopf.index("", "v1", "nodes", id="reservation_nodes", registry=registry)(reservation_nodes)
    kopf.on.event(
        "", "v1", "pods", id="reservation_owner_events", annotations=owner_filter, registry=registry
    )(lifecycle.on_owner_event)
    kopf.on.event("", "v1", "nodes", id="reservation_node_events", registry=registry)(lifecycle.on_node_event)
    kopf.on.event(_R.group, _R.version, _R.plural, id="reservation_events", registry=registry)(
        lifecycle.on_reservation_event
    )
    run: Any = lifecycle.run  # Kopf's DaemonFn protocol does not list index kwargs
    timers.daemon(_R.group, _R.version, _R.plural, id="reservation_lifecycle", registry=registry)(run)
    validate: Any = lifecycle.validate_update
    kopf.on.validate(
        _R.group,
        _R.version,
        _R.plural,
        id="validate-reservation-binding",
        operations=["UPDATE"],
        registry=registry,
    )(validate)
