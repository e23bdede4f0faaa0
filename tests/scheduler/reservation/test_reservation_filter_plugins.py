"""Other plugins judge a pod against one reservation (``interfaces.ReservationFilterPlugin``): the
Reservation plugin asks them before letting the pod allocate from it."""

from __future__ import annotations

import asyncio

from apis.client.backend import NODES, PODS, RESERVATIONS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.config import load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import ReservationView
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import PreFilterResult
from scheduler.framework.registry import PluginSpec, Registry
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.reservation.harness import bound, node, placed, pod, reservation, stop_app, until

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter:
      enabled: [{name: NoSpareCards}]
"""


class NoSpareCards:
    """Refuses reservations labelled ``cards: none`` (as a device plugin refuses one whose own
    devices cannot hold the pod)."""

    name = "NoSpareCards"

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        return PreFilterResult()

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: ReservationView) -> Status:
        if reservation.labels.get("cards") == "none":
            return Status.unschedulable("no spare card in this reservation")
        return Status.success()


def new(args: None, handle: Handle) -> NoSpareCards:
    return NoSpareCards()


async def test_a_reservation_another_plugin_refuses_is_not_used_and_the_pod_is_told_why() -> None:
    registry = Registry([*DEFAULT_REGISTRY.specs(), PluginSpec("NoSpareCards", new)])
    config = load_config(CONFIG, DEFAULT_PLUGINS, registry.implements)
    settings = AppSettings(profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01)
    backend = MemoryBackend()
    backend.apply(NODES, node("n1", cpu="8"))
    backend.apply(NODES, node("n2", cpu="8"))
    app = SchedulerApp(settings, backend, registry, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        backend.apply(RESERVATIONS, reservation("empty", cpu="4", node_name="n1", labels={"cards": "none"}))
        backend.apply(RESERVATIONS, reservation("full", cpu="4", node_name="n2"))
        await until(lambda: placed(backend, "empty") == "n1" and placed(backend, "full") == "n2")
        backend.apply(PODS, pod("job-0", cpu="4", labels={"app": "empty"}))
        await until(lambda: "job-0" in bound(backend))
        explanation = app.explanations.get("default", "job-0")
        assert explanation is not None
        assert "reservation empty on n1: NoSpareCards: no spare card in this reservation" in explanation.notes
        assert not any(note.startswith("allocated from reservation empty") for note in explanation.notes)
    finally:
        await stop_app(stop, task)
