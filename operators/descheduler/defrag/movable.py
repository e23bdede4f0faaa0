"""Which running pods a plan may move for a gang, and how many of each workload."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from apis.core import Pod
from apis.meta import OwnerReference
from operators.descheduler.defrag.args import GangDefragmentationArgs
from operators.descheduler.defrag.room import live

__all__ = ["SYSTEM_CRITICAL_PRIORITY", "controller_of", "movable", "workload_budgets"]

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""system-cluster-critical; system-node-critical is higher."""
_MIRROR = "kubernetes.io/config.mirror"


def controller_of(pod: Pod) -> OwnerReference | None:
    return next((o for o in pod.metadata.owner_references or () if o.controller), None)


def movable(
    pod: Pod, gang_priority: int, args: GangDefragmentationArgs, evictor_filter: Callable[[Pod], bool]
) -> bool:
    """A live pod of lower priority than the gang's, not a DaemonSet's, mirror or system-critical
    one (unless allowed), not bare (unless allowed), that the evictor's filter lets move."""
    if not live(pod):
        return False
    priority = pod.spec.priority or 0
    if priority >= gang_priority:
        return False
    if priority >= SYSTEM_CRITICAL_PRIORITY and not args.evict_system_critical_pods:
        return False
    if _MIRROR in (pod.metadata.annotations or {}):
        return False
    owner = controller_of(pod)
    if owner is None and not args.evict_bare_pods:
        return False
    if owner is not None and owner.kind == "DaemonSet":
        return False
    return evictor_filter(pod)


def _ready(pod: Pod) -> bool:
    if pod.metadata.deletion_timestamp is not None or not pod.spec.node_name:
        return False
    conditions = (pod.status.conditions if pod.status else None) or ()
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def workload_budgets(pods: Sequence[Pod], args: GangDefragmentationArgs) -> dict[str, int]:
    """Per controller uid, how many more of its pods may become unavailable: its maxUnavailable
    (of the pods it has, bound or not) less those not Ready now. ``pods``: every pod seen."""
    replicas: Counter[str] = Counter()
    unavailable: Counter[str] = Counter()
    for pod in pods:
        if not live(pod):
            continue
        owner = controller_of(pod)
        if owner is None:
            continue
        replicas[owner.uid] += 1
        if not _ready(pod):
            unavailable[owner.uid] += 1
    return {uid: max(args.max_unavailable(n) - unavailable[uid], 0) for uid, n in replicas.items()}
