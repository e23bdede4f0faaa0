"""koordlet's API calls over kubernetes-asyncio: NodeMetric status, a node's pods, the node, its Device,
its NodeResourceTopology.

These are all the calls koordlet makes, and the chart's koordlet ClusterRole allows exactly them
(nodemetrics get/list/watch, nodemetrics/status update, pods list, nodes get, devices get/create/update,
noderesourcetopologies get/create/update, events create; for QoS nodeslos get/list/watch, pods/eviction
create).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config
from pydantic import ValidationError

from apis.core import Node, Pod
from apis.extension.priority import LABEL_POD_PRIORITY_CLASS, priority_class_of
from apis.extension.qos import qos_class_of
from apis.podrequests import pod_requests
from apis.scheduling.device import Device
from apis.slo.nodemetric import NodeMetric, NodeMetricStatus
from apis.slo.nodeslo import NodeSLO
from apis.topology import NodeResourceTopology
from koordlet.reporter import PodMeta

__all__ = ["KoordletClient", "QoSClient", "pod_meta"]

log = logging.getLogger("koordlet")

_NM = NodeMetric.crd
_DEVICE = Device.crd
_NRT = NodeResourceTopology.crd
_M = TypeVar("_M", NodeMetric, Device, NodeResourceTopology)


def pod_meta(pod: Pod) -> PodMeta:
    """A pod's identity with Koordinator's priority and QoS class (defaults derived as koordlet does)."""
    labels = pod.metadata.labels or {}
    qos = qos_class_of(labels, pod.status.qos_class)
    return PodMeta(
        uid=pod.metadata.uid or "",
        name=pod.metadata.name or "",
        namespace=pod.metadata.namespace or "",
        priority=priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos),
        qos=qos,
        requests=pod_requests(pod.spec),
        terminating=pod.metadata.deletion_timestamp is not None
        or pod.status.phase in ("Succeeded", "Failed"),
        node_name=pod.spec.node_name or "",
    )


class KoordletClient:
    def __init__(self, kubeconfig: Path | None) -> None:
        self._kubeconfig = kubeconfig
        self._api: client.ApiClient | None = None

    async def _client(self) -> client.ApiClient:
        if self._api is None:
            configuration = client.Configuration()
            if self._kubeconfig is None:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                await k8s_config.load_kube_config(
                    config_file=str(self._kubeconfig),
                    client_configuration=configuration,
                    persist_config=False,
                )
            self._api = client.ApiClient(configuration)
        return self._api

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None

    async def _get_cluster_object(self, model: type[_M], name: str) -> _M | None:
        """The cluster-scoped object ``name`` of ``model``'s kind; None when there is none."""
        crd = model.crd
        api = client.CustomObjectsApi(await self._client())
        try:
            raw: dict[str, Any] = await api.get_cluster_custom_object(
                crd.group, crd.version, crd.plural, name
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return model.model_validate(raw)

    async def get_node_metric(self, name: str) -> NodeMetric | None:
        """The NodeMetric named after the node; None while koord-manager has not created it."""
        return await self._get_cluster_object(NodeMetric, name)

    async def list_node_metrics(self) -> list[NodeMetric]:
        api = client.CustomObjectsApi(await self._client())
        listed: dict[str, Any] = await api.list_cluster_custom_object(_NM.group, _NM.version, _NM.plural)
        return [NodeMetric.model_validate(item) for item in listed.get("items") or []]

    async def update_status(self, metric: NodeMetric, status: NodeMetricStatus) -> None:
        """Replace the status subresource (optimistic: a conflict raises ApiException 409)."""
        api = client.CustomObjectsApi(await self._client())
        body = metric.to_wire()
        body["status"] = status.to_wire()
        name = metric.metadata.name or ""
        await api.replace_cluster_custom_object_status(_NM.group, _NM.version, _NM.plural, name, body)

    async def pods_on_node(self, node_name: str) -> list[PodMeta]:
        return await self._pods(f"spec.nodeName={node_name}")

    async def all_pods(self) -> list[PodMeta]:
        """Every bound pod (the simulator looks pods of its load file up by name)."""
        return await self._pods("spec.nodeName!=")

    async def _pods(self, field_selector: str) -> list[PodMeta]:
        return [pod_meta(pod) for pod in await self.list_pods(field_selector)]

    async def list_pods(self, field_selector: str) -> list[Pod]:
        """Pods of every namespace matching a field selector (``spec.nodeName=NODE``)."""
        core = client.CoreV1Api(await self._client())
        listed: Any = await core.list_pod_for_all_namespaces(
            field_selector=field_selector, _preload_content=False
        )
        raw: dict[str, Any] = await listed.json()
        return [Pod.model_validate(item) for item in raw.get("items") or []]

    async def node_uid(self, name: str) -> str | None:
        """The UID of node ``name`` (the Device's owner); None when there is no such node."""
        core = client.CoreV1Api(await self._client())
        try:
            node = await core.read_node(name)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        uid: str | None = node.metadata.uid
        return uid

    async def get_node(self, name: str) -> Node | None:
        """Node ``name`` (its allocatable bounds the Prod prediction; labels, annotations and capacity
        shape its NodeResourceTopology); None when there is none."""
        core = client.CoreV1Api(await self._client())
        try:
            raw: Any = await core.read_node(name, _preload_content=False)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return Node.model_validate(await raw.json())

    async def get_device(self, name: str) -> Device | None:
        return await self._get_cluster_object(Device, name)

    async def create_device(self, device: Device) -> None:
        api = client.CustomObjectsApi(await self._client())
        body = device.to_wire()
        await api.create_cluster_custom_object(_DEVICE.group, _DEVICE.version, _DEVICE.plural, body)

    async def update_device(self, device: Device) -> None:
        """Replace the Device (optimistic: a conflict raises ApiException 409)."""
        api = client.CustomObjectsApi(await self._client())
        name = device.metadata.name or ""
        await api.replace_cluster_custom_object(
            _DEVICE.group, _DEVICE.version, _DEVICE.plural, name, device.to_wire()
        )

    async def get_topology(self, name: str) -> NodeResourceTopology | None:
        return await self._get_cluster_object(NodeResourceTopology, name)

    async def create_topology(self, topology: NodeResourceTopology) -> None:
        api = client.CustomObjectsApi(await self._client())
        await api.create_cluster_custom_object(_NRT.group, _NRT.version, _NRT.plural, topology.to_wire())

    async def update_topology(self, topology: NodeResourceTopology) -> None:
        """Replace the NRT (optimistic: a conflict raises ApiException 409)."""
        api = client.CustomObjectsApi(await self._client())
        name = topology.metadata.name or ""
        await api.replace_cluster_custom_object(
            _NRT.group, _NRT.version, _NRT.plural, name, topology.to_wire()
        )

    async def record_event(
        self, *, kind: str, name: str, namespace: str | None, uid: str | None, reason: str, message: str
    ) -> None:
        """A Warning event on a pod (``namespace`` set) or a node (posted in ``default``)."""
        core = client.CoreV1Api(await self._client())
        event_namespace = namespace or "default"
        now = datetime.now(UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}.", namespace=event_namespace),
            involved_object=client.V1ObjectReference(
                api_version="v1", kind=kind, namespace=namespace, name=name, uid=uid
            ),
            reason=reason,
            message=message[:1024],
            type="Warning",
            source=client.V1EventSource(component="koordlet"),
            reporting_component="koordlet",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        await core.create_namespaced_event(event_namespace, event)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"


class QoSClient(KoordletClient):
    """The calls of the QoS manager: NodeSLOs, nodes, full pods, the Eviction API and events.

    The chart's koordlet ClusterRole allows them: nodeslos get/list/watch, nodes get, pods list,
    pods/eviction create, events create.
    """

    async def get_node_slo(self, name: str) -> NodeSLO | None:
        """Raises ValueError naming the field when the NodeSLO does not parse."""
        crd = NodeSLO.crd
        api = client.CustomObjectsApi(await self._client())
        try:
            raw: dict[str, Any] = await api.get_cluster_custom_object(
                crd.group, crd.version, crd.plural, name
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        try:
            return NodeSLO.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(f"NodeSLO {name}: {_first_error(exc)}") from exc

    async def list_node_slos(self) -> list[NodeSLO]:
        crd = NodeSLO.crd
        api = client.CustomObjectsApi(await self._client())
        listed: dict[str, Any] = await api.list_cluster_custom_object(crd.group, crd.version, crd.plural)
        slos = []
        for item in listed.get("items") or []:
            try:
                slos.append(NodeSLO.model_validate(item))
            except ValidationError as exc:
                name = (item.get("metadata") or {}).get("name")
                log.warning("NodeSLO %s skipped: %s", name, _first_error(exc))
        return slos

    async def full_pods(self, node_name: str | None = None) -> list[Pod]:
        """The pods bound to ``node_name`` (every bound pod when None)."""
        core = client.CoreV1Api(await self._client())
        selector = f"spec.nodeName={node_name}" if node_name else "spec.nodeName!="
        listed: Any = await core.list_pod_for_all_namespaces(field_selector=selector, _preload_content=False)
        raw: dict[str, Any] = await listed.json()
        return [Pod.model_validate(item) for item in raw.get("items") or []]

    async def evict(self, namespace: str, name: str) -> None:
        """POST the pod's eviction subresource (policy/v1); ApiException on refusal (429: a PDB)."""
        core = client.CoreV1Api(await self._client())
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        await core.create_namespaced_pod_eviction(name, namespace, body)

    async def pod_event(self, pod: Pod, reason: str, message: str, event_type: str, host: str) -> None:
        core = client.CoreV1Api(await self._client())
        now = datetime.now(UTC)
        meta = pod.metadata
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{meta.name}.", namespace=meta.namespace),
            involved_object=client.V1ObjectReference(
                api_version="v1", kind="Pod", name=meta.name, namespace=meta.namespace, uid=meta.uid
            ),
            reason=reason,
            message=message,
            type=event_type,
            source=client.V1EventSource(component="koordlet", host=host),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        await core.create_namespaced_event(meta.namespace or "default", body)
