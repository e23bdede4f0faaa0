"""``apis.client.transport.send`` puts on the wire what ``ApiClient.call_api`` did: the same method,
path and query, headers and body bytes, with the client's authentication asked for per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s_client

from apis.client.transport import send


@dataclass(frozen=True)
class Seen:
    method: str
    path_qs: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@pytest_asyncio.fixture(loop_scope="function")
async def served() -> AsyncIterator[tuple[list[Seen], k8s_client.ApiClient]]:
    seen: list[Seen] = []

    async def record(request: web.Request) -> web.StreamResponse:
        headers = tuple((k, v) for k, v in request.headers.items() if k not in ("Host",))
        seen.append(Seen(request.method, request.raw_path, headers, await request.read()))
        return web.json_response({"kind": "Status"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    configuration = k8s_client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.port}"
    configuration.api_key = {"BearerToken": "token-1"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    api = k8s_client.ApiClient(configuration)
    api.user_agent = "koord-scheduler/test"
    try:
        yield seen, api
    finally:
        await api.close()
        await server.close()


TIMEOUT = aiohttp.ClientTimeout(total=10)

REQUESTS: list[dict[str, Any]] = [
    {"method": "GET", "path": "/api/v1/pods", "query": [("watch", "true"), ("resourceVersion", "7")]},
    {
        "method": "GET",
        "path": "/api/v1/pods",
        "query": [("fieldSelector", "spec.nodeName=node a,status.phase!=Failed"), ("limit", "500")],
    },
    {
        "method": "POST",
        "path": "/api/v1/namespaces/ns/pods/p%2Fq/binding",
        "body": {"apiVersion": "v1", "kind": "Binding", "target": {"name": "n1", "note": "ü"}},
    },
    {
        "method": "PATCH",
        "path": "/api/v1/namespaces/ns/pods/p/status",
        "body": {"status": {"nominatedNodeName": None, "since": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}},
        "content_type": "application/strategic-merge-patch+json",
    },
    {"method": "DELETE", "path": "/api/v1/namespaces/ns/pods/p", "body": {"kind": "DeleteOptions"}},
    {"method": "POST", "path": "/api/v1/namespaces", "body": {}},
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: f"{r['method']} {r['path']}")
async def test_the_wire_is_what_call_api_sent(
    served: tuple[list[Seen], k8s_client.ApiClient], request_: dict[str, Any]
) -> None:
    seen, api = served
    content_type = request_.get("content_type", "application/json")
    response = await api.call_api(
        request_["path"],
        request_["method"],
        query_params=list(request_.get("query", ())),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=request_.get("body"),
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=TIMEOUT,
    )
    response.release()
    sent = await send(
        api,
        request_["method"],
        request_["path"],
        query=request_.get("query", ()),
        body=request_.get("body"),
        content_type=content_type,
        client_timeout=TIMEOUT,
    )
    sent.release()
    assert seen[1] == seen[0]
    assert ("Authorization", "Bearer token-1") in seen[1].headers
    assert ("User-Agent", "koord-scheduler/test") in seen[1].headers


async def test_a_refreshed_token_is_used_from_the_next_request_on(
    served: tuple[list[Seen], k8s_client.ApiClient],
) -> None:
    seen, api = served
    for _ in range(2):
        (await send(api, "GET", "/api/v1/nodes", client_timeout=TIMEOUT)).release()
        # The kubeconfig loader's refresh task replaces the key in place.
        api.configuration.api_key["BearerToken"] = "token-2"
    refreshed = iter(["token-3", "token-4"])

    def hook(configuration: k8s_client.Configuration) -> None:  # the in-cluster loader's way
        configuration.api_key["BearerToken"] = next(refreshed)

    api.configuration.refresh_api_key_hook = hook
    for _ in range(2):
        (await send(api, "GET", "/api/v1/nodes", client_timeout=TIMEOUT)).release()
    tokens = [dict(s.headers)["Authorization"] for s in seen]
    assert tokens == ["Bearer token-1", "Bearer token-2", "Bearer token-3", "Bearer token-4"]
