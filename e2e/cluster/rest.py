"""Reads (and collection deletes) from a local cluster's API server in process, for the e2e helpers that poll.

A ``kubectl get -o json`` is a Go process start, a discovery read and a TLS handshake: about a
quarter of a second of CPU on these machines, and the waits of the e2e suite ran it thousands of
times. The helpers that poll (``e2e.workloads.pods``, events, nodes) read through this instead:
one keep-alive HTTPS connection per cluster, authenticated with the kubeconfig's client
certificate. kubectl stays where a user would type it.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["ApiError", "RestClient", "client_for"]


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
        self._lock = threading.Lock()

    def get(self, path: str) -> dict[str, Any]:
        """The decoded object or list at ``path``; a list's items get their ``apiVersion`` and
        ``kind``, as ``kubectl get -o json`` prints them."""
        found = self._call("GET", path)
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

    def _call(self, method: str, path: str) -> dict[str, Any]:
        with self._lock:
            for attempt in (1, 2):
                try:
                    status, body = self._request(method, path)
                    break
                except (OSError, http.client.HTTPException):
                    self._close()
                    if attempt == 2:
                        raise
        if status != 200:
            raise ApiError(status, f"{method} {path}", body.decode(errors="replace"))
        found: dict[str, Any] = json.loads(body)
        return found

    def _request(self, method: str, path: str) -> tuple[int, bytes]:
        if self._connection is None:
            e = self._endpoint
            self._connection = http.client.HTTPSConnection(e.host, e.port, context=e.context, timeout=30)
        self._connection.request(method, path, headers={"Accept": "application/json"})
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
