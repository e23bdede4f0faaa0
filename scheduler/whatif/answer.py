"""The what-if answer: every part machine-readable (``koordctl whatif -o json|yaml``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AfterPreemption",
    "Blocker",
    "BlockerKind",
    "Change",
    "ChangeKind",
    "FitsNow",
    "Largest",
    "MemberPlacement",
    "Victim",
    "WhatIfAnswer",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemberPlacement(_Model):
    pod: str
    """``namespace/name``."""
    node: str
    domain: dict[str, str] = Field(default_factory=dict)
    """Topology layer -> the member's domain there (a gang with a network-topology-spec)."""


BlockerKind = Literal["quota", "filter", "topology", "capacity", "policy", "unknown"]


class Blocker(_Model):
    kind: BlockerKind
    message: str
    reasons: dict[str, int] = Field(default_factory=dict)
    """Filter rejection reason -> nodes it rejected (the first member class that fits nowhere)."""


class FitsNow(_Model):
    fits: bool
    placements: list[MemberPlacement] = Field(default_factory=list)
    quota: str | None = None
    quota_fits: bool | None = None
    """None: no quota plugin, or the job charges no quota."""
    message: str = ""


class Victim(_Model):
    pod: str
    node: str
    priority: int
    job: str
    quota: str | None = None


class AfterPreemption(_Model):
    enabled: bool
    """Preemption can act for the job: job-level preemption is enabled in the profile
    (``Coscheduling.enablePreemption``), or the job is one pod of no gang and the profile runs
    pod-level preemption (DefaultPreemption) at PostFilter."""
    fits: bool
    victims: list[Victim] = Field(default_factory=list)
    jobs: list[str] = Field(default_factory=list)
    """The victims' jobs (a gang group is one job)."""
    placements: list[MemberPlacement] = Field(default_factory=list)
    message: str = ""


class Largest(_Model):
    members_now: int
    """The most members (in rank order) that fit now; 0: not even one."""
    members_with_preemption: int | None = None
    """None: preemption not asked (disabled, or the whole job fits now)."""
    gpu_resource: str | None = None
    gpu_per_pod_now: int | None = None
    """The largest per-pod amount of ``gpu_resource`` with which every member fits now."""
    gpu_per_pod_with_preemption: int | None = None
    """The same once job-level preemption evicts (None: not asked: preemption is off, or the job
    fits with preemption as it is)."""


ChangeKind = Literal["members", "topology", "quota", "gpu", "toleration"]


class Change(_Model):
    kind: ChangeKind
    description: str
    members: int | None = None
    network_topology_spec: dict[str, Any] | None = None
    """The relaxed ``gang.scheduling.koordinator.sh/network-topology-spec`` (empty: none)."""
    quota: str | None = None
    resource: str | None = None
    per_pod: int | None = None
    toleration: dict[str, str] | None = None
    placements: list[MemberPlacement] = Field(default_factory=list)
    """Where the members go with the change: it was checked through the same Filter, quota and
    solver path as the job itself."""


class WhatIfAnswer(_Model):
    job: str
    profile: str
    members: int
    min_member: int
    fits_now: FitsNow
    after_preemption: AfterPreemption | None = None
    """None when the job fits now (nothing to evict)."""
    largest: Largest
    blocker: Blocker | None = None
    smallest_change: Change | None = None
    alternatives: list[Change] = Field(default_factory=list)
    """Other changes that also make the job fit, each checked the same way."""
    notes: list[str] = Field(default_factory=list)
    seconds: float
    cache_changed: bool
    """Something free in the cluster changed while the what-if ran (its parts saw different states)."""
