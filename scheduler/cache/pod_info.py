"""PodInfo: a pod decoded once, with what every cycle needs precomputed (requests in integer units).

Requests are range-checked here (``quantity_range``): ``PodInfo.problems`` names every field that
was outside the range and clamped, and a pod with problems is never scheduled.

Besides its requests, a PodInfo carries what kube-scheduler's ``NodeInfo`` accumulates per pod:
``non_zero`` (cpu and memory as the resource scorers count them, ``schedutil.GetNonzeroRequests``:
100m / 200Mi for each container that sets no request) and ``host_ports`` (``schedutil.GetHostPorts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from apis.core import Container, Pod
from apis.extension import priority as priority_ext
from apis.extension.colocation import transform_deprecated_batch_resources
from apis.extension.device import transform_deprecated_device_resources
from apis.podkey import namespaced_key
from apis.quantity import Quantity
from apis.resources import from_int_units
from scheduler.cache.quantity_range import MAX_UNITS, check_list, out_of_range
from scheduler.cache.sharing import share

__all__ = [
    "DEFAULT_BIND_ALL_HOST_IP",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "HostPort",
    "PodInfo",
    "decoding_once",
    "host_ports",
    "non_zero_requests",
    "pod_requests",
]

PODS, CPU, MEMORY = "pods", "cpu", "memory"

DEFAULT_MILLI_CPU_REQUEST = 100
"""kube-scheduler's ``DefaultMilliCPURequest``: scored cpu of a container that requests none (0.1 core)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""kube-scheduler's ``DefaultMemoryRequest``: scored memory of a container that requests none (200Mi)."""
_NON_ZERO_DEFAULTS = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"

HostPort = tuple[str, str, int]
"""(hostIP, protocol, hostPort) with kube-scheduler's defaults applied: ``0.0.0.0`` and ``TCP``."""


def _checked(rl: dict[str, Quantity] | None, field: str, problems: list[str]) -> dict[str, int]:
    if not rl:
        return {}
    checked = check_list(rl, field)
    problems.extend(checked.problems)
    return checked.amounts


def _checked_renamed(rl: dict[str, Quantity] | None, field: str, problems: list[str]) -> dict[str, int]:
    """``_checked`` with the deprecated ``kubernetes.io/`` device names renamed to Koordinator's and
    the deprecated ``koordinator.sh/batch-*`` names to ``kubernetes.io/batch-*``, as koord-scheduler's
    pod transformers do: a ``kubernetes.io/gpu`` request is fit against the node's
    ``koordinator.sh/gpu`` and charged to quotas under that name."""
    renamed = transform_deprecated_device_resources(_checked(rl, field, problems))
    return transform_deprecated_batch_resources(renamed)


def _container_requests(container: Container, field: str, problems: list[str]) -> dict[str, int]:
    if container.resources is None:
        return {}
    return _checked_renamed(container.resources.requests, f"{field}.resources.requests", problems)


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _with_defaults(requests: dict[str, int], defaults: dict[str, int]) -> dict[str, int]:
    """``requests`` plus ``defaults`` for the names it does not set (an explicit 0 stays 0)."""
    return {**defaults, **requests} if defaults else requests


def _combine(pod: Pod, problems: list[str], defaults: dict[str, int]) -> dict[str, int]:
    """What the pod occupies on a node, as kube-scheduler's ``resourcehelper.PodRequests`` computes it
    (each container's missing requests taken from ``defaults``):

    1. the sum over regular containers, plus every sidecar (an init container with
       ``restartPolicy: Always``), since sidecars run beside them;
    2. raised, per resource, to what each regular init container needs while it runs (itself
       plus the sidecars started before it);
    3. plus the pod overhead.
    """
    total: dict[str, int] = {}
    for i, container in enumerate(pod.spec.containers):
        requests = _container_requests(container, f"spec.containers[{i}]", problems)
        _add(total, _with_defaults(requests, defaults))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, init in enumerate(pod.spec.init_containers or ()):
        requests = _with_defaults(_container_requests(init, f"spec.initContainers[{i}]", problems), defaults)
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
    _add(total, _checked_renamed(pod.spec.overhead, "spec.overhead", problems))
    return total


def pod_requests(pod: Pod) -> dict[str, int]:
    """What the pod occupies on a node (see ``checked_pod_requests``), each amount in range."""
    return checked_pod_requests(pod)[0]


