"""``KubernetesBackend``: the ClusterBackend that talks to a real API server through kubernetes_asyncio.

Why it looks the way it does:

- **Raw JSON, decoded once.** kubernetes_asyncio's generated API methods deserialize every object
  into its own model classes (slow, and a second copy of what our pydantic models already say).
  Every request goes straight to the ApiClient's aiohttp session (``apis.client.transport``:
  the client's configuration, authentication, token refresh included, and connection pool, without
  ``call_api``'s per-call work) and returns the raw response; list pages are validated from their
  bytes into ``resource.model`` in one go, watch streams line by line.
- **The reflector's loop.** ``watch`` lists (paginated; the first list of a ``paged_lists``
  resource is one ``resourceVersion=0`` response from the watch cache, as client-go's reflector
  lists first, decoded as it streams in), emits ``REPLACED``, then watches from the
  list's resourceVersion with bookmarks on, tracking the last resourceVersion seen. A dropped
  connection, a timeout or a 5xx resumes from that resourceVersion after a capped, jittered
  exponential backoff; 410 Gone (the resourceVersion fell out of the watch cache) relists and emits
  ``REPLACED`` again, so no event is ever lost silently. The server closes each watch after
  ``timeoutSeconds`` so connections cycle through load balancers and apiserver restarts.
- **Bounded writes.** Binds, patches, evictions and events share one concurrency limit so a
  burst of hundreds of binds queues in-process instead of opening hundreds of connections; the
  aiohttp connector limit is sized to that limit plus one connection per long-running watch; events
  have a few connections of their own.
- **Huge quantities still decode.** The API server keeps ``cpu: 1e1000`` (it answers ``10e999``),
  which our quantity parser refuses by design. Dropping such a pod would leave a bound one
  unaccounted and a pending one unanswered, so a pod's or node's resource quantity of 1e1000 or
  more decodes as ``1e999`` (same sign): as far out of the range the scheduler accounts, so the
  range check refuses or clamps it and names the field (see ``scheduler.cache.quantity_range``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import socket
import time
import uuid
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Generic, TypeVar
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client as k8s_client
from pydantic import BaseModel, ValidationError

from apis.client.backend import (
    BackendError,
    Conflict,
    EventRecord,
    EventType,
    NotFound,
    ResourceType,
    WatchEvent,
)
from apis.client.connection import client_configuration
from apis.client.listhead import list_metadata_ahead_of_items
from apis.client.liststream import BATCH_BYTES, ListCutter
from apis.client.managedfields import strip_managed_fields
from apis.client.ratelimit import ConcurrencyLimit, TokenBucket
from apis.client.transport import JSON, send
from apis.client.watch import (
    Backoff,
    Gone,
    WatchFailed,
    WatchStats,
    event_lines,
    read_event,
    typed_event,
    watch_query,
)
from apis.core import Pod
from apis.gcpause import list_paused
from apis.podkey import pod_namespace_name

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_WATCH_CONNECTIONS",
    "KubernetesBackend",
    "request_json",
    "resource_path",
]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_CONCURRENCY: Final = 32
"""Write calls (bind, patch, evict, event) in flight at once."""
DEFAULT_WATCH_CONNECTIONS: Final = 16
"""Connections reserved for long-running watches on top of ``max_concurrency``."""
EVENT_CONCURRENCY: Final = 8
"""Event writes in flight at once, apart from the other writes."""
MAX_QUEUED_EVENTS: Final = 1000
"""Events waiting to be written (in flight included) beyond which new ones are dropped: client-go's
event broadcaster (``tools/events``, which kube-scheduler records through) queues 1,000 and drops
the rest (``DropIfChannelFull``). Without a bound, a burst of 10,000 bindings left about 9,000
Scheduled events waiting behind the event connections, in memory, long after their pods were
bound, and lost at shutdown anyway."""

_JSON: Final = JSON
_MERGE_PATCH: Final = "application/merge-patch+json"
_STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
_EVENT_NOTE_MAX_BYTES: Final = 1024  # events.k8s.io/v1 validation limit on `note`


def resource_path(
    resource: ResourceType[Any],
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of ``resource``: ``/api/v1/...`` for the core group, ``/apis/{group}/{version}/...``
    otherwise; ``namespace`` is only used for namespaced resources (None = across all namespaces)."""
    parts = [f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"]
    if namespace is not None and resource.namespaced:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(resource.plural)
    if name is not None:
        parts.append(quote(name, safe=""))
    if subresource is not None:
        parts.append(subresource)
    return "/".join(parts)


async def _error_from(response: aiohttp.ClientResponse, what: str) -> BackendError:
    """The BackendError for a non-2xx response, carrying the API server's Status message."""
    text = (await response.read()).decode("utf-8", errors="replace")
    message = text.strip()
    try:
        status_obj = json.loads(text)
        if isinstance(status_obj, dict) and status_obj.get("message"):
            message = str(status_obj["message"])
    except ValueError:
        pass
    status = response.status
    cls = NotFound if status == 404 else Conflict if status == 409 else BackendError
    return cls(f"{what}: HTTP {status}: {message}", status=status)


async def request_bytes(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    *,
    what: str,
    body: Any = None,
    content_type: str = _JSON,
    query: Sequence[tuple[str, str]] = (),
    seconds: float = 30.0,
) -> bytes:
    """The body of a request, raising NotFound (404), Conflict (409) or BackendError (anything else,
    network failures and timeouts with ``status=None``)."""
    try:
        response = await send(
            api,
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            client_timeout=aiohttp.ClientTimeout(total=seconds),
        )
        async with response:
            if not 200 <= response.status < 300:
                raise await _error_from(response, what)
            data: bytes = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise BackendError(f"{what}: {type(exc).__name__}: {exc}") from exc
    return data


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    if not data:
        return {}
    try:
        decoded = json.loads(data)
    except ValueError as exc:
        raise BackendError(f"{what}: undecodable response: {exc}") from exc
    return decoded if isinstance(decoded, dict) else {}


async def request_json(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    *,
    what: str,
    body: Any = None,
    content_type: str = _JSON,
    query: Sequence[tuple[str, str]] = (),
    seconds: float = 30.0,
) -> dict[str, Any]:
    """A JSON request that raises NotFound (404), Conflict (409) or BackendError (anything else,
    network failures and timeouts with ``status=None``). Shared with the Lease store of
    ``apis.client.leader``, which needs coordination.k8s.io but nothing of the watch machinery."""
    data = await request_bytes(
        api, method, path, what=what, body=body, content_type=content_type, query=query, seconds=seconds
    )
    return _json_object(data, what)


class _Page(BaseModel, Generic[T]):
    """One page of a list, its items validated straight from the response's bytes."""

    metadata: dict[str, Any] = {}
    items: list[T] | None = None


_PAGES: dict[type[Any], type[_Page[Any]]] = {}


def _page_model(model: type[T]) -> type[_Page[T]]:
    page = _PAGES.get(model)
    if page is None:
        page = _PAGES[model] = _Page[model]  # type: ignore[valid-type]
    return page


def _abandon(task: asyncio.Future[Any]) -> None:
    """A page fetched ahead that the list no longer needs: cancelled, or its outcome consumed
    (so a failure nobody awaits is not reported as never retrieved)."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


_UNCOMPRESSED: Final = {"Accept-Encoding": "identity"}
"""The streamed list asks for its body as it is. The API server gzips a large response for a
client that accepts it (aiohttp does by default); aiohttp inflates each read of the gzipped stream
at once, so it hands out chunks of several MB (64 KiB reads inflate tenfold and more) and the
list's peak RSS grew by a sixth at 10,000 pods, where the plain stream's chunks stay within its
flow control's 128 KiB; and the API server no longer spends CPU compressing it."""


class _NotJson(BackendError):
    """A list page (or a streamed list's page) that is not JSON."""


class _ListFailed(Exception):
    """The list failed in a way that retrying (after a backoff) may fix."""


@dataclass
class _Listed(Generic[T]):
    """What ``KubernetesBackend._list`` read so far."""

    items: list[T] = field(default_factory=list)
    resource_version: str = ""
    decode_seconds: float = 0.0
    pages_ahead: int = 0
    """Pages handed out before the list's end (``paged``)."""
    streamed: bool = False
    """Read as one response with ``resourceVersion=0``, as it streamed in (``_streamed_list``)."""
    first_byte_seconds: float | None = None
    last_byte_seconds: float | None = None
    """A streamed list's first and last bytes of its body, in seconds since it was asked for."""
    began: float = field(default_factory=time.perf_counter)
    asked_ahead_seconds: float = 0.0
    """How long before this list began it was asked for (``ask_first_list``)."""


class KubernetesBackend:
    """The ClusterBackend over one kubernetes_asyncio ``ApiClient``, which ``close`` closes.

    Build it with ``await KubernetesBackend.connect(kubeconfig)`` (``None``: in-cluster service
    account), or pass an ApiClient you configured yourself (then its connection pool is yours to size).
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        watch_timeout_seconds: int = 300,
        page_size: int = 500,
        request_timeout: float = 30.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 10.0,
        reporting_instance: str | None = None,
        qps: float = 0.0,
        burst: int = 1,
        transforms: Mapping[ResourceType[Any], Callable[[Any], Any]] | None = None,
        paged_lists: Collection[ResourceType[Any]] = (),
        page_wait_seconds: float = 0.005,
        list_batch_bytes: int = BATCH_BYTES,
        max_queued_events: int = MAX_QUEUED_EVENTS,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._api = api_client
        self._writes = ConcurrencyLimit(max_concurrency)
        self._event_writes = ConcurrencyLimit(EVENT_CONCURRENCY)
        """Events never take a slot a binding could use (kube-scheduler's events go through their
        own broadcaster); a few connections suffice for them."""
        self._limiter = TokenBucket(qps, max(1, burst))
        """client-go's QPS/burst (clientConnection in the scheduler config); 0 QPS: unlimited."""
        self._max_queued_events = max_queued_events
        self._events_queued = 0
        self._dropping_events = False
        """A drop happened since the queue last drained (one warning per burst of drops)."""
        self.events_dropped = 0
        """Events not written because ``max_queued_events`` were waiting (``MAX_QUEUED_EVENTS``)."""
        self._event_limiter = TokenBucket(qps, max(1, burst))
        """Events have a limiter of their own, as kube-scheduler's separate event client has, so a
        burst of FailedScheduling events never delays a binding."""
        self._watch_timeout = watch_timeout_seconds
        self._page_size = page_size
        self._transforms = dict(transforms or {})
        """Applied to every object of a resource as soon as it is decoded (client-go's informer
        transform): the scheduler shares equal parts of pods page by page, before the next page
        is read, so a long list never holds every pod unshared."""
        self._paged_lists = frozenset(paged_lists)
        """Resources whose lists' pages are also emitted as LISTED events as they are decoded
        (``apis.client.backend``), where the API server keeps the list waiting (``_list``): the
        scheduler handles the first pod list's pages in those waits, instead of all of it after
        the last page. Their first list is one response from the watch cache, decoded in pages
        as it streams in (``_streamed_list``)."""
        self._page_wait = page_wait_seconds
        """A paged list hands its pages out only after a page kept it waiting this long (``_list``)."""
        self._list_batch_bytes = list_batch_bytes
        """Bytes of items decoded at once as a streamed list comes in (``_streamed_list``)."""
        self._request_timeout = request_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._reporting_instance = (reporting_instance or f"koord-scheduler-{socket.gethostname()}")[:128]
        self._closed = asyncio.Event()
        self._open_streams: set[aiohttp.ClientResponse] = set()
        self._watches: weakref.WeakSet[AsyncGenerator[Any, None]] = weakref.WeakSet()
        self._asked_ahead: dict[ResourceType[Any], asyncio.Future[tuple[aiohttp.ClientResponse, float]]] = {}
        """First lists asked for before anyone watches (``ask_first_list``), by resource."""
        self.stats = WatchStats()

    @classmethod
    async def connect(
        cls,
        kubeconfig: Path | None = None,
        *,
        context: str | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        watch_connections: int = DEFAULT_WATCH_CONNECTIONS,
        watch_timeout_seconds: int = 300,
        request_timeout: float = 30.0,
        reporting_instance: str | None = None,
        qps: float = 0.0,
        burst: int = 1,
        transforms: Mapping[ResourceType[Any], Callable[[Any], Any]] | None = None,
        paged_lists: Collection[ResourceType[Any]] = (),
    ) -> KubernetesBackend:
        """Load ``kubeconfig`` (or the in-cluster service account when None) into a fresh Configuration
        whose connection pool holds ``max_concurrency`` writers plus ``watch_connections`` watches."""
        configuration = await client_configuration(kubeconfig, context=context)
        configuration.connection_pool_maxsize = max_concurrency + watch_connections + EVENT_CONCURRENCY
        api = k8s_client.ApiClient(configuration)
        _skip_environment_lookups(api)
        api.user_agent = "koord-scheduler/koordinator-py"
        return cls(
            api,
            max_concurrency=max_concurrency,
            watch_timeout_seconds=watch_timeout_seconds,
            request_timeout=request_timeout,
            reporting_instance=reporting_instance,
            qps=qps,
            burst=burst,
            transforms=transforms,
            paged_lists=paged_lists,
        )

    @property
    def api_client(self) -> k8s_client.ApiClient:
        """The shared ApiClient (the leader elector's Lease store uses it too)."""
        return self._api

    def ask_first_list(self, resource: ResourceType[Any]) -> None:
        """Ask for the first list of a ``paged_lists`` resource now, before anyone watches it: the
        API server prepares it (seconds, at tens of thousands of pods) while the caller does other
        work (the scheduler's imports); the first watch of the resource reads that response. Only
        the request is made here: its body waits in the socket until the watch reads it."""
        if resource in self._paged_lists and resource not in self._asked_ahead and not self.closed:
            self._asked_ahead[resource] = asyncio.ensure_future(self._ask_streamed(resource, None))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # ------------------------------------------------------------------ watch

    def watch(
        self, resource: ResourceType[T], *, field_selector: str | None = None
    ) -> AsyncIterator[WatchEvent[T]]:
        """List then watch ``resource`` (see ``apis.client.backend`` for the contract)."""
        stream = self._watch(resource, field_selector, None)
        self._watches.add(stream)
        return stream

    async def _watch(
        self, resource: ResourceType[T], field_selector: str | None, resource_version: str | None
    ) -> AsyncGenerator[WatchEvent[T], None]:
        """The reflector loop. ``resource_version`` starts with a watch instead of a list (tests use a
        too-old one to force the 410 relist path); None lists first."""
        rv = resource_version
        what = resource.plural + (f" ({field_selector})" if field_selector else "")
        backoff = Backoff(self._backoff_initial, self._backoff_max)
        paged = resource in self._paged_lists
        stream_first = paged and rv is None
        """The first list of a paged resource is read from the watch cache as it streams in; a
        relist (410 Gone) and a list after a failed one are paginated, consistent reads."""
        while not self.closed:
            if rv is None:
                began = time.monotonic()
                listed: _Listed[T] = _Listed()
                try:
                    if stream_first:
                        stream_first = False
                        lister = self._first_list(resource, field_selector, listed)
                    else:
                        lister = self._list(resource, field_selector, listed, paged)
                    async with aclosing(lister) as pages:
                        async for page in pages:
                            yield WatchEvent(EventType.LISTED, objects=tuple(page))
                except _ListFailed as exc:
                    if self.closed:
                        return
                    delay = backoff.next_delay()
                    log.warning("list %s failed: %s; retrying in %.2fs", what, exc, delay)
                    await self._sleep(delay)
                    continue
                objects, rv, decode_seconds = listed.items, listed.resource_version, listed.decode_seconds
                self.stats.lists += 1
                listed_seconds = time.monotonic() - began
                log.info(
                    "listed %s: %d objects at resourceVersion %s in %.2fs (%s; %.2fs of it decoding; "
                    "%d pages handed out ahead)",
                    what,
                    len(objects),
                    rv,
                    listed_seconds,
                    "one response, streamed" if listed.streamed else "paginated",
                    decode_seconds,
                    listed.pages_ahead,
                    extra={
                        "list": {
                            "resource": resource.plural,
                            "objects": len(objects),
                            "seconds": round(listed_seconds, 3),
                            "decode_seconds": round(decode_seconds, 3),
                            "pages_ahead": listed.pages_ahead,
                            "streamed": listed.streamed,
                            "asked_ahead_seconds": listed.asked_ahead_seconds,
                            "first_byte_seconds": listed.first_byte_seconds,
                            "last_byte_seconds": listed.last_byte_seconds,
                        }
                    },
                )
                yield WatchEvent(EventType.REPLACED, objects=tuple(objects))
            began, seen = time.monotonic(), 0
            try:
                async with aclosing(self._stream(resource, field_selector, rv)) as stream:
                    async for event_type, obj, new_rv in stream:
                        seen += 1
                        rv = new_rv
                        backoff.reset()
                        if event_type is not None and obj is not None:
                            yield WatchEvent(event_type, obj=obj)
                if seen == 0 and time.monotonic() - began < 1.0:
                    # An empty watch that ended at once: do not spin on a server that does that.
                    raise WatchFailed("watch ended immediately without events")
                log.debug("watch %s ended by the server at resourceVersion %s; rewatching", what, rv)
            except Gone as exc:
                self.stats.relists += 1
                log.info("watch %s: resourceVersion %s is too old (%s); relisting", what, rv, exc)
                rv = None
            except WatchFailed as exc:
                if self.closed:
                    return
                self.stats.reconnects += 1
                delay = backoff.next_delay()
                log.warning(
                    "watch %s dropped at resourceVersion %s: %s; resuming in %.2fs", what, rv, exc, delay
                )
                await self._sleep(delay)

    async def _sleep(self, delay: float) -> None:
        """Sleep, but wake at once when the backend is closed."""
        with suppress(TimeoutError):  # asyncio.timeout: 3.11's wait_for can swallow a cancel
            async with asyncio.timeout(delay):
                await self._closed.wait()

    async def _first_list(
        self, resource: ResourceType[T], field_selector: str | None, listed: _Listed[T]
    ) -> AsyncGenerator[list[T], None]:
        """The list streamed in (``_streamed_list``); where that fails (the server refuses it, the
        connection breaks, the body does not decode), the paginated list at once. Pages yielded
        before the failure were of a list that started over, as an expired continue token's are."""
        try:
            async with aclosing(self._streamed_list(resource, field_selector, listed)) as pages:
                async for page in pages:
                    yield page
            return
        except BackendError as exc:
            if self.closed:
                raise _ListFailed(str(exc)) from exc
            log.warning("list %s in one response failed: %s; listing it page by page", resource.plural, exc)
        listed.items, listed.resource_version, listed.pages_ahead, listed.streamed = [], "", 0, False
        listed.first_byte_seconds = listed.last_byte_seconds = None
        listed.asked_ahead_seconds = 0.0
        async with aclosing(self._list(resource, field_selector, listed, True)) as pages:
            async for page in pages:
                yield page

    async def _streamed_list(
        self, resource: ResourceType[T], field_selector: str | None, listed: _Listed[T]
    ) -> AsyncGenerator[list[T], None]:
        """Every object into ``listed`` from one list with ``resourceVersion=0`` (the API server's
        watch cache; the watch goes on from its resourceVersion, so what it may lag is caught up),
        decoded in pages of whole items as the body comes in (``apis.client.liststream``), each
        page's bytes dropped once decoded. Pages are yielded as ``_list``'s are: those decoded are
        handed out when reading the body kept the list waiting ``page_wait_seconds`` since the last
        were; the last page never. Any failure raises BackendError."""
        what = f"list {resource.plural}"
        ahead = self._asked_ahead.pop(resource, None) if field_selector is None else None
        try:
            response, asked = await (ahead or self._ask_streamed(resource, field_selector))
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BackendError(f"{what}: {type(exc).__name__}: {exc}") from exc
        listed.asked_ahead_seconds = round(max(0.0, listed.began - asked), 3)
        self._open_streams.add(response)
        listed.streamed = True
        try:
            async with response:
                if not 200 <= response.status < 300:
                    raise await _error_from(response, what)
                cutter = ListCutter(self._list_batch_bytes)
                held: deque[list[T]] = deque()
                waited = 0.0
                chunks = response.content.iter_any()
                while True:
                    wait_began = time.perf_counter()
                    chunk = await anext(chunks, None)
                    waited += time.perf_counter() - wait_began
                    if chunk is None:
                        listed.last_byte_seconds = round(time.perf_counter() - asked, 3)
                        break
                    if listed.first_byte_seconds is None:
                        listed.first_byte_seconds = round(time.perf_counter() - asked, 3)
                    cutter.feed(chunk)
                    while (data := cutter.page()) is not None:
                        try:
                            page_items = self._decode_timed(resource, data, what, listed)[0]
                        except _NotJson:
                            cutter.refused(data)  # not cut between items: tried again further on
                            break
                        listed.items.extend(page_items)
                        held.append(page_items)
                    if held and waited >= self._page_wait:
                        waited = 0.0
                        while held:
                            listed.pages_ahead += 1
                            yield held.popleft()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise BackendError(f"{what}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._open_streams.discard(response)
        page_items, meta = self._decode_timed(resource, cutter.end(), what, listed)
        listed.items.extend(page_items)
        listed.resource_version = str(
            meta.get("resourceVersion") or cutter.metadata.get("resourceVersion") or ""
        )
        if not listed.resource_version:
            raise BackendError(f"{what}: the list has no resourceVersion")

    async def _ask_streamed(
        self, resource: ResourceType[Any], field_selector: str | None
    ) -> tuple[aiohttp.ClientResponse, float]:
        """The response to a list with ``resourceVersion=0``, its body unread, and when it was asked
        for (``perf_counter``)."""
        query = [("resourceVersion", "0")]
        if field_selector:
            query.append(("fieldSelector", field_selector))
        timeout = aiohttp.ClientTimeout(total=None, connect=self._request_timeout, sock_read=120.0)
        await self._limiter.acquire()
        asked = time.perf_counter()
        response = await send(
            self._api,
            "GET",
            resource_path(resource),
            query=query,
            client_timeout=timeout,
            headers=_UNCOMPRESSED,
        )
        return response, asked

    def _decode_timed(
        self, resource: ResourceType[T], data: bytes, what: str, listed: _Listed[T]
    ) -> tuple[list[T], dict[str, Any]]:
        began = time.perf_counter()
        try:
            with list_paused():
                return self._decode_page(resource, data, what)
        finally:
            listed.decode_seconds += time.perf_counter() - began

    async def _list(
        self, resource: ResourceType[T], field_selector: str | None, listed: _Listed[T], paged: bool
    ) -> AsyncGenerator[list[T], None]:
        """Every object into ``listed``, page by page (``limit`` / ``continue``); ``listed`` ends
        with the list's resourceVersion and the seconds spent validating. Each next page is asked
        for before the last one is decoded, so the API server serializes it meanwhile
        (``apis.client.listhead``).

        ``paged``: decoded pages are also yielded, in order, for the consumer to handle ahead of
        the whole list, but only where that fills a wait: when the page just decoded had kept
        the list waiting at least ``page_wait_seconds``, it and any pages held back are yielded
        before the next page is awaited; when the API server keeps ahead, pages are held back and
        left to the whole list (handling them in between would only lengthen the list). The last
        page is never yielded. A list that starts over (its continue token expired) empties
        ``listed``, drops what it held back and yields its pages again."""
        path = resource_path(resource)
        what = f"list {resource.plural}"

        async def fetch(cont: str | None) -> bytes:
            query = [("limit", str(self._page_size))]
            if cont:
                query.append(("continue", cont))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            await self._limiter.acquire()
            return await request_bytes(self._api, "GET", path, what=what, query=query, seconds=120.0)

        cont: str | None = None
        held: deque[list[T]] = deque()
        page = asyncio.ensure_future(fetch(None))
        try:
            while True:
                try:
                    wait_began = time.perf_counter()
                    data = await page
                    waited = time.perf_counter() - wait_began
                    ahead = list_metadata_ahead_of_items(data)
                    if ahead is not None and ahead.get("continue"):
                        page = asyncio.ensure_future(fetch(str(ahead["continue"])))
                        await asyncio.sleep(0)  # let the request go out before decoding blocks
                    page_items, meta = self._decode_timed(resource, data, what, listed)
                except BackendError as exc:
                    if exc.status == 410 and cont:
                        # The continue token expired between pages: start over from a fresh snapshot.
                        log.info("list %s: continue token expired; restarting the list", resource.plural)
                        listed.items, cont, listed.pages_ahead = [], None, 0
                        held.clear()
                        page = asyncio.ensure_future(fetch(None))
                        continue
                    raise _ListFailed(str(exc)) from exc
                listed.items.extend(page_items)
                cont = meta.get("continue") or None
                if not cont:
                    listed.resource_version = str(meta.get("resourceVersion") or "")
                    return
                if ahead is None or ahead.get("continue") != cont:
                    _abandon(page)
                    page = asyncio.ensure_future(fetch(cont))
                if paged:
                    held.append(page_items)
                    if waited >= self._page_wait:
                        while held:
                            listed.pages_ahead += 1
                            yield held.popleft()
        finally:
            _abandon(page)

    def _decode_page(
        self, resource: ResourceType[T], data: bytes, what: str
    ) -> tuple[list[T], dict[str, Any]]:
        """A page's objects and its list metadata. The page is validated from its bytes in one go
        (a third less CPU than ``json.loads`` and then each object, which is most of a start-up with
        many pods), less its objects' managedFields, which no model reads
        (``apis.client.managedfields``); when any object of it does not validate, the page is
        decoded object by object as a watch event is, so that huge quantities are stood in and only
        what stays invalid is dropped (each logged)."""
        try:
            page = _page_model(resource.model).model_validate_json(strip_managed_fields(data) or b"{}")
        except ValidationError as exc:
            if any(error["type"] == "json_invalid" for error in exc.errors()):
                raise _NotJson(f"{what}: undecodable response: {exc.errors()[0]['msg']}") from None
            return self._decode_items(resource, _json_object(data, what))
        items = page.items or []
        fields = resource.model.model_fields
        transform = self._transforms.get(resource)
        for obj in items:
            # List items carry neither apiVersion nor kind; watch events do.
            if "api_version" in fields and "api_version" not in obj.model_fields_set:
                obj.api_version = resource.api_version  # type: ignore[attr-defined]
            if "kind" in fields and "kind" not in obj.model_fields_set:
                obj.kind = resource.kind  # type: ignore[attr-defined]
        if transform is not None:
            items = [transform(obj) for obj in items]
        return items, page.metadata

    def _decode_items(
        self, resource: ResourceType[T], page: dict[str, Any]
    ) -> tuple[list[T], dict[str, Any]]:
        items: list[T] = []
        for raw in page.get("items") or ():
            if isinstance(raw, dict):
                raw.setdefault("apiVersion", resource.api_version)
                raw.setdefault("kind", resource.kind)
            obj = self._decode(resource, raw)
            if obj is not None:
                items.append(obj)
        return items, page.get("metadata") or {}

    async def _stream(
        self, resource: ResourceType[T], field_selector: str | None, rv: str
    ) -> AsyncGenerator[tuple[EventType | None, T | None, str], None]:
        """One watch request: ``(type, object, resourceVersion)`` per event; bookmarks (and objects
        that did not decode) come as ``(None, None, resourceVersion)`` so only the version moves."""
        query = watch_query(rv, timeout_seconds=self._watch_timeout, field_selector=field_selector)
        # No total timeout; a read silent for longer than the server's own timeout means a dead peer.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self._request_timeout, sock_read=self._watch_timeout + 60
        )
        try:
            response = await send(
                self._api, "GET", resource_path(resource), query=query, client_timeout=timeout
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WatchFailed(f"{type(exc).__name__}: {exc}") from exc
        self._open_streams.add(response)
        try:
            async with response:
                if response.status == 410:
                    raise Gone("HTTP 410")
                if not 200 <= response.status < 300:
                    raise WatchFailed(str(await _error_from(response, f"watch {resource.plural}")))
                async for line in event_lines(response.content.iter_any()):
                    yield self._event(resource, line, rv)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise WatchFailed(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._open_streams.discard(response)

    def _event(
        self, resource: ResourceType[T], line: bytes, rv: str
    ) -> tuple[EventType | None, T | None, str]:
        typed = typed_event(resource.model, line)
        if typed is not None and typed.type in _OBJECT_EVENTS:
            new_rv = _resource_version(typed.object) or rv
            if typed.type == "BOOKMARK":
                return None, None, new_rv
            transform = self._transforms.get(resource)
            obj = typed.object if transform is None else transform(typed.object)
            return EventType(typed.type), obj, new_rv
        # Errors, unknown types and objects that need a closer look (huge quantities stood in,
        # the invalid dropped and logged).
        event = read_event(line)
        new_rv = event.resource_version or rv
        if event.type == "BOOKMARK":
            return None, None, new_rv
        if event.type in ("ADDED", "MODIFIED", "DELETED"):
            return EventType(event.type), self._decode(resource, event.object), new_rv
        log.warning("watch %s: ignoring event of unknown type %r", resource.plural, event.type)
        return None, None, new_rv

    def _decode(self, resource: ResourceType[T], raw: Any) -> T | None:
        obj = self._validate(resource, raw)
        transform = self._transforms.get(resource)
        return obj if obj is None or transform is None else transform(obj)

    def _validate(self, resource: ResourceType[T], raw: Any) -> T | None:
        try:
            return resource.model.model_validate(raw)
        except ValidationError as exc:
            stood_in = _huge_quantities_stood_in(resource, raw, exc)
            if stood_in is not None:
                with suppress(ValidationError):
                    return resource.model.model_validate(stood_in)
            self.stats.decode_errors += 1
            meta = raw.get("metadata", {}) if isinstance(raw, dict) else {}
            log.error(
                "dropping %s %s/%s: it does not validate: %s",
                resource.kind,
                meta.get("namespace", ""),
                meta.get("name", "?"),
                exc,
            )
            return None

    # ------------------------------------------------------------------ writes

    async def _write(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        what: str,
        content_type: str = _JSON,
        limiter: TokenBucket | None = None,
        slots: ConcurrencyLimit | None = None,
    ) -> dict[str, Any]:
        await (limiter or self._limiter).acquire()
        async with slots or self._writes:
            return await request_json(
                self._api,
                method,
                path,
                what=what,
                body=body,
                content_type=content_type,
                seconds=self._request_timeout,
            )

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        """POST pods/binding; the pod's uid in the Binding makes the API server refuse (409) a pod
        that was deleted and recreated under the same name since the scheduler saw it. The
        Binding's annotations are copied onto the pod by the API server."""
        namespace, name = pod_namespace_name(pod)
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if pod.metadata.uid:
            meta["uid"] = pod.metadata.uid
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self._write(
            "POST",
            _pod_path(namespace, name, "binding"),
            body,
            what=f"bind pod {namespace}/{name} to node {node_name}",
        )

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        namespace, name = pod_namespace_name(pod)
        await self._write(
            "PATCH",
            _pod_path(namespace, name),
            patch,
            what=f"patch pod {namespace}/{name}",
            content_type=_MERGE_PATCH,
        )

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        namespace, name = pod_namespace_name(pod)
        await self._write(
            "PATCH",
            _pod_path(namespace, name, "status"),
            patch,
            what=f"patch status of pod {namespace}/{name}",
            content_type=_STRATEGIC_MERGE_PATCH,
        )

    async def patch_custom(
        self,
        resource: ResourceType[Any],
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> None:
        await self._write(
            "PATCH",
            resource_path(resource, namespace, name) + (f"/{subresource}" if subresource else ""),
            patch,
            what=f"patch {resource.plural} {namespace + '/' if namespace else ''}{name}",
            content_type=_MERGE_PATCH,
        )

    async def evict(self, pod: Pod, *, grace_period_seconds: int | None = None) -> None:
        """POST pods/eviction (policy/v1). A PodDisruptionBudget that forbids it answers 429, raised as
        BackendError(status=429); the uid precondition keeps a recreated pod from being evicted."""
        namespace, name = pod_namespace_name(pod)
        delete_options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            delete_options["gracePeriodSeconds"] = grace_period_seconds
        if pod.metadata.uid:
            delete_options["preconditions"] = {"uid": pod.metadata.uid}
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if delete_options:
            body["deleteOptions"] = delete_options
        await self._write(
            "POST", _pod_path(namespace, name, "eviction"), body, what=f"evict pod {namespace}/{name}"
        )

    async def delete_pod(self, pod: Pod) -> None:
        """DELETE the pod (its own grace period applies); the uid precondition keeps a recreated pod
        safe. Preemption's last resort when a PodDisruptionBudget refuses the eviction."""
        namespace, name = pod_namespace_name(pod)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if pod.metadata.uid:
            body["preconditions"] = {"uid": pod.metadata.uid}
        await self._write("DELETE", _pod_path(namespace, name), body, what=f"delete pod {namespace}/{name}")

    async def record_event(self, event: EventRecord) -> None:
        """Create an events.k8s.io/v1 Event (what kube-scheduler writes; ``kubectl describe`` and
        ``kubectl get events`` show it). Failures are logged and swallowed: an event is never worth
        failing a scheduling cycle. Dropped, as client-go's broadcaster drops them, while
        ``max_queued_events`` wait (``MAX_QUEUED_EVENTS``): one warning per burst of drops."""
        if self._events_queued >= self._max_queued_events:
            if not self._dropping_events:
                self._dropping_events = True
                log.warning(
                    "%d events are waiting to be written: dropping new ones until they drain "
                    "(as kube-scheduler's event broadcaster does)",
                    self._events_queued,
                )
            self.events_dropped += 1
            return
        self._events_queued += 1
        try:
            await self._record_event(event)
        finally:
            self._events_queued -= 1
            if not self._events_queued:
                self._dropping_events = False

    async def _record_event(self, event: EventRecord) -> None:
        ref = event.regarding
        namespace = ref.namespace or "default"  # cluster-scoped objects' events live in default
        regarding: dict[str, Any] = {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name}
        if ref.namespace:
            regarding["namespace"] = ref.namespace
        if ref.uid:
            regarding["uid"] = ref.uid
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": _event_name(ref.name), "namespace": namespace},
            "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": event.reporting_controller,
            "reportingInstance": self._reporting_instance,
            "action": event.action[:128],
            "reason": event.reason[:128],
            "note": _truncate_utf8(event.message, _EVENT_NOTE_MAX_BYTES),
            "type": event.type,
            "regarding": regarding,
        }
        try:
            await self._write(
                "POST",
                f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe='')}/events",
                body,
                what=f"record event {event.reason} for {ref.kind} {namespace}/{ref.name}",
                limiter=self._event_limiter,
                slots=self._event_writes,
            )
        except BackendError as exc:
            log.warning("could not record event: %s", exc)
        except Exception:
            log.exception("could not record event %s for %s %s", event.reason, ref.kind, ref.name)

    async def close(self) -> None:
        """End every watch (their streams return) and close the ApiClient's connection pool."""
        if self.closed:
            return
        self._closed.set()
        for response in list(self._open_streams):
            response.close()
        for ahead in self._asked_ahead.values():  # asked for, never watched
            ahead.cancel()
            if ahead.done() and not ahead.cancelled() and ahead.exception() is None:
                ahead.result()[0].close()
        self._asked_ahead.clear()
        # A consumer that stopped iterating leaves its generator suspended; closing it here runs
        # its cleanup now instead of when the garbage collector finds it (an unclosed socket).
        for stream in list(self._watches):
            with suppress(RuntimeError):  # "already running": that consumer ends it itself
                await stream.aclose()
        await self._api.close()
        # aiohttp's graceful shutdown: a closed session's TLS connections finish closing a moment
        # later; a loop stopped before then leaves an "unclosed transport" for the garbage
        # collector to report (seen in e2e, attributed to whichever test ran then).
        await asyncio.sleep(_TLS_CLOSE_GRACE)


_TLS_CLOSE_GRACE = 0.25
"""Seconds aiohttp documents for TLS connections to close after their session (Graceful Shutdown)."""

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "WS_PROXY", "WSS_PROXY", "ALL_PROXY", "NO_PROXY")


