"""PodInfo: a pod decoded once, with what every cycle needs precomputed (requests in integer units).

Requests are range-checked here (``quantity_range``): ``PodInfo.problems`` names every field that
was outside the range and clamped, and a pod with problems is never scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.core import Container, Pod
from apis.extension import priority as priority_ext
from apis.quantity import Quantity
from apis.resources import from_int_units
from scheduler.cache.quantity_range import MAX_UNITS, check_list, out_of_range

__all__ = ["PodInfo", "pod_key", "pod_requests"]

PODS = "pods"


def pod_key(namespace: str | None, name: str | None) -> str:
    return f"{namespace or 'default'}/{name or ''}"


def _checked(rl: dict[str, Quantity] | None, field: str, problems: list[str]) -> dict[str, int]:
    if not rl:
        return {}
    checked = check_list(rl, field)
    problems.extend(checked.problems)
    return checked.amounts


def _container_requests(container: Container, field: str, problems: list[str]) -> dict[str, int]:
    if container.resources is None:
        return {}
    return _checked(container.resources.requests, f"{field}.resources.requests", problems)


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod occupies on a node (see ``checked_pod_requests``), each amount in range."""
    return checked_pod_requests(pod)[0]


def checked_pod_requests(pod: Pod) -> tuple[dict[str, int], tuple[str, ...]]:
    """What the pod occupies on a node, as kube-scheduler computes it, plus ``pods: 1``, and the
    problems of the amounts that were out of range (each clamped, so the sums stay bounded).

    1. the sum over regular containers, plus every sidecar (an init container with
       ``restartPolicy: Always``), since sidecars run beside them;
    2. raised, per resource, to what each regular init container needs while it runs (itself
       plus the sidecars started before it);
    3. plus the pod overhead.
    """
    problems: list[str] = []
    total: dict[str, int] = {}
    for i, container in enumerate(pod.spec.containers):
        _add(total, _container_requests(container, f"spec.containers[{i}]", problems))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, init in enumerate(pod.spec.init_containers or ()):
        requests = _container_requests(init, f"spec.initContainers[{i}]", problems)
        if init.restart_policy == "Always":
            _add(sidecars, requests)
            running = dict(sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
        for name, amount in running.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    _add(total, sidecars)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    _add(total, _checked(pod.spec.overhead, "spec.overhead", problems))
    total[PODS] = 1
    for name, amount in total.items():
        if amount > MAX_UNITS:  # each part in range, their sum not
            sum_text = str(from_int_units(name, amount))
            problems.append(out_of_range(f"spec (the sum of every {name} request)", name, sum_text))
            total[name] = MAX_UNITS
    return {name: amount for name, amount in total.items() if amount}, tuple(problems)


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod and what scheduling it needs, computed once per pod version."""

    pod: Pod
    key: str
    uid: str
    requests: dict[str, int]
    priority: int
    sub_priority: int
    """``koordinator.sh/priority``: the order inside a Koordinator priority class."""
    created: float
    """Creation time as a POSIX timestamp (0 when unknown)."""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Fields outside the range the scheduler can account (clamped in ``requests``): such a pod
    is never scheduled, and is accounted clamped if it is bound by someone else."""

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        meta = pod.metadata
        labels = meta.labels or {}
        try:
            sub_priority = priority_ext.get_pod_sub_priority(labels)
        except ValueError:  # a malformed label orders the pod as if it had none
            sub_priority = 0
        requests, problems = checked_pod_requests(pod)
        return cls(
            pod=pod,
            key=pod_key(meta.namespace, meta.name),
            uid=meta.uid or pod_key(meta.namespace, meta.name),
            requests=requests,
            priority=pod.spec.priority or 0,
            sub_priority=sub_priority,
            created=meta.creation_timestamp.timestamp() if meta.creation_timestamp else 0.0,
            labels=labels,
            annotations=meta.annotations or {},
            problems=problems,
        )

    @property
    def namespace(self) -> str:
        return self.pod.metadata.namespace or "default"

    @property
    def name(self) -> str:
        return self.pod.metadata.name or ""

    @property
    def node_name(self) -> str | None:
        return self.pod.spec.node_name or None

    @property
    def scheduler_name(self) -> str:
        return self.pod.spec.scheduler_name or "default-scheduler"

    def is_terminal(self) -> bool:
        return self.pod.status.phase in ("Succeeded", "Failed")
