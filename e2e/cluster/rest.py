"""Reads (and collection deletes) from a local cluster's API server in process, for the e2e helpers that poll.

A ``kubectl get -o json`` is a Go process start, a discovery read and a TLS handshake: about a
quarter of a second of CPU on these machines, and the waits of the e2e suite ran it thousands of
times. The helpers that poll (``e2e.workloads.pods``, events, nodes) read through this instead:
one keep-alive HTTPS connection per cluster, authenticated with the kubeconfig's client
certificate. kubectl stays where a user would type it.

Writes go the same way where the test harness, not the test, makes them (namespaces, the objects
a scenario sets up): ``apply`` is server-side apply, what ``kubectl apply --server-side`` sends.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["ApiError", "RestClient", "client_for"]

FIELD_MANAGER = "kubectl"
"""What ``kubectl apply --server-side`` names itself: objects the harness applies look as a user's."""


class ApiError(RuntimeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, path: str, body: str) -> None:
        self.status = status
        super().__init__(f"{path}: HTTP {status}: {body[:500]}")


@dataclass(frozen=True)
class _Endpoint:
    host: str
    port: int
    context: ssl.SSLContext


def _endpoint(kubeconfig: Path) -> _Endpoint:
    config = yaml.safe_load(kubeconfig.read_text())
    context_name = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    url = urlsplit(cluster["server"])
    tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
    tls.load_cert_chain(user["client-certificate"], user["client-key"])
    return _Endpoint(url.hostname or "127.0.0.1", url.port or 443, tls)


