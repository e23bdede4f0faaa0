"""How many pods like one a node holds by NUMA node and CPU (``extensions.MemberRoom``): counted
greedily where the shape allows (room.py), else by placing trial members one after another on a
copy of the node's ledger."""

from __future__ import annotations

from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Status
from scheduler.plugins.node_numa_resource.cycle import Cycle
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.placement import Placer
from scheduler.plugins.node_numa_resource.room import greedy_room, trial_room

__all__ = ["room_on"]

_TRIAL_UID = "NodeNUMAResource/room/"
"""The ledger key of a trial member (no pod uid looks like it)."""


def room_on(
    placer: Placer,
    state: CycleState,
    pod: PodInfo,
    cycle: Cycle,
    snapshot: Snapshot,
    node: str,
    gone: frozenset[str],
    limit: int,
) -> int | None:
    """The pods like ``pod`` ``node`` holds (up to ``limit``), ``gone`` counted as free; None: the
    plugin does not limit the pod there."""
    info = snapshot.node(node)
    labels = info.labels if info is not None else {}
    resolved = placer.resolve(cycle, node, labels)
    if isinstance(resolved, Status):
        return 0
    merged, bind = resolved
    if not merged and not bind.bind:
        return None
    options = placer.options(node, snapshot)
    if options is None:
        return 0
    store = placer.store
    ledger = store.ledger_without(node, gone) if gone else store.ledger(node)
    request = placer.request(cycle, bind, labels)
    exclusive_required = cycle.cpu.exclusive == "Required"
    count = greedy_room(options, ledger, request, merged, exclusive_required, limit)
    if count is not None:
        return count

    def trial(scratch: NodeCPUAllocation) -> bool:
        got = placer.place(state, pod, cycle, node, labels, scratch=scratch)
        if isinstance(got, Status) or got.allocation is None:
            return False
        held = got.allocation
        uid = f"{_TRIAL_UID}{len(scratch.pods())}"
        scratch.add(uid, held.cpus, held.numa_resources, cycle.cpu.exclusive_policy)
        return True

    return trial_room(trial, store.ledger_copy(node, gone), limit)
