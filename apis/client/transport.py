"""One request on a kubernetes_asyncio ``ApiClient``'s aiohttp session, without ``call_api``.

``ApiClient.call_api`` does on every call what a raw JSON client does not need: it sanitizes the
headers, the query and the body (a recursive copy of the body), matches the content type with a
regular expression and has aiohttp parse and requote the URL string it built. On the scheduler's
hot path (one binding and one event per pod) that was about a tenth of each request's CPU. ``send``
puts the same request on the wire (URL, headers, body bytes, timeout, proxy and TLS server name of
the client's REST client) straight through the client's session:

- authentication is the client's, asked for on every request through ``update_params_for_auth``
  as ``call_api`` does, so a bearer token that the kubeconfig loader refreshes (exec plugins,
  token files) or that a ``refresh_api_key_hook`` renews is used from the next request on; client
  certificates live in the session's connector, as before;
- the body is serialized by ``json.dumps`` as the REST client does; a value JSON has no type for
  (a datetime, a generated model) is sanitized as ``call_api`` would, and only then;
- the URL is the REST client's: the host, the path and the ``urlencode``-d query, as a string
  that aiohttp parses (and requotes) as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
from kubernetes_asyncio import client as k8s_client

__all__ = ["JSON", "send"]

JSON: Final = "application/json"
_AUTH_SETTINGS: Final = ["BearerToken"]
"""What ``call_api`` is told for every Kubernetes API: the bearer token, when there is one."""
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH", "OPTIONS", "DELETE"})
"""The methods whose body the REST client sends (it drops a GET's)."""


async def send(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str = JSON,
    client_timeout: aiohttp.ClientTimeout,
    headers: Mapping[str, str] | None = None,
) -> aiohttp.ClientResponse:
    """``method path`` with ``query`` and the JSON ``body`` (and ``headers`` over the client's);
    the raw aiohttp response, unread: the caller reads the body and must look at ``status`` (no
    status raises here)."""
    headers = {"Accept": JSON, "Content-Type": content_type, **api.default_headers, **(headers or {})}
    if api.cookie:
        headers["Cookie"] = api.cookie
    params = list(query)
    await api.update_params_for_auth(headers, params, _AUTH_SETTINGS)
    url = (api.configuration.host or "") + path
    if params:
        url += "?" + urlencode(params)
    rest = api.rest_client
    options: dict[str, Any] = {}
    if rest.proxy:
        options["proxy"] = rest.proxy
    if rest.proxy_headers:
        options["proxy_headers"] = rest.proxy_headers
    if rest.server_hostname:
        options["server_hostname"] = rest.server_hostname
    data = None
    if body is not None and method in _WITH_BODY:
        data = json.dumps(body, default=api.sanitize_for_serialization).encode()
    response: aiohttp.ClientResponse = await rest.pool_manager.request(
        method, url, headers=headers, data=data, timeout=client_timeout, **options
    )
    return response
