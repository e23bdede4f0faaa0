"""koord-manager's resync timers (and the reservation daemon) put no finalizer on their objects and
stop when the object is gone.

These tests reach into Kopf's registry on purpose: they pin the Kopf behaviour that
``operators.handlers.timers`` relies on, so an upgrade that changes it fails here, not in a cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import bodies, patches, references
from kopf._core.engines.indexing import OperatorIndexers
from kopf._core.intents import causes
from kopf._core.intents.handlers import TimerHandler
from kopf._core.intents.registries import OperatorRegistry

from operators.__main__ import build_registry, parse_args
from operators.handlers import timers

# (group, version, plural, body of an object each timer runs on)
OBJECTS = {
    "podgroup_status": (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "podgroups",
        {"name": "pg", "namespace": "default"},
    ),
    "networktopology_detail_status": (
        "scheduling.koordinator.sh",
        "v1alpha1",
        "clusternetworktopologies",
        {"name": "default"},
    ),
    "root_quota_total": (
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "elasticquotas",
        {"name": "koordinator-root-quota", "namespace": "koordinator-system"},
    ),
    "elasticquotaprofile_tree_root": (
        "quota.koordinator.sh",
        "v1alpha1",
        "elasticquotaprofiles",
        {"name": "p", "namespace": "team"},
    ),
    "builtin_quotas_namespace": ("", "v1", "namespaces", {"name": "koordinator-system"}),
    "reservation_lifecycle": ("scheduling.koordinator.sh", "v1alpha1", "reservations", {"name": "r"}),
}


def spawning_cause(timer_id: str, memo: Any) -> causes.SpawningCause:
    group, version, plural, metadata = OBJECTS[timer_id]
    body = bodies.Body({"metadata": {"uid": "u1", **metadata}, "spec": {}})
    return causes.SpawningCause(
        logger=logging.getLogger("test"),
        indices=OperatorIndexers().indices,
        memo=memo,
        resource=references.Resource(group=group, version=version, plural=plural),
        patch=patches.Patch(),
        body=body,
        reset=False,
    )


@pytest.fixture
def registry() -> OperatorRegistry:
    return build_registry(parse_args(["--standalone"]))


def test_every_timer_is_registered_without_a_finalizer(registry: OperatorRegistry) -> None:
    spawning = registry._spawning.get_all_handlers()
    assert {h.id for h in spawning} == set(OBJECTS)
    assert all(h.requires_finalizer is False for h in spawning)


def test_every_timer_daemon_and_event_handler_runs_on_the_event_loop(registry: OperatorRegistry) -> None:
    """Kopf runs a plain function in a thread pool: one that iterates an index while the loop
    deletes a node from it fails with "dictionary changed size during iteration", and the timer
    then waits out its backoff. Only coroutines run on the loop, between the index's updates."""
    handlers = [*registry._spawning.get_all_handlers(), *registry._watching.get_all_handlers()]
    threaded = [h.id for h in handlers if not inspect.iscoroutinefunction(getattr(h.fn, "__func__", h.fn))]
    assert handlers
    assert threaded == []


def test_a_failed_tick_is_retried_after_one_interval(registry: OperatorRegistry) -> None:
    timers_ = [h for h in registry._spawning.get_all_handlers() if isinstance(h, TimerHandler)]
    assert timers_
    assert all(h.backoff == h.interval for h in timers_), [(h.id, h.backoff, h.interval) for h in timers_]


@pytest.mark.parametrize("timer_id", sorted(OBJECTS))
def test_no_finalizer_is_required_and_the_timer_runs_while_the_object_exists(
    registry: OperatorRegistry, timer_id: str
) -> None:
    cause = spawning_cause(timer_id, kopf.Memo())
    assert not registry._spawning.requires_finalizer(cause=cause)
    assert timer_id in {h.id for h in registry._spawning.get_handlers(cause=cause)}


@pytest.mark.parametrize("timer_id", sorted(OBJECTS))
def test_the_deleted_event_stops_the_timer(registry: OperatorRegistry, timer_id: str) -> None:
    memo = kopf.Memo()
    (gone,) = [h for h in registry._watching.get_all_handlers() if h.id == f"{timer_id}.gone"]
    asyncio.run(gone.fn(type="MODIFIED", memo=memo))  # type: ignore[call-arg]
    assert timer_id in {h.id for h in registry._spawning.get_handlers(cause=spawning_cause(timer_id, memo))}
    asyncio.run(gone.fn(type="DELETED", memo=memo))  # type: ignore[call-arg]
    assert timer_id not in {
        h.id for h in registry._spawning.get_handlers(cause=spawning_cause(timer_id, memo))
    }


def test_a_plain_kopf_timer_would_require_a_finalizer() -> None:
    """The reason for ``timers.resync_timer``: Kopf marks every timer as needing a finalizer."""
    registry = kopf.OperatorRegistry()
    kopf.timer("scheduling.sigs.k8s.io", "v1alpha1", "podgroups", id="t", interval=1, registry=registry)(
        lambda **_: None
    )
    plain = spawning_cause("podgroup_status", kopf.Memo())
    assert registry._spawning.requires_finalizer(cause=plain)
    other = kopf.OperatorRegistry()
    timers.resync_timer(
        "scheduling.sigs.k8s.io", "v1alpha1", "podgroups", id="t", interval=1, registry=other
    )(lambda **_: None)
    assert not other._spawning.requires_finalizer(cause=plain)


def test_a_plain_kopf_daemon_would_require_a_finalizer() -> None:
    """The reason for ``timers.daemon``: Kopf marks every daemon as needing a finalizer too."""
    registry = kopf.OperatorRegistry()
    kopf.daemon("scheduling.koordinator.sh", "v1alpha1", "reservations", id="d", registry=registry)(
        lambda **_: None
    )
    plain = spawning_cause("reservation_lifecycle", kopf.Memo())
    assert registry._spawning.requires_finalizer(cause=plain)
    other = kopf.OperatorRegistry()
    timers.daemon("scheduling.koordinator.sh", "v1alpha1", "reservations", id="d", registry=other)(
        lambda **_: None
    )
    assert not other._spawning.requires_finalizer(cause=plain)
