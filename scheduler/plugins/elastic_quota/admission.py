"""What PreFilter admits at once: a pod's whole job charged to its quota."""

from __future__ import annotations

from apis.extension import gang as gang_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.handle import Handle
from scheduler.plugins.elastic_quota.ledger import Ledger, gang_key

__all__ = ["admitted_with"]


def admitted_with(handle: Handle, ledger: Ledger, pod: PodInfo, quota: str) -> list[PodInfo]:
    """The pods admitted together with ``pod``: the pending members of its job (its gang, or
    every gang of its gang group, as the profile's ``JobResolver`` names them) charged to its
    quota, or itself."""
    gang = gang_key(pod)
    if gang is None:
        return [pod]
    job = handle.profile.job_of(pod)
    gangs = gang_ext.gang_group_members(job) if job != pod.uid else [gang]
    members = [m for g in gangs for m in ledger.pending_gang_members(quota, g)]
    if all(m.uid != pod.uid for m in members):
        members.append(pod)
    return members
