"""The coordination.k8s.io/v1 Lease behind a small seam: ``LeaseStore``, with the API server's
create / conditional-update semantics, in two implementations.

- ``KubernetesLeaseStore``: the Lease ``namespace/name`` on the API server, through the backend's
  shared ApiClient (``KubernetesBackend.api_client``).
- ``InMemoryLeaseStore``: in process, for unit tests.

``apis.client.leader`` runs the election over a ``LeaseStore`` and never talks to the API server.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote

from kubernetes_asyncio import client as k8s_client

from apis.client.backend import Conflict, NotFound
from apis.client.kubernetes import request_json

__all__ = [
    "InMemoryLeaseStore",
    "KubernetesLeaseStore",
    "LeaderElectionError",
    "LeaseConflict",
    "LeaseRecord",
    "LeaseStore",
]


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease's spec (client-go's LeaderElectionRecord) plus the store's version for preconditions."""

    holder_identity: str = ""
    lease_duration_seconds: int = 15
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    lease_transitions: int = 0
    resource_version: str | None = None
    """Opaque; ``LeaseStore.update`` succeeds only if the stored Lease still has this version."""


class LeaseConflict(Exception):
    """The create or update lost a race: the Lease exists already, or changed since it was read."""


class LeaderElectionError(RuntimeError):
    """A problem retrying cannot fix (the Lease's namespace does not exist)."""


class LeaseStore(Protocol):
    """Where the Lease lives; every method may raise BackendError / OSError on transport failures."""

    async def get(self) -> LeaseRecord | None:
        """The current record, or None if there is no Lease."""
        ...

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the Lease; LeaseConflict if it exists. Returns the stored record (new version)."""
        ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the Lease if its version is still ``record.resource_version``, else LeaseConflict."""
        ...


class InMemoryLeaseStore:
    """A LeaseStore in process (unit tests, ``koordctl simulate``), with the API server's
    create / conditional-update semantics."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self._version = 0

    async def get(self) -> LeaseRecord | None:
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        if self.record is not None:
            raise LeaseConflict("the lease already exists")
        return self._store(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        if self.record is None:
            raise LeaseConflict("the lease does not exist")
        if record.resource_version != self.record.resource_version:
            raise LeaseConflict(
                f"the lease changed: version {self.record.resource_version}, not {record.resource_version}"
            )
        return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self._version += 1
        self.record = replace(record, resource_version=str(self._version))
        return self.record

    def __str__(self) -> str:
        return "in-memory lease"


def _micro_time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value is not None else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


class KubernetesLeaseStore:
    """The Lease ``namespace/name`` on the API server, through raw JSON requests on a shared ApiClient
    (kubernetes_asyncio's V1Lease serializes MicroTime without the fraction the server requires).

    The namespace must exist: ``koordinator-system`` (the Helm chart's) by default in the
    configuration, ``kube-system`` is a fine alternative."""

    def __init__(self, api_client: k8s_client.ApiClient, namespace: str, name: str) -> None:
        self._api = api_client
        self.namespace = namespace
        self.name = name
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
        self._path = f"{self._collection}/{quote(name, safe='')}"
        self._last_raw: dict[str, Any] | None = None

    def _record(self, raw: dict[str, Any]) -> LeaseRecord:
        self._last_raw = raw
        spec = raw.get("spec") or {}
        return LeaseRecord(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            lease_transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=(raw.get("metadata") or {}).get("resourceVersion"),
        )

    def _body(self, record: LeaseRecord) -> dict[str, Any]:
        # Start from the object last read so labels and annotations others set survive the PUT.
        raw = dict(self._last_raw or {})
        meta = dict(raw.get("metadata") or {})
        meta.update(name=self.name, namespace=self.namespace)
        if record.resource_version:
            meta["resourceVersion"] = record.resource_version
        else:
            meta.pop("resourceVersion", None)
        spec = {
            "holderIdentity": record.holder_identity,
            "leaseDurationSeconds": record.lease_duration_seconds,
            "acquireTime": _micro_time(record.acquire_time),
            "renewTime": _micro_time(record.renew_time),
            "leaseTransitions": record.lease_transitions,
        }
        return {
            **raw,
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {**(raw.get("spec") or {}), **{k: v for k, v in spec.items() if v is not None}},
        }

    async def get(self) -> LeaseRecord | None:
        try:
            raw = await request_json(self._api, "GET", self._path, what=f"get lease {self}", seconds=10)
        except NotFound:
            self._last_raw = None
            return None
        return self._record(raw)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._last_raw = None
        try:
            raw = await request_json(
                self._api,
                "POST",
                self._collection,
                body=self._body(replace(record, resource_version=None)),
                what=f"create lease {self}",
                seconds=10,
            )
        except Conflict as exc:
            raise LeaseConflict(str(exc)) from exc
        except NotFound as exc:
            raise LeaderElectionError(
                f"cannot create lease {self}: namespace {self.namespace!r} does not exist; create it "
                f"(the Helm chart does) or choose another namespace for leader election ({exc})"
            ) from exc
        return self._record(raw)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            raw = await request_json(
                self._api, "PUT", self._path, body=self._body(record), what=f"update lease {self}", seconds=10
            )
        except (Conflict, NotFound) as exc:
            raise LeaseConflict(str(exc)) from exc
        return self._record(raw)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"