def checked_pod_requests(pod: Pod) -> tuple[dict[str, int], tuple[str, ...]]:
    """What the pod occupies on a node, as kube-scheduler computes it (``_combine``), plus
    ``pods: 1``, and the problems of the amounts that were out of range (each clamped, so the sums
    stay bounded)."""
    problems: list[str] = []
    total = _combine(pod, problems, {})
    total[PODS] = 1
    for name, amount in total.items():
        if amount > MAX_UNITS:  # each part in range, their sum not
            sum_text = str(from_int_units(name, amount))
            problems.append(out_of_range(f"spec (the sum of every {name} request)", name, sum_text))
            total[name] = MAX_UNITS
    return {name: amount for name, amount in total.items() if amount}, tuple(problems)


def non_zero_requests(pod: Pod) -> dict[str, int]:
    """cpu and memory of ``pod`` as kube-scheduler's scorers count them: like ``pod_requests``, but
    every container (init containers included) that sets no cpu (memory) request counts
    ``DEFAULT_MILLI_CPU_REQUEST`` (``DEFAULT_MEMORY_REQUEST``). Amounts are clamped as requests are."""
    total = _combine(pod, [], _NON_ZERO_DEFAULTS)
    return {name: min(total.get(name, 0), MAX_UNITS) for name in _NON_ZERO_DEFAULTS}


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """kube-scheduler's ``GetHostPorts``: the ports with a ``hostPort`` of the sidecars (init
    containers with ``restartPolicy: Always``, which run for the pod's lifetime), then of the
    containers, with an unset hostIP read as ``0.0.0.0`` and an unset protocol as ``TCP``."""
    sidecars = [c for c in pod.spec.init_containers or () if c.restart_policy == "Always"]
    return tuple(
        (port.host_ip or DEFAULT_BIND_ALL_HOST_IP, port.protocol or "TCP", port.host_port)
        for container in (*sidecars, *pod.spec.containers)
        for port in container.ports or ()
        if port.host_port is not None and port.host_port > 0
    )


_RequestsKey = tuple[object, ...]
_COMPUTED: dict[_RequestsKey, tuple[dict[str, int], tuple[int, int]]] = {}
"""Requests and non-zero cpu/memory by what they are computed from (``_requests_key``), for pods
whose amounts were all in range: the replicas of a workload request alike, and computing them
(range checks, renames, the init-container rules) was most of decoding a pod at start-up."""
_COMPUTED_CAPACITY = 4096


def _resources_of(container: Container) -> tuple[tuple[str, Quantity], ...]:
    resources = container.resources
    return tuple(resources.requests.items()) if resources is not None and resources.requests else ()


def _requests_key(pod: Pod) -> _RequestsKey:
    """Everything ``checked_pod_requests`` and ``non_zero_requests`` read of ``pod``. Quantities
    compare by value: equal amounts written differently give the same figures (only a problem's
    message would quote the text, and results with problems are not kept)."""
    spec = pod.spec
    return (
        tuple(_resources_of(c) for c in spec.containers),
        tuple((_resources_of(c), c.restart_policy) for c in spec.init_containers or ()),
        tuple(spec.overhead.items()) if spec.overhead else (),
    )


def _requests_and_non_zero(pod: Pod) -> tuple[dict[str, int], tuple[str, ...], tuple[int, int]]:
    """``checked_pod_requests`` and ``non_zero_requests`` of ``pod``, computed once per shape."""
    key = _requests_key(pod)
    known = _COMPUTED.get(key)
    if known is not None:
        return dict(known[0]), (), known[1]
    requests, problems = checked_pod_requests(pod)
    non_zero = non_zero_requests(pod)
    pair = (non_zero[CPU], non_zero[MEMORY])
    if not problems:
        if len(_COMPUTED) >= _COMPUTED_CAPACITY:
            _COMPUTED.clear()
        _COMPUTED[key] = (dict(requests), pair)
    return requests, problems, pair


_Parts = tuple[object, object, object, dict[str, int], tuple[int, int], tuple[HostPort, ...]]
_BY_PARTS: dict[int, _Parts] = {}
"""By the identity of a pod's containers: those containers, its init containers and overhead (the
objects), and what ``_requests_and_non_zero`` and ``host_ports`` made of them. The replicas of a
workload share these objects (``share``) and so does each later version of a pod (a binding
changes none of them), so most pods are decoded without reading their containers at all (decoded
pods are never mutated). Only results without problems are kept."""


