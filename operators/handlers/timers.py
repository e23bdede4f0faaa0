"""Resync timers (and daemons) that put no finalizer on the objects they watch.

Every timer of koord-manager recomputes something from indexes (a status, a total) and has nothing
to do when its object is deleted. Kopf, however, marks each timer ``requires_finalizer=True`` (so
it can stop the timer before the object goes) and offers no option against it: deleting a PodGroup
would then wait for a running koord-manager, forever if none runs.

``resync_timer`` registers a plain ``kopf.timer`` and then clears that flag on the registered
handler (a frozen dataclass in Kopf's registry; ``tests/operators/test_timers.py`` pins the
behaviour, so a Kopf upgrade that moves it fails loudly). Without the finalizer Kopf sees the
deletion only as the watch's DELETED event and would keep the timer of the vanished object
running; a companion ``on.event`` handler marks the object's memo as gone on that event, and the
timer's ``when`` filter, re-checked by Kopf on the same event, then stops the timer.
Kopf removes its finalizer from objects that still carry it from an earlier version.

A failed tick is retried after one ``interval`` too (Kopf's default backoff is a minute, long
enough for a status to lag a relabelled node far behind).

Every timer and event handler here is a coroutine, never a plain function: Kopf runs plain
functions in a thread pool, where iterating an index the event loop is updating (a node deleted
mid-iteration) raises "dictionary changed size during iteration", and setting an asyncio.Event
is not thread-safe. ``tests/operators/test_timers.py`` checks every registered one.

``daemon`` does the same for a ``kopf.daemon``: one long-running task per object, for work that
sleeps until a deadline of the object's own (a Reservation's expiry) rather than ticking.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import kopf

__all__ = ["GONE", "daemon", "resync_timer"]

GONE = "koordinator-py.gone"
"""Per-object memo key set on the object's DELETED watch event."""

WhenFn = Callable[..., bool]


async def _mark_gone(type: str | None, memo: Any, **_: Any) -> None:
    if type == "DELETED":
        memo[GONE] = True


def _present(when: WhenFn | None) -> WhenFn:
    def present(memo: Any, **kwargs: Any) -> bool:
        if memo.get(GONE):
            return False
        return when is None or when(memo=memo, **kwargs)

    return present


def resync_timer(
    group: str,
    version: str,
    plural: str,
    *,
    id: str,
    interval: float,
    registry: kopf.OperatorRegistry,
    when: WhenFn | None = None,
) -> Callable[[Any], Any]:
    """Like ``kopf.timer(group, version, plural, id=, interval=, when=, registry=)``, but the
    timer needs no finalizer and stops when its object is deleted."""

    def decorator(fn: Any) -> Any:
        kopf.on.event(group, version, plural, id=f"{id}.gone", registry=registry)(_mark_gone)
        kopf.timer(
            group,
            version,
            plural,
            id=id,
            interval=interval,
            backoff=interval,
            when=_present(when),
            registry=registry,
        )(fn)
        _without_finalizer(registry, id)
        return fn

    return decorator


def daemon(
    group: str,
    version: str,
    plural: str,
    *,
    id: str,
    registry: kopf.OperatorRegistry,
    cancellation_timeout: float = 1.0,
) -> Callable[[Any], Any]:
    """Like ``kopf.daemon(group, version, plural, id=, registry=)``, but the daemon needs no
    finalizer and is stopped (``stopped`` set, then cancelled after ``cancellation_timeout``
    seconds) when its object is deleted."""

    def decorator(fn: Any) -> Any:
        kopf.on.event(group, version, plural, id=f"{id}.gone", registry=registry)(_mark_gone)
        kopf.daemon(
            group,
            version,
            plural,
            id=id,
            when=_present(None),
            cancellation_timeout=cancellation_timeout,
            registry=registry,
        )(fn)
        _without_finalizer(registry, id)
        return fn

    return decorator


def _without_finalizer(registry: kopf.OperatorRegistry, id: str) -> None:
    spawning = registry._spawning
    spawning._handlers = [
        dataclasses.replace(h, requires_finalizer=False) if h.id == id else h for h in spawning._handlers
    ]
