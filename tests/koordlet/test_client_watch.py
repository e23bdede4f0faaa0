"""koordlet's client against a small HTTP API server: the raw list and watch the informers use,
410 Gone, an event longer than aiohttp's line limit, and every request counted by verb and resource."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from apis.client.watch import Gone
from koordlet.client import KoordletClient
from koordlet.states.resources import RESOURCES, Kind

BIG = "x" * 300_000  # over aiohttp's 128 KiB line limit


def _node(name: str, rv: str, note: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": rv, "annotations": {"note": note}}}


async def _nodes(request: web.Request) -> web.StreamResponse:
    query = request.query
    if query.get("watch") != "true":
        assert query.get("fieldSelector") == "metadata.name=n1"
        return web.json_response({"metadata": {"resourceVersion": "7"}, "items": [_node("n1", "5")]})
    assert query["allowWatchBookmarks"] == "true"
    if query["resourceVersion"] == "1":
        return web.json_response({"kind": "Status", "code": 410}, status=410)
    response = web.StreamResponse()
    await response.prepare(request)
    for event in (
        {"type": "MODIFIED", "object": _node("n1", "8", BIG)},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
    ):
        data = json.dumps(event).encode() + b"\n"
        for start in range(0, len(data), 65536):  # in pieces, as a network delivers it
            await response.write(data[start : start + 65536])
    await response.write_eof()
    return response


@pytest_asyncio.fixture(loop_scope="function")
async def client(tmp_path: Path) -> Any:
    app = web.Application()
    app.router.add_get("/api/v1/nodes", _nodes)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    counted: list[tuple[str, str]] = []
    api = KoordletClient(kubeconfig, on_request=lambda verb, resource: counted.append((verb, resource)))
    yield api, counted
    await api.close()
    await server.close()


async def test_list_then_watch_with_a_long_event_and_every_request_counted(client: Any) -> None:
    api, counted = client
    nodes = RESOURCES[Kind.NODE]
    items, rv = await api.list_raw(nodes, "metadata.name=n1")
    assert (rv, [i["metadata"]["name"] for i in items]) == ("7", ["n1"])
    events = [event async for event in api.watch_raw(nodes, "metadata.name=n1", rv)]
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    assert events[0]["object"]["metadata"]["annotations"]["note"] == BIG
    with pytest.raises(Gone):
        async for _ in api.watch_raw(nodes, None, "1"):
            pass
    assert counted == [("list", "nodes"), ("watch", "nodes"), ("watch", "nodes")]
