"""koordlet's NRI plugin: the ``Plugin`` service the runtime calls (Koordinator's ``NriServer``).

It subscribes to RunPodSandbox, to write what NRI cannot adjust into the new pod's cgroup and
resctrl group (CPU QoS, batch resources: :mod:`koordlet.nri.pod_cgroups`), to CreateContainer, to
answer with the container's settings (cpuset, CFS quota, batch resources, RDT class, GPU
environment: :mod:`koordlet.nri.adjust`), to UpdateContainer, to keep them when the kubelet updates
the container's resources, and to RemovePodSandbox, to remove the pod's resctrl group. A pod whose
settings cannot be decided (an annotation that does not parse, say) is logged and its container
created unchanged: the plugin never fails a container, as Koordinator's default failure policy
(Ignore) does; the reconcile reports the bad annotation.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from google.protobuf.message import Message

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.nri import adjust
from koordlet.nri.proto import api_pb2
from koordlet.nri.ttrpc import Handler
from koordlet.qos.resctrl import ResctrlInfo
from koordlet.qos.resctrl_qos import POD_GROUP_PREFIX
from koordlet.topology.cpuset_rule import CPUSetRule

__all__ = [
    "EVENTS",
    "PLUGIN_SERVICE",
    "RUNTIME_SERVICE",
    "NRIPlugin",
    "PodCgroups",
    "PodSource",
    "event_mask",
]

log = logging.getLogger("koordlet.nri")

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
EVENTS = (
    api_pb2.RUN_POD_SANDBOX,
    api_pb2.REMOVE_POD_SANDBOX,
    api_pb2.CREATE_CONTAINER,
    api_pb2.UPDATE_CONTAINER,
)

_Req = TypeVar("_Req", bound=Message)


def event_mask(events: tuple[int, ...]) -> int:
    """NRI's EventMask: event ``e`` is bit ``e - 1``."""
    mask = 0
    for event in events:
        mask |= 1 << (event - 1)
    return mask


class PodSource(Protocol):
    """What koordlet knows beyond the sandbox: the watched pod, the node's cpuset pools, its
    effective NodeSLO and its CPU-normalization ratio."""

    def watched_pod(self, uid: str) -> Pod | None: ...

    def cpuset_rule(self) -> CPUSetRule: ...

    def node_slo_spec(self) -> NodeSLOSpec: ...

    def cpu_normalization_ratio(self) -> float | None: ...


class PodCgroups(Protocol):
    """The host side: the pod cgroup and resctrl writes NRI cannot make
    (:class:`koordlet.nri.pod_cgroups.HostPodCgroups`)."""

    def resctrl_info(self) -> ResctrlInfo | None: ...

    def apply(self, pod: Pod, settings: adjust.PodSettings) -> list[str]: ...

    def has_resctrl_group(self, group: str) -> bool: ...

    def remove_resctrl_group(self, group: str) -> None: ...


class Recorder(Protocol):
    def __call__(self, event: str, cpuset: str) -> None: ...


def _unary(request_type: type[_Req], method: Callable[[_Req], Awaitable[Message]]) -> Handler:
    async def handle(payload: bytes) -> bytes:
        request = request_type()
        request.ParseFromString(payload)
        return (await method(request)).SerializeToString()

    return handle


