"""The few API calls koord-manager makes outside Kopf's own patching, over kubernetes-asyncio:
each client holds one connection, opened on first use and kept open.

Kopf patches the object a handler runs for; creating and patching other objects (the built-in
quotas, a profile's tree root) and reading a quota the index has not seen yet go through here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from kubernetes_asyncio import client

from apis.base import CRDInfo
from apis.client.answers import unless_status, went_through
from apis.client.connection import client_configuration
from apis.core import PriorityClass
from apis.extension.quota import LABEL_QUOTA_TREE_ID
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.scheduling.device import Device
from apis.scheduling.elasticquota import ElasticQuota
from apis.scheduling.reservation import Reservation
from apis.slo.nodemetric import NodeMetric
from apis.slo.nodeslo import NodeSLO
from apis.slo.sloconfig import SLO_CONFIG_NAME, SLO_CONFIG_NAMESPACE
from apis.topology import NodeResourceTopology
from operators.config import ManagerConfig

__all__ = [
    "CPUNormalizationClient",
    "ColocationClient",
    "DeviceNodeClient",
    "NodeMetricClient",
    "NodeResourceClient",
    "NodeSLOClient",
    "PodClient",
    "QuotaClient",
    "ReservationClient",
    "load_configuration",
]

_MERGE_PATCH = "application/merge-patch+json"
_EQ = ElasticQuota.crd
_EQP = ElasticQuotaProfile.crd
_RESERVATION = Reservation.crd
_NM = NodeMetric.crd
_NSLO = NodeSLO.crd
_DEVICE = Device.crd
_NRT = NodeResourceTopology.crd

_T = TypeVar("_T")


async def load_configuration(config: ManagerConfig) -> client.Configuration:
    """The kubeconfig's credentials, or the pod's service account when there is none."""
    return await client_configuration(config.kubeconfig)


class _Clients:
    """One connection to the API server, opened on first use and kept open, with the typed APIs
    over it."""

    def __init__(self, config: ManagerConfig) -> None:
        self._config = config
        self._api_client: client.ApiClient | None = None

    async def _client(self) -> client.ApiClient:
        if self._api_client is None:
            self._api_client = client.ApiClient(await load_configuration(self._config))
        return self._api_client

    async def _objects(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(await self._client())

    async def _core(self) -> client.CoreV1Api:
        return client.CoreV1Api(await self._client())

    async def _get_cluster_object(self, crd: CRDInfo, name: str) -> dict[str, Any] | None:
        """The cluster-scoped custom object ``name`` of ``crd``; None when there is none."""
        api = await self._objects()
        found: dict[str, Any] | None = await unless_status(
            404, api.get_cluster_custom_object(crd.group, crd.version, crd.plural, name)
        )
        return found

    async def _create_cluster_object(self, crd: CRDInfo, body: dict[str, Any]) -> bool:
        """Create ``body``; False when one of that name already exists."""
        api = await self._objects()
        return await went_through(
            api.create_cluster_custom_object(crd.group, crd.version, crd.plural, body), 409
        )

    async def _delete_cluster_object(self, crd: CRDInfo, name: str) -> bool:
        """Delete the custom object ``name`` of ``crd``; False when there was none."""
        api = await self._objects()
        return await went_through(
            api.delete_cluster_custom_object(crd.group, crd.version, crd.plural, name), 404
        )

    async def slo_config_map(self) -> dict[str, Any] | None:
        """``slo-controller-config`` as the API server sends it; None when it does not exist (the
        controllers read it once, before its watch event may have come)."""
        core = await self._core()
        found = await unless_status(
            404, core.read_namespaced_config_map(SLO_CONFIG_NAME, SLO_CONFIG_NAMESPACE)
        )
        if found is None:
            return None
        raw: dict[str, Any] = (await self._client()).sanitize_for_serialization(found)
        return raw

    async def _patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> None:
        core = await self._core()
        # The stubs leave out the generated client's documented ``_content_type`` keyword.
        if status:
            await core.patch_node_status(name, patch, _content_type=_MERGE_PATCH)  # type: ignore[call-arg]
        else:
            await core.patch_node(name, patch, _content_type=_MERGE_PATCH)  # type: ignore[call-arg]


class QuotaClient(_Clients):
    """ElasticQuota reads and writes (and the profiles of a tree)."""

    async def get(self, namespace: str, name: str) -> ElasticQuota | None:
        api = await self._objects()
        raw = await unless_status(
            404, api.get_namespaced_custom_object(_EQ.group, _EQ.version, namespace, _EQ.plural, name)
        )
        return None if raw is None else ElasticQuota.model_validate(raw)

    async def find(self, name: str) -> ElasticQuota | None:
        """The quota called ``name`` in any namespace (quota names are unique across namespaces)."""
        api = await self._objects()
        listed: dict[str, Any] = await api.list_cluster_custom_object(
            _EQ.group, _EQ.version, _EQ.plural, field_selector=f"metadata.name={name}"
        )
        items = listed.get("items") or []
        return ElasticQuota.model_validate(items[0]) if items else None

    async def profiles_of_tree(self, tree_id: str) -> list[ElasticQuotaProfile]:
        """The ElasticQuotaProfiles labelled with ``tree_id`` (any namespace)."""
        api = await self._objects()
        listed: dict[str, Any] = await api.list_cluster_custom_object(
            _EQP.group, _EQP.version, _EQP.plural, label_selector=f"{LABEL_QUOTA_TREE_ID}={tree_id}"
        )
        return [ElasticQuotaProfile.model_validate(item) for item in listed.get("items") or []]

    async def create(self, quota: ElasticQuota) -> bool:
        """Create ``quota``; False when one of that name already exists."""
        api = await self._objects()
        body = quota.model_dump(by_alias=True, exclude_none=True, mode="json")
        return await went_through(
            api.create_namespaced_custom_object(
                _EQ.group, _EQ.version, quota.metadata.namespace or "", _EQ.plural, body
            ),
            409,
        )

    async def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        api = await self._objects()
        # The stubs leave out the generated client's documented ``_content_type`` keyword.
        await api.patch_namespaced_custom_object(  # type: ignore[call-arg]
            _EQ.group, _EQ.version, namespace, _EQ.plural, name, patch, _content_type=_MERGE_PATCH
        )


class PodClient(_Clients):
    """Pod names for the quota admission rules that need them (Koordinator's webhook lists pods
    from its cache at that moment too)."""

    async def labelled(self, key: str, value: str) -> list[str]:
        """Every pod (any namespace, any phase) labelled ``key=value``, by name."""
        api = await self._core()
        listed = await api.list_pod_for_all_namespaces(label_selector=f"{key}={value}")
        return [pod.metadata.name for pod in listed.items]

    async def any_in(self, namespace: str) -> bool:
        """Whether ``namespace`` has a pod (any phase)."""
        api = await self._core()
        listed = await api.list_namespaced_pod(namespace, limit=1)
        return bool(listed.items)


class ReservationClient(_Clients):
    """Reservation status writes and deletions (cluster-scoped)."""

    async def replace_status(self, body: dict[str, Any]) -> None:
        """PUT ``body`` (a whole object with its resourceVersion) to the status subresource: the API
        server refuses it with 409 when the object changed since it was read."""
        api = await self._objects()
        name = body["metadata"]["name"]
        await api.replace_cluster_custom_object_status(
            _RESERVATION.group, _RESERVATION.version, _RESERVATION.plural, name, body
        )

    async def delete(self, name: str, uid: str) -> None:
        """Delete the reservation if it is still the one with ``uid``; a reservation already gone is
        no error."""
        api = await self._objects()
        await went_through(
            api.delete_cluster_custom_object(
                _RESERVATION.group,
                _RESERVATION.version,
                _RESERVATION.plural,
                name,
                body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)),
            ),
            404,
        )


class NodeMetricClient(_Clients):
    """NodeMetric creation, collect policy patches and deletion (one per node)."""

    async def create(self, metric: NodeMetric) -> bool:
        """Create ``metric``; False when one of that name already exists."""
        return await self._create_cluster_object(_NM, metric.to_wire())

    async def delete(self, name: str) -> bool:
        """Delete the NodeMetric ``name``; False when there was none."""
        return await self._delete_cluster_object(_NM, name)

    async def patch(self, name: str, patch: dict[str, Any]) -> None:
        """Merge-patch the NodeMetric ``name``."""
        api = await self._objects()
        # The stubs leave out the generated client's documented ``_content_type`` keyword.
        await api.patch_cluster_custom_object(  # type: ignore[call-arg]
            _NM.group, _NM.version, _NM.plural, name, patch, _content_type=_MERGE_PATCH
        )


class DeviceNodeClient(_Clients):
    """Device reads and node patches for the device resources (status subresource) and labels."""

    async def get_device(self, name: str) -> Device | None:
        raw = await self._get_cluster_object(_DEVICE, name)
        return None if raw is None else Device.model_validate(raw)

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        await self._patch_node(name, patch, status=True)

    async def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        await self._patch_node(name, patch)


class NodeSLOClient(_Clients):
    """NodeSLO reads and writes (one per node) and the ``slo-controller-config`` ConfigMap read."""

    async def get(self, name: str) -> dict[str, Any] | None:
        return await self._get_cluster_object(_NSLO, name)

    async def create(self, slo: NodeSLO) -> bool:
        """Create ``slo``; False when one of that name already exists."""
        return await self._create_cluster_object(_NSLO, slo.to_wire())

    async def replace(self, body: dict[str, Any]) -> None:
        """PUT ``body`` (a whole object with its resourceVersion): 409 when it changed since read."""
        api = await self._objects()
        name = body["metadata"]["name"]
        await api.replace_cluster_custom_object(_NSLO.group, _NSLO.version, _NSLO.plural, name, body)

    async def delete(self, name: str) -> bool:
        """Delete the NodeSLO ``name``; False when there was none."""
        return await self._delete_cluster_object(_NSLO, name)


class ColocationClient(_Clients):
    """What the colocation profile webhook reads beside its indexes: a PriorityClass a profile
    names, and the labels of a namespace the index has not seen yet."""

    async def priority_class(self, name: str) -> PriorityClass | None:
        """The PriorityClass ``name``; None when there is none."""
        api_client = await self._client()
        found = await unless_status(404, client.SchedulingV1Api(api_client).read_priority_class(name))
        return (
            None
            if found is None
            else PriorityClass.model_validate(api_client.sanitize_for_serialization(found))
        )

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        """The labels of namespace ``name``; None when there is no such namespace."""
        core = await self._core()
        found = await unless_status(404, core.read_namespace(name))
        return None if found is None else dict(found.metadata.labels or {})


class CPUNormalizationClient(_Clients):
    """What the CPU normalization controller reads before its watches have delivered it (the
    ConfigMap, a node's NodeResourceTopology) and its node annotation patches."""

    async def get_nrt_annotations(self, name: str) -> dict[str, str] | None:
        """The annotations of the node's NodeResourceTopology; None when there is none."""
        raw = await self._get_cluster_object(_NRT, name)
        return None if raw is None else dict((raw.get("metadata") or {}).get("annotations") or {})

    async def patch_node_annotations(self, name: str, annotations: dict[str, str | None]) -> None:
        """Merge-patch the node's annotations (None removes one)."""
        await self._patch_node(name, {"metadata": {"annotations": annotations}})


class NodeResourceClient(_Clients):
    """The node resource controller's reads and writes: the node's status subresource and the
    node's NodeResourceTopology (its pods come from Kopf's index, not from here)."""

    async def patch_node_status(self, name: str, patch: dict[str, Any]) -> None:
        await self._patch_node(name, patch, status=True)

    async def get_topology(self, name: str) -> dict[str, Any] | None:
        return await self._get_cluster_object(_NRT, name)

    async def replace_topology(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """PUT ``body`` (a whole NRT with its resourceVersion); None when it changed since read (409)."""
        api = await self._objects()
        name = body["metadata"]["name"]
        written: dict[str, Any] | None = await unless_status(
            409, api.replace_cluster_custom_object(_NRT.group, _NRT.version, _NRT.plural, name, body)
        )
        return written
