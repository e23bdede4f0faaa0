"""The descheduler's writes and the few reads the caches cannot answer, over one kubernetes-asyncio
ApiClient (the one the eviction service's backend uses too)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from apis.client.answers import unless_status, went_through
from apis.client.backend import NotFound
from apis.client.kubernetes import request_json
from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation

__all__ = ["DeschedulerApi", "NotFoundError"]

_MERGE_PATCH = "application/merge-patch+json"
_PMJ = PodMigrationJob.crd
_R = Reservation.crd


class NotFoundError(Exception):
    pass


class DeschedulerApi:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._client = api_client
        self._objects = client.CustomObjectsApi(api_client)

    async def create_job(self, body: dict[str, Any]) -> PodMigrationJob:
        raw = await self._objects.create_cluster_custom_object(_PMJ.group, _PMJ.version, _PMJ.plural, body)
        return PodMigrationJob.model_validate(raw)

    async def patch_job(self, name: str, patch: dict[str, Any], *, status: bool = False) -> PodMigrationJob:
        call = (
            self._objects.patch_cluster_custom_object_status
            if status
            else self._objects.patch_cluster_custom_object
        )
        try:
            raw = await call(  # type: ignore[call-arg]
                _PMJ.group, _PMJ.version, _PMJ.plural, name, patch, _content_type=_MERGE_PATCH
            )
        except client.ApiException as exc:
            if exc.status == 404:
                raise NotFoundError(name) from None
            raise
        return PodMigrationJob.model_validate(raw)

    async def delete_job(self, name: str) -> None:
        await went_through(
            self._objects.delete_cluster_custom_object(_PMJ.group, _PMJ.version, _PMJ.plural, name), 404
        )

    async def get_reservation(self, name: str) -> Reservation | None:
        raw = await unless_status(
            404, self._objects.get_cluster_custom_object(_R.group, _R.version, _R.plural, name)
        )
        return None if raw is None else Reservation.model_validate(raw)

    async def create_reservation(self, body: dict[str, Any]) -> Reservation:
        """Create it; one of that name already there (an earlier try) is returned instead."""
        try:
            raw = await self._objects.create_cluster_custom_object(_R.group, _R.version, _R.plural, body)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
            existing = await self.get_reservation(body["metadata"]["name"])
            if existing is None:
                raise
            return existing
        return Reservation.model_validate(raw)

    async def delete_reservation(self, name: str) -> None:
        await went_through(
            self._objects.delete_cluster_custom_object(_R.group, _R.version, _R.plural, name), 404
        )

    async def list_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as the API server has it now, listed by name (the informers' ``list``
        permission); None when there is none."""
        listed = await request_json(
            self._client,
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            what=f"list pod {namespace}/{name}",
            query=[("fieldSelector", f"metadata.name={name}")],
        )
        items: list[dict[str, Any]] = listed.get("items") or []
        return items[0] if items else None

    async def listed_keys(self, path: str) -> set[tuple[str, str]]:
        """(namespace, name) of every object the collection ``path`` lists now (the informers' own
        ``list`` permission), for the caches' sync gate."""
        listed = await request_json(self._client, "GET", path, what=f"list {path}")
        items: list[dict[str, Any]] = listed.get("items") or []
        return {
            (
                (item.get("metadata") or {}).get("namespace") or "",
                (item.get("metadata") or {}).get("name") or "",
            )
            for item in items
        }

    async def scale_replicas(self, api_version: str, kind: str, namespace: str, name: str) -> int:
        """``spec.replicas`` of the ``/scale`` subresource of any controller; 0 when the kind has none
        or the object is gone (Koordinator's scale finder)."""
        group, _, version = api_version.rpartition("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            resources = await request_json(self._client, "GET", base, what=f"discover {api_version}")
            plural = next(
                (
                    r["name"]
                    for r in resources.get("resources", [])
                    if r.get("kind") == kind and "/" not in r["name"]
                ),
                None,
            )
            if plural is None:
                return 0
            scale = await request_json(
                self._client,
                "GET",
                f"{base}/namespaces/{namespace}/{plural}/{name}/scale",
                what=f"get the scale of {kind} {namespace}/{name}",
            )
        except NotFound:
            return 0
        return int((scale.get("spec") or {}).get("replicas") or 0)
