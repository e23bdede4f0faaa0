"""Which gangs wait for room: PodGroups whose members all exist, too few of them are bound, and
every pending one is unschedulable (PodScheduled=False); and since when.

koord-scheduler writes the condition again (with a new lastTransitionTime) when its message
changes or a minute has passed, so the time a condition shows moves forward while the gang
waits: the caller keeps the earliest time seen per gang and passes it back each round."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.gang import LABEL_POD_GROUP
from apis.extension.networktopology import NetworkTopologySpec, get_network_topology_spec
from apis.podkey import namespaced_key
from apis.scheduling.podgroup import PodGroup
from operators.descheduler.defrag.room import live

__all__ = ["WaitingGang", "blocked_gangs", "gang_key", "members_by_gang", "unschedulable_since"]


@dataclass(frozen=True, slots=True)
class WaitingGang:
    pod_group: PodGroup
    key: str
    """``namespace/name``."""
    pending: tuple[Pod, ...]
    """The members to place (every pending one), by name."""
    priority: int
    """The highest priority of its pending members."""
    since: datetime
    """When the last of them became unschedulable (the earliest time seen for the gang)."""
    topology_spec: NetworkTopologySpec | None

    def waited(self, now: datetime, threshold: timedelta) -> bool:
        return now - self.since >= threshold


def gang_key(pod_group: PodGroup) -> str:
    return namespaced_key(pod_group.metadata.namespace, pod_group.metadata.name)


def members_by_gang(pods: Sequence[Pod]) -> dict[str, list[Pod]]:
    """Pods by the ``namespace/name`` of the PodGroup their label names."""
    result: dict[str, list[Pod]] = {}
    for pod in pods:
        group = (pod.metadata.labels or {}).get(LABEL_POD_GROUP)
        if group:
            result.setdefault(f"{pod.metadata.namespace or 'default'}/{group}", []).append(pod)
    return result


def unschedulable_since(pod: Pod) -> datetime | None:
    """When the scheduler last found no place for the pod (its PodScheduled=False condition)."""
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == "PodScheduled" and condition.status == "False":
            return condition.last_transition_time
    return None


def blocked_gangs(
    pod_groups: Sequence[PodGroup],
    pending: Mapping[str, Sequence[Pod]],
    bound: Mapping[str, int],
    earliest: Mapping[str, datetime],
) -> list[WaitingGang]:
    """``pending``: unbound member pods by gang key; ``bound``: bound live members by gang key;
    ``earliest``: the ``since`` of each gang found blocked in the previous round."""
    result: list[WaitingGang] = []
    for pg in sorted(pod_groups, key=gang_key):
        key = gang_key(pg)
        min_member = (pg.spec.min_member or 0) if pg.spec else 0
        members = sorted((p for p in pending.get(key, ()) if live(p)), key=lambda p: p.metadata.name or "")
        have = bound.get(key, 0)
        if min_member <= 0 or have >= min_member or not members or have + len(members) < min_member:
            continue  # satisfied, or still waiting for its pods to be created: not for room
        times = [unschedulable_since(p) for p in members]
        if any(t is None for t in times):
            continue
        since = max(t for t in times if t is not None)
        if key in earliest:
            since = min(since, earliest[key])
        try:
            spec = get_network_topology_spec(pg.metadata.annotations)
        except InvalidAnnotation:
            continue  # the scheduler reports it; nothing to free for a gang it refuses
        priority = max(p.spec.priority or 0 for p in members)
        result.append(WaitingGang(pg, key, tuple(members), priority, since, spec))
    return result
