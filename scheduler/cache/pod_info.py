"""PodInfo: a pod decoded once, with what every cycle needs precomputed (requests in integer units)."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.core import Container, Pod
from apis.extension import priority as priority_ext
from apis.resources import to_int_units

__all__ = ["PodInfo", "pod_key", "pod_requests"]

PODS = "pods"


def pod_key(namespace: str | None, name: str | None) -> str:
    return f"{namespace or 'default'}/{name or ''}"


def _container_requests(container: Container) -> dict[str, int]:
    if container.resources is None or not container.resources.requests:
        return {}
    return {name: to_int_units(name, q) for name, q in container.resources.requests.items()}


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod occupies on a node, as kube-scheduler computes it, plus ``pods: 1``.

    1. the sum over regular containers, plus every sidecar (an init container with
       ``restartPolicy: Always``), since sidecars run beside them;
    2. raised, per resource, to what each regular init container needs while it runs (itself
       plus the sidecars started before it);
    3. plus the pod overhead.
    """
    total: dict[str, int] = {}
    for container in pod.spec.containers:
        _add(total, _container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod.spec.init_containers or ():
        requests = _container_requests(init)
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
    if pod.spec.overhead:
        _add(total, {name: to_int_units(name, q) for name, q in pod.spec.overhead.items()})
    total[PODS] = 1
    return {name: amount for name, amount in total.items() if amount}


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

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        meta = pod.metadata
        labels = meta.labels or {}
        try:
            sub_priority = priority_ext.get_pod_sub_priority(labels)
        except ValueError:  # a malformed label orders the pod as if it had none
            sub_priority = 0
        return cls(
            pod=pod,
            key=pod_key(meta.namespace, meta.name),
            uid=meta.uid or pod_key(meta.namespace, meta.name),
            requests=pod_requests(pod),
            priority=pod.spec.priority or 0,
            sub_priority=sub_priority,
            created=meta.creation_timestamp.timestamp() if meta.creation_timestamp else 0.0,
            labels=labels,
            annotations=meta.annotations or {},
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
