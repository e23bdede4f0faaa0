"""The benchmarks' API client: raw JSON create / list / watch on the cluster under test, and bulk
creation with a bounded number of requests in flight."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client

from apis.client.backend import BackendError, Conflict, NotFound
from apis.client.connection import client_configuration
from apis.client.kubernetes import request_json
from apis.client.watch import event_lines
from e2e.bench.harness import BenchError, log_progress

__all__ = ["Api", "create_all", "create_namespace", "run_all"]


class Api:
    """A kubernetes_asyncio ApiClient used raw (JSON in, JSON out) for creating, listing, watching."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    async def connect(cls, kubeconfig: Path, connections: int) -> Api:
        configuration = await client_configuration(kubeconfig)
        configuration.connection_pool_maxsize = connections + 4
        client = k8s_client.ApiClient(configuration)
        client.user_agent = "koordinator-py-bench"
        return cls(client)

    async def close(self) -> None:
        await self.client.close()

    async def create(self, path: str, body: dict[str, Any]) -> None:
        """POST ``body``; an object that already exists counts as created; overload is retried."""
        for attempt in range(8):
            try:
                await request_json(self.client, "POST", path, what=f"create {path}", body=body, seconds=60)
                return
            except Conflict:
                return
            except BackendError as exc:
                if attempt == 7 or exc.status not in (None, 429, 500, 503, 504):
                    raise
                await asyncio.sleep(0.2 * 2**attempt)

    async def list(self, path: str) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            page = await request_json(self.client, "GET", path, what=f"list {path}", query=query, seconds=120)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or ""
            if not token:
                return items, str(metadata.get("resourceVersion", ""))

    async def watch_lines(self, path: str, resource_version: str) -> AsyncIterator[bytes]:
        """The raw lines of one watch from ``resource_version`` (bookmarks on; ends when the server
        closes it)."""
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "600"),
        ]
        response: aiohttp.ClientResponse = await self.client.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
        )
        async with response:
            if response.status != 200:
                text = (await response.read()).decode(errors="replace")
                raise BackendError(f"watch {path}: HTTP {response.status}: {text}", status=response.status)
            async for line in event_lines(response.content.iter_any()):
                yield line


async def create_all(
    api: Api,
    path_of: Callable[[dict[str, Any]], str],
    objects: Sequence[dict[str, Any]],
    what: str,
    concurrency: int,
) -> None:
    """Create ``objects`` with ``concurrency`` requests in flight, reporting progress on stderr."""
    done = 0
    pending = iter(objects)
    began = time.monotonic()

    async def worker() -> None:
        nonlocal done
        for obj in pending:
            await api.create(path_of(obj), obj)
            done += 1

    async def report() -> None:
        while True:
            await asyncio.sleep(2)
            rate = done / (time.monotonic() - began)
            log_progress(f"{what}: {done}/{len(objects)} created ({rate:.0f}/s)")

    reporter = asyncio.create_task(report())
    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
    elapsed = time.monotonic() - began
    log_progress(
        f"{what}: {len(objects)} created in {elapsed:.1f}s ({len(objects) / max(elapsed, 1e-9):.0f}/s)"
    )


async def create_namespace(api: Api, namespace: str, within: float = 60.0) -> None:
    """Create ``namespace`` and wait for its default ServiceAccount: until kube-controller-manager has
    made it, the API server refuses pods there."""
    await api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    deadline = time.monotonic() + within
    while True:
        try:
            await request_json(
                api.client, "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", what="get sa"
            )
            return
        except NotFound:
            if time.monotonic() > deadline:
                raise BenchError(
                    f"namespace {namespace}: no default ServiceAccount after {within:.0f}s"
                ) from None
            await asyncio.sleep(0.3)


async def run_all(calls: Sequence[Callable[[], Awaitable[None]]], concurrency: int) -> None:
    """Await every call, ``concurrency`` at a time."""
    pending = iter(calls)

    async def worker() -> None:
        for call in pending:
            await call()

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