def _computed(pod: Pod) -> tuple[dict[str, int], tuple[str, ...], tuple[int, int], tuple[HostPort, ...]]:
    """Requests, their problems, non-zero cpu/memory and host ports of ``pod``."""
    spec = pod.spec
    containers, inits, overhead = spec.containers, spec.init_containers, spec.overhead
    known = _BY_PARTS.get(id(containers))
    if known is not None and known[0] is containers and known[1] is inits and known[2] is overhead:
        return dict(known[3]), (), known[4], known[5]
    requests, problems, non_zero = _requests_and_non_zero(pod)
    ports = host_ports(pod)
    if not problems:
        if len(_BY_PARTS) >= _COMPUTED_CAPACITY:
            _BY_PARTS.clear()
        _BY_PARTS[id(containers)] = (containers, inits, overhead, dict(requests), non_zero, ports)
    return requests, problems, non_zero, ports


_DECODED: ContextVar[dict[int, PodInfo] | None] = ContextVar("decoded_pods", default=None)


class decoding_once:
    """Within the block, ``PodInfo.of`` decodes each Pod object once and hands every later caller
    the same PodInfo: one watch event reaches several informers (the cache's, Coscheduling's,
    ElasticQuota's, ...), and each used to decode the pod again. The PodInfos are forgotten when
    the block ends, so nothing outlives the event. ``decoded``: PodInfos already made, by their
    pod's identity (``scheduler.cache.decode_ahead``).

    A class, not a ``contextmanager`` generator: it is entered for every watch event, and the
    generator's three extra calls per event were most of its cost."""

    __slots__ = ("_decoded", "_token")

    def __init__(self, decoded: Mapping[int, PodInfo] | None = None) -> None:
        self._decoded = dict(decoded) if decoded else {}
        self._token: Token[dict[int, PodInfo] | None] | None = None

    def __enter__(self) -> None:
        self._token = _DECODED.set(self._decoded)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _DECODED.reset(self._token)
            self._token = None


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
    non_zero: tuple[int, int] = (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    """(milli-cpu, memory bytes) as the resource scorers count them (``non_zero_requests``)."""
    host_ports: tuple[HostPort, ...] = ()

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        decoded = _DECODED.get()
        if decoded is None:
            return cls._decode(pod)
        # Keyed by identity: the PodInfo holds the pod, so its id is not reused while kept here.
        info = decoded.get(id(pod))
        if info is None or info.pod is not pod:
            info = decoded[id(pod)] = cls._decode(pod)
        return info

    @classmethod
    def _decode(cls, pod: Pod) -> PodInfo:
        share(pod)  # a Deployment's replicas keep one copy of their containers, affinity, labels
        meta = pod.metadata
        labels = meta.labels or {}
        try:
            sub_priority = priority_ext.get_pod_sub_priority(labels)
        except ValueError:  # a malformed label orders the pod as if it had none
            sub_priority = 0
        requests, problems, non_zero, ports = _computed(pod)
        return cls(
            pod=pod,
            key=namespaced_key(meta.namespace, meta.name),
            uid=meta.uid or namespaced_key(meta.namespace, meta.name),
            requests=requests,
            priority=pod.spec.priority or 0,
            sub_priority=sub_priority,
            created=meta.creation_timestamp.timestamp() if meta.creation_timestamp else 0.0,
            labels=labels,
            annotations=meta.annotations or {},
            problems=problems,
            non_zero=non_zero,
            host_ports=ports,
        )

    def successor(self, pod: Pod) -> PodInfo | None:
        """The PodInfo of ``pod``, a later version of this one's pod, made from this one without
        decoding it again, or None where that is not known to give what ``_decode`` gives.

        A binding changes a pod's node, resourceVersion, conditions and maybe annotations; the
        in-memory backend shares every other part with the version before. Where the parts the
        requests, host ports and sub-priority are computed from are the same objects (decoded
        pods are never mutated), so are those figures; the cheap fields are read from ``pod``.
        ``share`` is skipped: the parts it would share are the earlier version's, shared already."""
        meta, spec = pod.metadata, pod.spec
        old_meta, old_spec = self.pod.metadata, self.pod.spec
        if not (
            spec.containers is old_spec.containers
            and spec.init_containers is old_spec.init_containers
            and spec.overhead is old_spec.overhead
            and meta.labels is old_meta.labels
            and meta.uid == old_meta.uid
            and meta.name == old_meta.name
            and meta.namespace == old_meta.namespace
            and meta.creation_timestamp == old_meta.creation_timestamp
        ):
            return None
        return PodInfo(
            pod=pod,
            key=self.key,
            uid=self.uid,
            requests=dict(self.requests),
            priority=spec.priority or 0,
            sub_priority=self.sub_priority,
            created=self.created,
            labels=self.labels,
            annotations=meta.annotations or {},
            problems=self.problems,
            non_zero=self.non_zero,
            host_ports=self.host_ports,
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