class NRIPlugin:
    def __init__(
        self,
        pods: PodSource,
        *,
        gates: KoordletFeatureGates | None = None,
        pod_cgroups: PodCgroups | None = None,
        be_cpu_manager: bool = False,
        unset_cpu_quota: bool = True,
        record: Recorder | None = None,
    ) -> None:
        self.pods = pods
        self.gates = gates or KoordletFeatureGates()
        self.pod_cgroups = pod_cgroups
        """None: no host access (the pod-level settings are the reconcile's alone)."""
        self.be_cpu_manager = be_cpu_manager
        self.unset_cpu_quota = unset_cpu_quota
        self.record = record
        self.runtime = ""
        self.configured = False

    def handlers(self) -> dict[str, Handler]:
        methods: dict[str, Handler] = {
            "Configure": _unary(api_pb2.ConfigureRequest, self.configure),
            "Synchronize": _unary(api_pb2.SynchronizeRequest, self.synchronize),
            "Shutdown": _unary(api_pb2.Empty, self.shutdown),
            "CreateContainer": _unary(api_pb2.CreateContainerRequest, self.create_container),
            "UpdateContainer": _unary(api_pb2.UpdateContainerRequest, self.update_container),
            "StateChange": _unary(api_pb2.StateChangeEvent, self.state_change),
        }
        return {f"{PLUGIN_SERVICE}/{name}": handler for name, handler in methods.items()}

    async def configure(self, request: api_pb2.ConfigureRequest) -> api_pb2.ConfigureResponse:
        self.runtime = f"{request.runtime_name} {request.runtime_version}".strip()
        self.configured = True
        log.info("NRI: configured by %s", self.runtime or "the runtime")
        return api_pb2.ConfigureResponse(events=event_mask(EVENTS))

    async def synchronize(self, request: api_pb2.SynchronizeRequest) -> api_pb2.SynchronizeResponse:
        # Containers that exist already are the reconcile's, as in Koordinator.
        log.info("NRI: synchronized (%d pods, %d containers)", len(request.pods), len(request.containers))
        return api_pb2.SynchronizeResponse(more=request.more)

    async def shutdown(self, _: api_pb2.Empty) -> api_pb2.Empty:
        log.info("NRI: the runtime is shutting the plugin down")
        return api_pb2.Empty()

    async def state_change(self, event: api_pb2.StateChangeEvent) -> api_pb2.Empty:
        if event.event == api_pb2.RUN_POD_SANDBOX:
            self.run_pod_sandbox(event.pod)
        elif event.event == api_pb2.REMOVE_POD_SANDBOX:
            self.remove_pod_sandbox(event.pod)
        return api_pb2.Empty()

    def inputs(self) -> adjust.NodeQoSInputs:
        resctrl = None
        if self.gates.resctrl_hook and self.pod_cgroups is not None:
            resctrl = self.pod_cgroups.resctrl_info()
        return adjust.NodeQoSInputs(
            spec=self.pods.node_slo_spec(),
            gates=self.gates,
            cpu_normalization_ratio=self.pods.cpu_normalization_ratio(),
            resctrl=resctrl,
        )

    def run_pod_sandbox(self, sandbox: api_pb2.PodSandbox) -> None:
        if self.pod_cgroups is None:
            return
        pod = adjust.sandbox_pod(sandbox, self.pods.watched_pod(sandbox.uid))
        try:
            settings = adjust.pod_settings(pod, self.inputs())
        except (InvalidAnnotation, ValueError) as exc:
            log.warning("NRI: pod %s/%s: settings not applied: %s", sandbox.namespace, sandbox.name, exc)
            return
        if settings.empty():
            return
        written = self.pod_cgroups.apply(pod, settings)
        log.info(
            "NRI: RunPodSandbox %s/%s: %s", sandbox.namespace, sandbox.name, ", ".join(written) or "nothing"
        )

    def remove_pod_sandbox(self, sandbox: api_pb2.PodSandbox) -> None:
        if self.pod_cgroups is None or not self.gates.resctrl_hook:
            return
        self.pod_cgroups.remove_resctrl_group(POD_GROUP_PREFIX + sandbox.uid)

    def settings(
        self, sandbox: api_pb2.PodSandbox, container: api_pb2.Container
    ) -> adjust.ContainerSettings | None:
        pod = adjust.sandbox_pod(sandbox, self.pods.watched_pod(sandbox.uid))
        try:
            settings = adjust.container_settings(
                pod,
                self.pods.cpuset_rule(),
                container=container.name,
                inputs=self.inputs(),
                be_cpu_manager=self.be_cpu_manager,
                unset_cpu_quota=self.unset_cpu_quota,
            )
        except (InvalidAnnotation, ValueError) as exc:
            log.warning("NRI: pod %s/%s: settings not applied: %s", sandbox.namespace, sandbox.name, exc)
            return None
        group = settings.rdt_class if settings is not None else None
        # containerd fails a container whose RDT class does not exist
        if settings is not None and group is not None and not self._has_resctrl_group(group):
            settings = dataclasses.replace(settings, rdt_class=None)
        return settings

    def _has_resctrl_group(self, group: str) -> bool:
        return self.pod_cgroups is not None and self.pod_cgroups.has_resctrl_group(group)

    async def create_container(
        self, request: api_pb2.CreateContainerRequest
    ) -> api_pb2.CreateContainerResponse:
        settings = self.settings(request.pod, request.container)
        if settings is None:
            return api_pb2.CreateContainerResponse()
        log.info(
            "NRI: CreateContainer %s/%s/%s: %s",
            request.pod.namespace,
            request.pod.name,
            request.container.name,
            describe(settings),
        )
        if self.record is not None:
            self.record("CreateContainer", settings.cpuset or "")
        return api_pb2.CreateContainerResponse(adjust=adjust.adjustment(settings))

    async def update_container(
        self, request: api_pb2.UpdateContainerRequest
    ) -> api_pb2.UpdateContainerResponse:
        settings = self.settings(request.pod, request.container)
        update = None if settings is None else adjust.update(request.container.id, settings)
        if settings is None or update is None:
            return api_pb2.UpdateContainerResponse()
        if self.record is not None:
            self.record("UpdateContainer", settings.cpuset or "")
        return api_pb2.UpdateContainerResponse(update=[update])


def describe(settings: adjust.ContainerSettings) -> str:
    parts = []
    if settings.cpuset is not None:
        parts.append(f"cpuset {settings.cpuset}" + (", no CFS quota" if settings.unset_cpu_quota else ""))
    if settings.batch is not None:
        parts.append(
            f"cpu.shares {settings.batch.cpu_shares}, CFS quota {settings.batch.cfs_quota}, "
            f"memory limit {settings.batch.memory_limit}"
        )
    if settings.rdt_class is not None:
        parts.append(f"RDT class {settings.rdt_class}")
    parts += [f"{key}={value}" for key, value in settings.env]
    return ", ".join(parts) or "nothing"
