"""Gang state: which pods form which gang, which gangs form a group, and who is pending, waiting
at Permit or bound. Fed by pod and PodGroup watch events; read by the Coscheduling plugin.

A gang (``namespace/name``) is declared, in Koordinator's precedence order, by the PodGroup label
``pod-group.scheduling.sigs.k8s.io`` (parameters from the PodGroup object), the lightweight label
``pod-group.scheduling.sigs.k8s.io/name``, or the annotation ``gang.scheduling.koordinator.sh/name``
(parameters from the first pod seen). A PodGroup gang whose PodGroup has not arrived yet is
*uninitialized*: its pods are held back. Malformed gang annotations are recorded as the gang's
``problem`` (the plugin rejects its pods with that message) and never raise.

Match policies decide which members count toward minMember at Permit (api-reference 2.1):
``once-satisfied`` (default) counts waiting members until the group is satisfied, after which the
group behaves like plain pods; ``waiting-and-running`` counts waiting + running; ``only-waiting``
counts waiting only. "Running" is bound and not terminating.

A group is satisfied when Permit released it and a member was bound (PostBind), or when the
informer shows every gang of it with minMember members running (a restarted scheduler). A group
seen with fewer running (a scheduler killed between two members' bindings) is *part bound*: its
running members count toward minMember at Permit, so the rest are placed together. And a satisfied
group whose running members are all gone (evicted, deleted, finished) with none being bound is no
longer satisfied: what is left of it is a gang again, not plain pods that would run alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from apis.errors import InvalidAnnotation
from apis.extension import gang as gang_ext
from apis.extension import networktopology as topology_ext
from apis.extension.defrag import get_defrag_plan
from apis.scheduling.podgroup import PodGroup
from scheduler.cache.pod_info import PodInfo

__all__ = ["Gang", "GangGroup", "Gangs", "gang_name_of"]

log = logging.getLogger(__name__)


def gang_name_of(pod: PodInfo) -> tuple[str, bool] | None:
    """(gang name, declared by a PodGroup CR) for a gang member, else None."""
    name = pod.labels.get(gang_ext.LABEL_POD_GROUP)
    if name:
        return name, True
    name = pod.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME) or pod.annotations.get(
        gang_ext.ANNOTATION_GANG_NAME
    )
    if name:
        return name, False
    return None


@dataclass(eq=False)
class Gang:
    id: str
    from_pod_group: bool
    initialized: bool = False
    min_member: int = 0
    mode: str = gang_ext.GANG_MODE_STRICT
    match_policy: str = gang_ext.GANG_MATCH_POLICY_ONCE_SATISFIED
    wait_time: timedelta | None = None
    """None: the plugin's defaultTimeout."""
    group_ids: tuple[str, ...] = ()
    """The gangs of its group (sorted), itself included."""
    topology_spec: topology_ext.NetworkTopologySpec | None = None
    defrag_note: str | None = None
    """koord-descheduler's defragmentation plan for the gang (its PodGroup's annotation), for
    ``koordctl explain``."""
    problem: str | None = None
    """Why the gang cannot be scheduled as declared (a malformed annotation, minMember missing)."""
    children: dict[str, PodInfo] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    """Members assumed and waiting at Permit."""
    bound: set[str] = field(default_factory=set)
    allowed: set[str] = field(default_factory=set)
    """Members Permit let through (their group complete or already satisfied) and not yet bound:
    a failed binding of one of them keeps its room (``HOLD_ROOM``), since others may be bound."""

    @property
    def group_id(self) -> str:
        return gang_ext.gang_group_id(self.group_ids or (self.id,))

    def running(self) -> int:
        """Members bound and not terminating."""
        return sum(1 for uid in self.bound if (p := self.children.get(uid)) is not None and _live(p))

    def live_members(self) -> int:
        """Members not terminating (pending, waiting or bound)."""
        return sum(1 for p in self.children.values() if _live(p))

    def pending(self) -> list[PodInfo]:
        """Members neither waiting nor bound, in rank then name order."""
        return sorted(
            (p for uid, p in self.children.items() if uid not in self.waiting and uid not in self.bound),
            key=_rank_key,
        )


def _live(pod: PodInfo) -> bool:
    return pod.pod.metadata.deletion_timestamp is None


def _rank_key(pod: PodInfo) -> tuple[int, int, str]:
    return gang_ext.member_rank_key(pod.annotations, pod.name)


@dataclass(eq=False)
class GangGroup:
    id: str
    once_satisfied: bool = False
    plan: dict[str, str] = field(default_factory=dict)
    """Member uid -> node chosen for it by the group's placement."""
    failure: str | None = None
    """Why the group's latest attempt failed (shown on every member)."""
    failure_version: int = -1
    """The cache version ``failure`` was computed at; a newer one makes the group worth a new try."""


