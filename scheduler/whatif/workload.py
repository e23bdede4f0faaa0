"""From the request's manifests to one job: its member pods (with made-up uids, never sent
anywhere), the members it needs (minMember), and its network-topology-spec.

A PodGroup (or Koordinator's gang annotations, or the lightweight pod-group labels) makes the pods
one gang; pods of no gang form a job that needs every one of them (the answer's ``largest`` says
how many would fit)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from apis.core import Pod
from apis.errors import InvalidAnnotation, InvalidValue
from apis.extension import gang as gang_ext
from apis.extension import networktopology as topology_ext
from apis.scheduling.podgroup import PodGroup
from scheduler.cache.pod_info import PodInfo
from scheduler.simulator.expand import expand_document
from scheduler.whatif.priorities import PriorityClasses
from scheduler.whatif.request import MAX_MEMBERS, RequestError, WhatIfRequest

__all__ = ["UID_PREFIX", "Job", "job_of_objects"]

UID_PREFIX = "whatif-"
"""Every member a what-if makes up has a uid starting with this (no real pod's uid does)."""


@dataclass(frozen=True)
class Job:
    id: str
    members: tuple[PodInfo, ...]
    """In rank order: the first ``k`` are the job with ``k`` members."""
    min_member: int
    spec: topology_ext.NetworkTopologySpec | None
    gang: bool

    def with_members(self, members: Sequence[PodInfo]) -> Job:
        return Job(self.id, tuple(members), self.min_member, self.spec, self.gang)

    def with_spec(self, spec: topology_ext.NetworkTopologySpec | None) -> Job:
        return Job(self.id, self.members, self.min_member, spec, self.gang)


def job_of_objects(
    request: WhatIfRequest, default_scheduler: str, priorities: PriorityClasses | None = None
) -> Job:
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    for index, doc in enumerate(request.objects):
        where = f"objects[{index}]"
        try:
            if doc.get("kind") == "PodGroup":
                groups.append(PodGroup.model_validate(doc))
                continue
            for pod in expand_document(doc):
                pods.append(pod)
                if len(pods) > MAX_MEMBERS:
                    raise RequestError(
                        "objects", f"the job expands to more than {MAX_MEMBERS} pods", status=413
                    )
        except RequestError:
            raise
        except ValidationError as exc:
            error = exc.errors()[0]
            raise RequestError(f"{where}.{'.'.join(str(p) for p in error['loc'])}", error["msg"]) from exc
        except (InvalidValue, ValueError) as exc:
            raise RequestError(where, str(exc)) from exc
    if not pods:
        raise RequestError("objects", "no pod: give a Pod or a workload with a pod template")
    if len(groups) > 1:
        raise RequestError("objects", "one PodGroup per what-if (one job)")
    classes = priorities if priorities is not None else PriorityClasses()
    members = [_member(i, pod, request, default_scheduler, groups, classes) for i, pod in enumerate(pods)]
    return _job(members, groups[0] if groups else None)


def _member(
    index: int,
    pod: Pod,
    request: WhatIfRequest,
    scheduler: str,
    groups: list[PodGroup],
    priorities: PriorityClasses,
) -> PodInfo:
    data = pod.model_dump(by_alias=True, exclude_none=True)
    meta = data.setdefault("metadata", {})
    meta.setdefault("namespace", request.namespace)
    meta["uid"] = f"{UID_PREFIX}{index}-{meta.get('name', '')}"
    meta.pop("resourceVersion", None)
    spec = data.setdefault("spec", {})
    spec.pop("nodeName", None)
    spec["schedulerName"] = request.scheduler_name or spec.get("schedulerName") or scheduler
    class_name = spec.get("priorityClassName")
    if class_name and spec.get("priority") is None:
        # As the API server's Priority admission: the class gives the value and, unless the pod
        # says, the preemption policy.
        klass = priorities.get(class_name)
        if klass is None:
            raise RequestError(
                f"objects: pod {meta.get('name', '')} spec.priorityClassName",
                f"no PriorityClass named {class_name}",
            )
        spec["priority"] = klass.value
        if klass.preemption_policy and not spec.get("preemptionPolicy"):
            spec["preemptionPolicy"] = klass.preemption_policy
    if groups and gang_ext.LABEL_POD_GROUP not in (meta.get("labels") or {}):
        meta.setdefault("labels", {})[gang_ext.LABEL_POD_GROUP] = groups[0].metadata.name or ""
    return PodInfo.of(Pod.model_validate(data))


def _gang_names(members: list[PodInfo]) -> set[str]:
    return {
        name
        for m in members
        if (
            name := m.labels.get(gang_ext.LABEL_POD_GROUP)
            or m.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME)
            or m.annotations.get(gang_ext.ANNOTATION_GANG_NAME)
            or ""
        )
    }


def _job(members: list[PodInfo], group: PodGroup | None) -> Job:
    first = members[0]
    names = _gang_names(members)
    if len(names) > 1:
        raise RequestError(
            "objects", f"one job per what-if: the pods belong to gangs {', '.join(sorted(names))}"
        )
    if names and any(not _gang_names([m]) for m in members):
        raise RequestError(
            "objects", f"one job per what-if: some pods belong to gang {names.pop()}, others to none"
        )
    try:
        if group is not None:
            namespace = group.metadata.namespace or first.namespace
            spec = topology_ext.get_network_topology_spec(group.metadata.annotations)
            min_member = (group.spec.min_member or 0) if group.spec is not None else 0
            return _gang(f"{namespace}/{group.metadata.name}", members, min_member, spec)
        name = first.labels.get(
            gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME
        ) or first.annotations.get(gang_ext.ANNOTATION_GANG_NAME)
        if name:
            raw = first.labels.get(gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE)
            key = gang_ext.LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE
            if raw is None:
                raw, key = (
                    first.annotations.get(gang_ext.ANNOTATION_GANG_MIN_NUM),
                    gang_ext.ANNOTATION_GANG_MIN_NUM,
                )
            min_member = gang_ext.parse_gang_min_available(raw, key) if raw is not None else len(members)
            spec = topology_ext.get_network_topology_spec(first.annotations)
            return _gang(f"{first.namespace}/{name}", members, min_member, spec)
    except InvalidAnnotation as exc:
        raise RequestError("objects", str(exc)) from exc
    return Job(first.key, tuple(members), len(members), None, gang=False)


def _gang(
    gang_id: str, members: list[PodInfo], min_member: int, spec: topology_ext.NetworkTopologySpec | None
) -> Job:
    if min_member > len(members):
        raise RequestError(
            "objects", f"gang {gang_id} needs {min_member} members (minMember) but the job has {len(members)}"
        )
    ranked = sorted(members, key=_rank_key)
    return Job(gang_id, tuple(ranked), max(1, min_member), spec, gang=True)


def _rank_key(pod: PodInfo) -> tuple[int, int, str]:
    return gang_ext.member_rank_key(pod.annotations, pod.name)