class RestClient:
    """Requests over one kept-alive connection, opened again after a failure (an API server restart)."""

    def __init__(self, kubeconfig: Path) -> None:
        self._endpoint = _endpoint(kubeconfig)
        self._connection: http.client.HTTPSConnection | None = None
        self._discovery: dict[str, list[dict[str, Any]]] = {}
        """groupVersion path -> its resources as discovery lists them (both lookups below read it)."""
        self._by_name: dict[str, tuple[str, str, bool]] = {}
        self._lock = threading.Lock()

    def get(self, path: str) -> dict[str, Any]:
        """The decoded object or list at ``path``; a list's items get their ``apiVersion`` and
        ``kind``, as ``kubectl get -o json`` prints them. A 429 (``storage is (re)initializing``:
        a CRD's resource just after it is established) is asked again after a second, up to ten
        times, as kubectl (client-go) does with the API server's Retry-After."""
        for attempt in range(1, 11):
            try:
                found = self._call("GET", path)
                break
            except ApiError as exc:
                if exc.status != 429 or attempt == 10:
                    raise
                time.sleep(1.0)
        kind = found.get("kind", "")
        if kind.endswith("List") and isinstance(found.get("items"), list):
            for item in found["items"]:
                item.setdefault("apiVersion", found.get("apiVersion"))
                item.setdefault("kind", kind.removesuffix("List"))
        return found

    def delete_collection(self, path: str) -> dict[str, Any]:
        """DELETE every object of the collection at ``path`` in one request (what ``kubectl
        delete --all`` does with one request per object); the list of what was deleted."""
        return self._call("DELETE", path)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection at ``path``; the object as created."""
        return self._call("POST", path, body, "application/json")

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE the object at ``path`` (the API server's answer: the object or a Status)."""
        return self._call("DELETE", path)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply one manifest (``kubectl apply --server-side --force-conflicts``); its
        namespace defaults to ``default`` where its kind is namespaced. The object as applied."""
        meta = obj["metadata"]
        path = self.object_path(
            obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace") or "default"
        )
        query = f"?fieldManager={FIELD_MANAGER}&force=true"
        return self._call("PATCH", path + query, obj, "application/apply-patch+yaml")

    def object_path(self, api_version: str, kind: str, name: str, namespace: str) -> str:
        """The API path of an object, from discovery (read again once for a kind it does not
        know yet: a CRD established since)."""
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        for fresh in (False, True):
            resources = self._resources(base, fresh)
            if kind in resources:
                plural, namespaced = resources[kind]
                scope = f"/namespaces/{namespace}" if namespaced else ""
                return f"{base}{scope}/{plural}/{name}"
        raise ApiError(404, f"GET {base}", f"the server has no resource of kind {kind} in {api_version}")

    def resource_path(self, resource: str, name: str = "", namespace: str | None = "default") -> str:
        """The API path of what ``kubectl get RESOURCE [NAME] [-n NAMESPACE]`` reads: ``resource``
        as kubectl takes it (plural, singular, short name or kind, optionally ``.group``);
        ``namespace=None`` lists every namespace (``-A``). Read again once for a name discovery
        does not know yet (a CRD established since)."""
        for fresh in (False, True):
            found = self._names(fresh).get(resource.lower())
            if found is not None:
                base, plural, namespaced = found
                scope = f"/namespaces/{namespace}" if namespaced and namespace is not None else ""
                return f"{base}{scope}/{plural}" + (f"/{name}" if name else "")
        raise ApiError(404, "discovery", f'the server doesn\'t have a resource type "{resource}"')

    def _names(self, fresh: bool) -> dict[str, tuple[str, str, bool]]:
        if fresh or not self._by_name:
            bases = [("/api/v1", "")]
            for group in self._call("GET", "/apis")["groups"]:
                bases.append((f"/apis/{group['preferredVersion']['groupVersion']}", group["name"]))
            names: dict[str, tuple[str, str, bool]] = {}
            for base, group in reversed(bases):  # the core group's names win, as with kubectl
                for r in self._listed(base, fresh=True):
                    found = (base, r["name"], bool(r["namespaced"]))
                    spellings = [
                        r["name"],
                        r.get("singularName") or "",
                        r["kind"],
                        *(r.get("shortNames") or []),
                    ]
                    for spelling in filter(None, spellings):
                        names[spelling.lower()] = found
                        if group:
                            names[f"{spelling.lower()}.{group}"] = found
            self._by_name = names
        return self._by_name

    def _resources(self, base: str, fresh: bool) -> dict[str, tuple[str, bool]]:
        """Kind -> (plural, namespaced) in the groupVersion at ``base``."""
        return {r["kind"]: (r["name"], bool(r["namespaced"])) for r in self._listed(base, fresh)}

    def _listed(self, base: str, fresh: bool) -> list[dict[str, Any]]:
        """The resources (no subresources) discovery lists at ``base``; none for a groupVersion the
        server does not serve."""
        if fresh or base not in self._discovery:
            try:
                listed = self._call("GET", base)["resources"]
            except ApiError as exc:
                if exc.status != 404:
                    raise
                listed = []
            self._discovery[base] = [r for r in listed if "/" not in r["name"]]
        return self._discovery[base]

    def _call(
        self, method: str, path: str, payload: dict[str, Any] | None = None, content_type: str = ""
    ) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        with self._lock:
            for attempt in (1, 2):
                try:
                    status, body = self._request(method, path, data, content_type)
                    break
                except (OSError, http.client.HTTPException):
                    self._close()
                    if attempt == 2:
                        raise
        if status not in (200, 201, 202):
            raise ApiError(status, f"{method} {path}", body.decode(errors="replace"))
        found: dict[str, Any] = json.loads(body)
        return found

    def _request(self, method: str, path: str, data: bytes | None, content_type: str) -> tuple[int, bytes]:
        if self._connection is None:
            e = self._endpoint
            self._connection = http.client.HTTPSConnection(e.host, e.port, context=e.context, timeout=30)
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        self._connection.request(method, path, body=data, headers=headers)
        response = self._connection.getresponse()
        return response.status, response.read()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


_CLIENTS: dict[tuple[Path, int], RestClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(kubeconfig: Path) -> RestClient:
    """The client of a kubeconfig as it is now (a cluster started again writes a new one)."""
    key = (kubeconfig, kubeconfig.stat().st_mtime_ns)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = RestClient(kubeconfig)
        return client