def _skip_environment_lookups(api: k8s_client.ApiClient) -> None:
    """kubernetes_asyncio opens its aiohttp session with ``trust_env=True``, which makes aiohttp look
    up ``~/.netrc`` and the proxy variables in a worker thread on *every* request (two thread hops
    per bind, measured at ~0.3 ms of CPU each). When neither a proxy variable nor a netrc file
    exists there is nothing to find, so the lookups are turned off."""
    configured = any(os.environ.get(v) or os.environ.get(v.lower()) for v in _PROXY_VARIABLES)
    netrc = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    session: Any = getattr(api.rest_client, "pool_manager", None)
    if not configured and not os.path.exists(netrc) and hasattr(session, "_trust_env"):
        session._trust_env = False


_OBJECT_EVENTS: Final = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


def _resource_version(obj: BaseModel) -> str | None:
    """The object's ``metadata.resourceVersion`` (every watched kind has an ObjectMeta)."""
    rv = getattr(getattr(obj, "metadata", None), "resource_version", None)
    return str(rv) if rv else None


def _pod_path(namespace: str, name: str, subresource: str | None = None) -> str:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def _event_name(object_name: str) -> str:
    """``<object>.<16 hex>`` as client-go names events, short enough for a DNS subdomain."""
    return f"{object_name[:236]}.{uuid.uuid4().hex[:16]}"


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max_bytes - 3].decode("utf-8", errors="ignore") + "..."


_HUGE = "magnitude of 1e1000 or more"
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "allocatable", "capacity"})


def _huge_quantities_stood_in(resource: ResourceType[Any], raw: Any, exc: ValidationError) -> Any | None:
    """``raw`` with every resource quantity too large to parse replaced by ``1e999`` (same sign), or
    None when something else is wrong with it too (then it is dropped as before)."""
    if resource.kind not in ("Pod", "Node") or not isinstance(raw, dict):
        return None
    errors = exc.errors()
    if not all(_HUGE in e["msg"] and len(e["loc"]) >= 2 and e["loc"][-2] in _QUANTITY_MAPS for e in errors):
        return None
    patched = copy.deepcopy(raw)
    for error in errors:
        *path, name = error["loc"]
        parent = patched
        for key in path:
            parent = parent[key]
        value = parent[name]
        parent[name] = "-1e999" if isinstance(value, str) and value.lstrip().startswith("-") else "1e999"
        log.warning(
            "%s %s: %s is %s; read as %s",
            resource.kind,
            raw.get("metadata", {}).get("name", "?"),
            ".".join(str(k) for k in error["loc"]),
            _HUGE,
            parent[name],
        )
    return patched
