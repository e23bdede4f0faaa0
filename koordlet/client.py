"""koordlet's API calls over kubernetes-asyncio: the lists and watches of its informers
(``koordlet.states``), NodeMetric status, its Device, its NodeResourceTopology, evictions and events.

These are all the calls koordlet makes, and the chart's koordlet ClusterRole allows exactly them
(nodes, pods, nodemetrics, nodeslos and noderesourcetopologies list/watch; nodemetrics/status update;
nodes get, devices get/create/update, noderesourcetopologies create/update; pods/eviction and events
create). Each request is counted in ``koordlet_kube_api_requests_total{verb,resource}``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from apis.client.answers import unless_status
from apis.client.connection import client_configuration
from apis.client.watch import Gone, decode_event_line, event_lines, watch_query
from apis.core import Node, Pod
from apis.scheduling.device import Device
from apis.slo.nodemetric import NodeMetric, NodeMetricStatus
from apis.topology import NodeResourceTopology
from koordlet.apirequests import CountingApiClient
from koordlet.states.resources import Resource, resource_path

__all__ = ["KoordletClient", "QoSClient"]

log = logging.getLogger("koordlet")

_NM = NodeMetric.crd
_DEVICE = Device.crd
_NRT = NodeResourceTopology.crd
_LIST_TIMEOUT_SECONDS = 120.0
_WATCH_TIMEOUT_SECONDS = 300


class KoordletClient:
    def __init__(self, kubeconfig: Path | None, on_request: Callable[[str, str], None] | None = None) -> None:
        self._kubeconfig = kubeconfig
        self._on_request = on_request or (lambda _verb, _resource: None)
        self._api: client.ApiClient | None = None

    async def _client(self) -> client.ApiClient:
        if self._api is None:
            self._api = CountingApiClient(await client_configuration(self._kubeconfig), self._on_request)
        return self._api

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None

    async def _raw(
        self, path: str, query: list[tuple[str, str]], limits: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        api = await self._client()
        response: aiohttp.ClientResponse = await api.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=limits,
        )
        return response

    async def list_raw(
        self, resource: Resource, field_selector: str | None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of ``resource`` matching ``field_selector`` and the list's resourceVersion."""
        query = [("fieldSelector", field_selector)] if field_selector else []
        timeout = aiohttp.ClientTimeout(total=_LIST_TIMEOUT_SECONDS)
        async with await self._raw(resource_path(resource), query, timeout) as response:
            if response.status != 200:
                text = await response.text()
                raise client.ApiException(status=response.status, reason=f"list {resource.plural}: {text}")
            listed: dict[str, Any] = await response.json()
        items = [item for item in listed.get("items") or [] if isinstance(item, dict)]
        return items, str((listed.get("metadata") or {}).get("resourceVersion") or "")

    async def watch_raw(
        self, resource: Resource, field_selector: str | None, resource_version: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events from ``resource_version`` until the server ends the watch (after
        ``timeoutSeconds``); Gone on HTTP 410."""
        query = watch_query(
            resource_version, timeout_seconds=_WATCH_TIMEOUT_SECONDS, field_selector=field_selector
        )
        # no total timeout: a read silent for longer than the server's own timeout is a dead peer
        timeout = aiohttp.ClientTimeout(total=None, sock_read=_WATCH_TIMEOUT_SECONDS + 60)
        async with await self._raw(resource_path(resource), query, timeout) as response:
            if response.status == 410:
                raise Gone("HTTP 410")
            if response.status != 200:
                text = await response.text()
                raise client.ApiException(status=response.status, reason=f"watch {resource.plural}: {text}")
            async for line in event_lines(response.content.iter_any()):
                yield decode_event_line(line)

    async def update_status(self, metric: NodeMetric, status: NodeMetricStatus) -> None:
        """Replace the status subresource (optimistic: a conflict raises ApiException 409)."""
        api = client.CustomObjectsApi(await self._client())
        body = metric.to_wire()
        body["status"] = status.to_wire()
        name = metric.metadata.name or ""
        await api.replace_cluster_custom_object_status(_NM.group, _NM.version, _NM.plural, name, body)

    async def node_uid(self, name: str) -> str | None:
        """The UID of node ``name`` (the Device's owner); None when there is no such node."""
        core = client.CoreV1Api(await self._client())
        node = await unless_status(404, core.read_node(name))
        uid: str | None = node.metadata.uid if node is not None else None
        return uid

    async def get_device(self, name: str) -> Device | None:
        crd = Device.crd
        api = client.CustomObjectsApi(await self._client())
        raw: dict[str, Any] | None = await unless_status(
            404, api.get_cluster_custom_object(crd.group, crd.version, crd.plural, name)
        )
        return None if raw is None else Device.model_validate(raw)

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


class QoSClient(KoordletClient):
    """The calls of the QoS manager: NodeSLOs, nodes, full pods, the Eviction API and events.

    The chart's koordlet ClusterRole allows them: nodeslos get/list/watch, nodes get, pods list,
    pods/eviction create, events create.
    """

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

    async def node_event(self, node: Node, reason: str, message: str) -> None:
        await self.record_event(
            kind="Node",
            name=node.metadata.name or "",
            namespace=None,
            uid=node.metadata.uid,
            reason=reason,
            message=message,
        )
