"""Count koordlet's requests to the API server by Kubernetes verb and resource.

Every call of :class:`koordlet.client.KoordletClient` goes through one kubernetes-asyncio
``ApiClient``; :class:`CountingApiClient` names each request as the API server's audit log would
(``list``/``watch``/``get``/``create``/``update``/``patch``/``delete``; ``pods``, ``pods/eviction``,
``nodemetrics/status``) before sending it, so ``koordlet_kube_api_requests_total`` shows what
koordlet costs the API server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes_asyncio import client

__all__ = ["CountingApiClient", "request_labels"]

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_labels(method: str, path: str, query: Sequence[tuple[str, Any]] | None) -> tuple[str, str]:
    """``(verb, resource)`` of a request to ``path`` (``/api/v1/...`` or ``/apis/GROUP/VERSION/...``)."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced object: namespaces/NS/RESOURCE/...
    resource = rest[0] if rest else ""
    named = len(rest) >= 2
    if len(rest) >= 3:
        resource = f"{resource}/{rest[2]}"
    method = method.upper()
    if method == "GET":
        watching = any(key == "watch" and str(value).lower() in ("true", "1") for key, value in query or ())
        verb = "watch" if watching else "get" if named else "list"
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return verb, resource


class CountingApiClient(client.ApiClient):
    """An ApiClient that reports each request's verb and resource to ``on_request``."""

    def __init__(self, configuration: client.Configuration, on_request: Callable[[str, str], None]) -> None:
        super().__init__(configuration)
        self._on_request = on_request

    def call_api(  # type: ignore[no-untyped-def]
        self,
        resource_path: str,
        method: str,
        path_params: Mapping[str, Any] | None = None,
        query_params: Sequence[tuple[str, Any]] | None = None,
        *args,
        **kwargs,
    ):
        path = resource_path
        for key, value in (path_params or {}).items():
            path = path.replace("{" + key + "}", str(value))
        self._on_request(*request_labels(method, path, query_params))
        return super().call_api(resource_path, method, path_params, query_params, *args, **kwargs)