class Gangs:
    """Every gang and gang group the scheduler knows of."""

    def __init__(
        self, *, default_match_policy: gang_ext.GangMatchPolicy = gang_ext.GANG_MATCH_POLICY_ONCE_SATISFIED
    ) -> None:
        self._gangs: dict[str, Gang] = {}
        self._groups: dict[str, GangGroup] = {}
        self._pod_gang: dict[str, str] = {}
        self.default_match_policy = default_match_policy

    # ---- lookups -----------------------------------------------------------------------------

    def gang(self, gang_id: str) -> Gang | None:
        return self._gangs.get(gang_id)

    def gang_of(self, pod: PodInfo) -> Gang | None:
        gid = self._pod_gang.get(pod.uid)
        if gid is None:
            declared = gang_name_of(pod)
            if declared is None:
                return None
            gid = gang_ext.gang_id(pod.namespace, declared[0])
        return self._gangs.get(gid)

    def gang_of_pod_named(self, namespace: str, name: str) -> Gang | None:
        """The gang with a member pod ``namespace/name`` (a what-if names pods, not uids)."""
        for gang in self._gangs.values():
            if any(p.namespace == namespace and p.name == name for p in gang.children.values()):
                return gang
        return None

    def group(self, gang: Gang) -> GangGroup:
        group = self._groups.get(gang.group_id)
        if group is None:
            group = self._groups[gang.group_id] = GangGroup(gang.group_id)
        return group

    def members_of_group(self, gang: Gang) -> list[Gang]:
        """The gangs of ``gang``'s group that exist (in id order)."""
        return [g for gid in (gang.group_ids or (gang.id,)) if (g := self._gangs.get(gid)) is not None]

    # ---- informer side -----------------------------------------------------------------------

    def on_pod(self, pod: PodInfo) -> Gang | None:
        """A pod was added or changed; returns its gang (None for a plain pod)."""
        declared = gang_name_of(pod)
        if declared is None:
            return None
        name, from_pod_group = declared
        gid = gang_ext.gang_id(pod.namespace, name)
        gang = self._gangs.get(gid)
        if gang is None:
            gang = self._gangs[gid] = Gang(gid, from_pod_group=from_pod_group)
            if not from_pod_group:
                self._init_from_pod(gang, pod)
        self._pod_gang[pod.uid] = gid
        if pod.is_terminal():
            gang.children.pop(pod.uid, None)
            gang.waiting.discard(pod.uid)
            gang.bound.discard(pod.uid)
            self.recount(gang)
            return gang
        gang.children[pod.uid] = pod
        if pod.node_name:
            gang.waiting.discard(pod.uid)
            gang.bound.add(pod.uid)
        self.recount(gang)
        return gang

    def replace_pods(self, pods: Iterable[PodInfo], *, told: int = 0) -> None:
        """A (re)list: every pod as it is now; the first ``told`` were handled already (``on_pod``
        page by page). A member not listed was deleted while the watch was down (no DELETED event
        will come for it): it leaves its gang."""
        present: set[str] = set()
        for index, pod in enumerate(pods):
            present.add(pod.uid)
            if index >= told:
                self.on_pod(pod)
        for uid in [uid for uid in self._pod_gang if uid not in present]:
            self._forget(uid)

    def on_pod_deleted(self, pod: PodInfo) -> Gang | None:
        return self._forget(pod.uid)

    def _forget(self, uid: str) -> Gang | None:
        gid = self._pod_gang.pop(uid, None)
        gang = self._gangs.get(gid) if gid else None
        if gang is None:
            return None
        gang.children.pop(uid, None)
        gang.waiting.discard(uid)
        gang.bound.discard(uid)
        gang.allowed.discard(uid)
        self.recount(gang)
        if not gang.children and not gang.from_pod_group:
            del self._gangs[gang.id]  # a lightweight gang lives as long as its pods
        return gang

    def on_pod_group(self, pg: PodGroup) -> Gang:
        gid = gang_ext.gang_id(pg.metadata.namespace or "default", pg.metadata.name or "")
        gang = self._gangs.get(gid)
        if gang is None:
            gang = self._gangs[gid] = Gang(gid, from_pod_group=True)
        gang.from_pod_group = True
        spec = pg.spec
        gang.min_member = (spec.min_member or 0) if spec else 0
        timeout = spec.schedule_timeout_seconds if spec else None
        gang.wait_time = timedelta(seconds=timeout) if timeout and timeout > 0 else None
        self._apply_annotations(gang, pg.metadata.annotations or {}, pg.metadata.namespace or "default")
        plan = get_defrag_plan(pg.metadata.annotations)
        gang.defrag_note = plan.describe() if plan is not None else None
        gang.initialized = True
        self.recount(gang)
        return gang

    def on_pod_group_deleted(self, pg: PodGroup) -> None:
        gid = gang_ext.gang_id(pg.metadata.namespace or "default", pg.metadata.name or "")
        gang = self._gangs.get(gid)
        if gang is not None:
            gang.initialized = False
            gang.problem = f"PodGroup {gid} not found"

    def replace_pod_groups(self, pod_groups: Iterable[PodGroup]) -> None:
        seen = set()
        for pg in pod_groups:
            seen.add(self.on_pod_group(pg).id)
        for gang in list(self._gangs.values()):
            if gang.from_pod_group and gang.id not in seen and gang.initialized:
                gang.initialized = False
                gang.problem = f"PodGroup {gang.id} not found"

    def _init_from_pod(self, gang: Gang, pod: PodInfo) -> None:
        raw = pod.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE)
        key = gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE
        if raw is None:
            raw = pod.annotations.get(gang_ext.ANNOTATION_GANG_MIN_NUM)
            key = gang_ext.ANNOTATION_GANG_MIN_NUM
        if raw is None:
            gang.problem = f"gang {gang.id}: {gang_ext.ANNOTATION_GANG_MIN_NUM} is required"
            return
        try:
            gang.min_member = gang_ext.parse_gang_min_available(raw, key)
        except InvalidAnnotation as exc:
            gang.problem = str(exc)
            return
        wait = gang_ext.resolve_gang_waiting_time(pod.annotations.get(gang_ext.ANNOTATION_GANG_WAIT_TIME))
        gang.wait_time = wait.value
        self._apply_annotations(gang, pod.annotations, pod.namespace)
        if gang.problem is None:
            gang.initialized = True

    def _apply_annotations(self, gang: Gang, annotations: dict[str, str], namespace: str) -> None:
        gang.problem = None
        gang.mode = gang_ext.resolve_gang_mode(annotations.get(gang_ext.ANNOTATION_GANG_MODE)).value
        policy = gang_ext.resolve_gang_match_policy(
            gang_ext.get_gang_match_policy(annotations), self.default_match_policy
        )
        gang.match_policy = policy.value
        try:
            groups = gang_ext.get_gang_groups(annotations)
            gang.topology_spec = topology_ext.get_network_topology_spec(annotations)
        except InvalidAnnotation as exc:
            gang.problem = str(exc)
            groups = None
        ids = set(groups or ()) | {gang.id}
        gang.group_ids = tuple(sorted(ids))

    def recount(self, gang: Gang) -> None:
        """Whether ``gang``'s group is satisfied, after its members or minMember changed.

        A group whose running members are all gone, with none being bound (``allowed``), is no
        longer satisfied; one seen with minMember members running in every gang (the informer, after
        a restart) is. A group with some members running but fewer (part bound) is left as it is:
        if the scheduler released it, the rest of it binds as plain pods (``once-satisfied``); if it
        was found so, the rest is placed together, its running members counted at Permit."""
        group = self.group(gang)
        members = self.members_of_group(gang)
        if group.once_satisfied:
            if not any(m.running() or m.allowed for m in members):
                group.once_satisfied = False
                group.plan.clear()
            return
        complete = len(members) == len(gang.group_ids or (gang.id,))
        if complete and all(m.initialized and m.running() >= max(m.min_member, 1) for m in members):
            group.once_satisfied = True

    # ---- scheduler side ----------------------------------------------------------------------

    def check(self, gang: Gang) -> str | None:
        """Why ``gang``'s group cannot be scheduled now (None when every gang is ready)."""
        for gid in gang.group_ids or (gang.id,):
            member = self._gangs.get(gid)
            if member is None:
                return f"gang {gid} of group {gang.group_id} not found"
            if member.problem:
                return member.problem
            if not member.initialized:
                return f"gang {gid} is not initialized (its PodGroup has not been seen)"
            live = member.live_members()
            if live < member.min_member:
                return f"gang {gid} has {live} of the {member.min_member} members it needs"
        return None

    def malformed(self, gang: Gang) -> str | None:
        """The first declaration problem of ``gang``'s group (a malformed annotation): the pods
        must change before the group can be scheduled, unlike a gang short of members."""
        for gid in gang.group_ids or (gang.id,):
            member = self._gangs.get(gid)
            if member is not None and member.problem:
                return member.problem
        return None

    def satisfied(self, gang: Gang) -> bool:
        """Every gang of the group has enough members counted by its match policy."""
        group = self.group(gang)
        for member in self.members_of_group(gang):
            waiting, running = len(member.waiting), member.running()
            if member.match_policy == gang_ext.GANG_MATCH_POLICY_ONLY_WAITING:
                counted = waiting
            elif member.match_policy == gang_ext.GANG_MATCH_POLICY_WAITING_AND_RUNNING:
                counted = waiting + running
            else:
                if group.once_satisfied:
                    continue
                # Not satisfied yet: a part-bound group's running members count, the rest goes
                # together (none runs before the group is released, so this is waiting otherwise).
                counted = waiting + running
            if counted < member.min_member:
                return False
        return len(self.members_of_group(gang)) == len(gang.group_ids or (gang.id,))
