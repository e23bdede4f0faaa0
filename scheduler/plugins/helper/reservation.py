"""A Reservation as the pods that stand in for it: its reserve pod (scheduled like a pod), and what
it charges its quota (ElasticQuota counts a reservation from its creation, and only the room its
owners have not taken, so that an owner's pod is not counted twice).

Shared by the Reservation and ElasticQuota plugins (api-reference 1.3).
"""

from __future__ import annotations

import dataclasses

from apis.core import Pod
from apis.extension import priority as priority_ext
from apis.extension.reservation import (
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    ANNOTATION_RESERVE_POD,
)
from apis.scheduling.reservation import Reservation, template_pod_spec
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.quantity_range import check_list

__all__ = [
    "AVAILABLE",
    "FINISHED",
    "MAX_PRIORITY",
    "PODS",
    "explicit_pods",
    "quota_stand_in",
    "reserve_pod",
]

AVAILABLE = "Available"
FINISHED = frozenset({"Succeeded", "Failed"})
PODS = "pods"
MAX_PRIORITY = 2**31 - 1
"""A reserve pod's priority when neither its template nor the reservation gives one."""


def explicit_pods(template_spec: dict[str, object]) -> int:
    """The ``pods`` the template's containers request explicitly (a limit on owners)."""
    total = 0
    for container in template_spec.get("containers") or ():  # type: ignore[attr-defined]
        requests = ((container or {}).get("resources") or {}).get("requests") or {}
        raw = requests.get(PODS)
        if raw is not None:
            try:
                total += int(str(raw))
            except ValueError:
                continue
    return total


def reserve_pod(reservation: Reservation) -> PodInfo:
    """The pod that stands in for ``reservation`` while it is scheduled: the template's metadata
    and spec with the reservation's labels and annotations over them, the reservation's name and
    uid, ``template.spec.nodeName`` moved to the ``reservation-node`` annotation (the pin), and
    the template's priority, else the reservation's ``koordinator.sh/priority`` label, else the
    highest int32. Raises ValueError when the template is no pod template."""
    meta = reservation.metadata
    template = (reservation.spec.template if reservation.spec is not None else None) or {}
    template_meta = template.get("metadata") or {}
    spec = template_pod_spec(template)
    pin = spec.pop("nodeName", None)
    annotations = {
        **(template_meta.get("annotations") or {}),
        **(meta.annotations or {}),
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: meta.name or "",
    }
    if pin:
        annotations[ANNOTATION_RESERVATION_NODE] = str(pin)
    if spec.get("priority") is None:
        try:
            label_priority = priority_ext.get_pod_sub_priority(meta.labels)
        except ValueError:
            label_priority = 0
        spec["priority"] = label_priority or MAX_PRIORITY
    try:
        pod = Pod.model_validate(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": meta.name,
                    "namespace": template_meta.get("namespace") or "default",
                    "uid": meta.uid,
                    "labels": {**(template_meta.get("labels") or {}), **(meta.labels or {})},
                    "annotations": annotations,
                    "creationTimestamp": meta.creation_timestamp,
                },
                "spec": spec,
            }
        )
    except Exception as exc:
        raise ValueError(f"spec.template is not a valid pod template: {exc}") from None
    return PodInfo.of(pod)


def quota_stand_in(reservation: Reservation) -> PodInfo | None:
    """What ``reservation`` charges its quota, as a pod: its reserve pod while Pending (a request);
    once placed, on its node (used), asking only for what its owners have not taken
    (``status.allocatable - status.allocated``). None when it is finished, being deleted, or
    has no valid template."""
    status = reservation.status
    if reservation.metadata.deletion_timestamp is not None or (
        status is not None and status.phase in FINISHED
    ):
        return None
    try:
        pod = reserve_pod(reservation)
    except ValueError:
        return None
    if status is None or status.phase != AVAILABLE or not status.node_name:
        return pod
    allocatable = check_list(status.allocatable or {}, "status.allocatable").amounts or {
        k: v for k, v in pod.requests.items() if k != PODS
    }
    allocated = check_list(status.allocated or {}, "status.allocated").amounts
    requests = {k: max(0, v - allocated.get(k, 0)) for k, v in allocatable.items() if k != PODS}
    placed = pod.pod.model_copy(
        update={"spec": pod.pod.spec.model_copy(update={"node_name": status.node_name})}
    )
    return dataclasses.replace(pod, pod=placed, requests={k: v for k, v in requests.items() if v})
