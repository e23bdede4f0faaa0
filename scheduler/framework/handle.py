"""What plugins may use besides their args: the cluster backend, the current snapshot, the pods
waiting at Permit, and the clock. Plugins never reach the cache or the queue directly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scheduler.backend.base import ClusterBackend, ResourceType, WatchEvent
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.waiting_pods import WaitingPods

__all__ = ["Handle"]


@dataclass
class Handle:
    backend: ClusterBackend
    snapshot: Callable[[], Snapshot]
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    clock: Callable[[], float] = time.monotonic
    scheduler_name: str = "koord-scheduler"
    activate: Callable[[set[str]], None] = lambda uids: None
    """Move these pending pods into the active queue now (a gang became complete)."""
    subscriptions: dict[ResourceType[Any], list[Callable[[WatchEvent[Any]], None]]] = field(
        default_factory=dict
    )
    feasible_rows: Callable[[PodInfo, Snapshot], IntArray] | None = None
    """Rows every PreFilter and Filter of the profile accept for a pod (set by the Framework), for
    plugins that place several pods at once (gangs)."""
    score_rows: Callable[[PodInfo, Snapshot, IntArray], IntArray] | None = None
    """The profile's weighted Score totals for a pod on some rows (set by the Framework)."""
    observe_solver: Callable[[str, str, float, bool], None] = lambda solver, status, seconds, fallback: None
    """(solver, status, seconds, fell back to greedy) -> metrics."""
    observe_preemption: Callable[[int], None] = lambda victims: None
    """One preemption attempt that chose this many victims (0: none would help) -> metrics."""
    nominate: Callable[[PodInfo, str], bool] = lambda pod, node: False
    """Hold a pending pod's requests on a node while its preemption victims terminate (the cache's
    nominator); False when the node is unknown."""
    clear_nomination: Callable[[str], None] = lambda uid: None
    preemption_extensions: list[Any] = field(default_factory=list)
    """Plugins implementing ``interfaces.PreemptionExtension`` (ElasticQuota's reclaim)."""
    job_of: Callable[[PodInfo], str] = lambda pod: pod.uid
    """The job a pod belongs to (set by Coscheduling: its gang group): nominations of a pod's own
    job never block it."""

    def subscribe(self, resource: ResourceType[Any], callback: Callable[[WatchEvent[Any]], None]) -> None:
        """Receive every watch event of ``resource`` (pods before the queue sees them), as a plugin's
        own informer would in kube-scheduler."""
        self.subscriptions.setdefault(resource, []).append(callback)
