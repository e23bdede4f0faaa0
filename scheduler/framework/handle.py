"""What plugins may use besides their args: the cluster backend, the current snapshot, the pods
waiting at Permit, and the clock. Plugins never reach the cache or the queue directly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.backend.base import ClusterBackend
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
