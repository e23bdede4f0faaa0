"""The descheduler handle's ``ClusterObjects`` over kubernetes-asyncio (in the style of
``operators.clients``): the API calls GangDefragmentation makes beyond the informer caches."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from apis.client.answers import unless_status, went_through
from apis.core import Pod
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podgroup import PodGroup
from apis.scheduling.reservation import Reservation
from operators.descheduler.framework import ClusterObjects

__all__ = ["KubeClusterObjects", "kube_client"]

_MERGE_PATCH = "application/merge-patch+json"
_PG = PodGroup.crd
_CNT = ClusterNetworkTopology.crd
_RESERVATION = Reservation.crd


class KubeClusterObjects:
    """Over an ``ApiClient`` the process opened (one connection for the whole process)."""

    def __init__(self, api: client.ApiClient, component: str = "koord-descheduler") -> None:
        self._api = api
        self._objects = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._component = component

    async def pod_groups(self) -> list[PodGroup]:
        listed: dict[str, Any] = await self._objects.list_cluster_custom_object(
            _PG.group, _PG.version, _PG.plural
        )
        return [PodGroup.model_validate(item) for item in listed.get("items") or []]

    async def unbound_pods(self) -> list[Pod]:
        listed = await self._core.list_pod_for_all_namespaces(field_selector="spec.nodeName=")
        raw = self._api.sanitize_for_serialization(listed.items)
        return [Pod.model_validate(item) for item in raw]

    async def topology(self) -> ClusterNetworkTopology | None:
        raw = await unless_status(
            404, self._objects.get_cluster_custom_object(_CNT.group, _CNT.version, _CNT.plural, "default")
        )
        return None if raw is None else ClusterNetworkTopology.model_validate(raw)

    async def reservations(self, label_selector: str) -> list[Reservation]:
        listed: dict[str, Any] = await self._objects.list_cluster_custom_object(
            _RESERVATION.group, _RESERVATION.version, _RESERVATION.plural, label_selector=label_selector
        )
        return [Reservation.model_validate(item) for item in listed.get("items") or []]

    async def create_reservation(self, reservation: Reservation) -> bool:
        body = reservation.model_dump(by_alias=True, exclude_none=True, mode="json")
        return await went_through(
            self._objects.create_cluster_custom_object(
                _RESERVATION.group, _RESERVATION.version, _RESERVATION.plural, body
            ),
            409,
        )

    async def delete_reservation(self, name: str) -> None:
        await went_through(
            self._objects.delete_cluster_custom_object(
                _RESERVATION.group, _RESERVATION.version, _RESERVATION.plural, name
            ),
            404,
        )

    async def annotate_pod_group(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        await went_through(
            # The stubs leave out the generated client's documented ``_content_type`` keyword.
            self._objects.patch_namespaced_custom_object(  # type: ignore[call-arg]
                _PG.group,
                _PG.version,
                namespace,
                _PG.plural,
                name,
                {"metadata": {"annotations": annotations}},
                _content_type=_MERGE_PATCH,
            ),
            404,
        )

    async def pod_group_event(
        self, pod_group: PodGroup, reason: str, message: str, type_: str = "Normal"
    ) -> None:
        now = datetime.now(UTC)
        namespace = pod_group.metadata.namespace or "default"
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{pod_group.metadata.name}.", namespace=namespace),
            involved_object=client.V1ObjectReference(
                api_version=f"{_PG.group}/{_PG.version}",
                kind=_PG.kind,
                namespace=namespace,
                name=pod_group.metadata.name,
                uid=pod_group.metadata.uid,
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            source=client.V1EventSource(component=self._component),
            reporting_component=self._component,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        await self._core.create_namespaced_event(namespace, event)


def kube_client(api: client.ApiClient) -> ClusterObjects:
    """What the descheduler process's handles offer as ``objects`` (typed as the protocol, so mypy
    checks that the implementation keeps to it)."""
    return KubeClusterObjects(api)
