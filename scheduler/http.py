"""koord-scheduler's HTTP server: health, metrics and Koordinator's debug API, on one aiohttp app.

=================================================  ==============================================
``GET /healthz``, ``GET /livez``                   ``ok`` while the event loop runs
``GET /readyz``                                    200 while the caches are synced (every watch has
                                                   listed and still runs), else 503
``GET /metrics``                                   Prometheus text from ``SchedulerMetrics``
``GET /apis/v1/__services__``                      JSON list of every plugin service path
``GET /apis/v1/plugins/{plugin}/{path...}``        a plugin's debug handler (``register_plugin_service``)
``PUT /debug/flags/v`` (body ``5``), ``GET``       klog-style log verbosity
``PUT /debug/flags/s`` (body ``10``), ``GET``      how many top-scored nodes to log per scored pod
                                                   (Koordinator's ``debugTopNScores``; 0: none)
``GET /debug/pods/{namespace}/{name}/explanation`` the last scheduling explanation of a pod
``POST /debug/whatif`` (JSON body)                 would a job fit now, after preemption, and the
                                                   smallest change that makes it fit (read-only;
                                                   ``scheduler.whatif``, ``docs/whatif.md``)
=================================================  ==============================================

``PUT`` and ``POST`` are both accepted on the flags, as Koordinator's docs show both. The score
table ``/debug/flags/s`` turns on is described in ``scheduler.debug``.
Everything the server needs comes in through its constructor; ``async with
SchedulerHTTPServer(...)`` serves until the block ends.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any

from aiohttp import web

from scheduler import logging_setup
from scheduler.debug import DebugFlags
from scheduler.metrics import CONTENT_TYPE, SchedulerMetrics
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.handler import WhatIfProvider, handle_what_if
from scheduler.whatif.request import MAX_REQUEST_BYTES, RequestError, WhatIfRequest

__all__ = [
    "DebugFlags",
    "ExplainProvider",
    "PluginServices",
    "SchedulerHTTPServer",
    "ServiceHandler",
]

log = logging.getLogger(__name__)

ServiceHandler = Callable[[Mapping[str, str]], Any]
"""A plugin debug handler: gets the path parameters (``{"namespace": ..., "name": ...}``), returns
something JSON can hold, or an awaitable of it; ``None`` answers 404."""

ExplainProvider = Callable[[str, str], "dict[str, Any] | None"]
"""``explain(namespace, name)``: the pod's last scheduling explanation, or None if there is none."""

_json_dumps = partial(json.dumps, default=str)


@dataclass
class _Route:
    pattern: str
    segments: tuple[str, ...]
    handler: ServiceHandler

    def match(self, segments: list[str]) -> dict[str, str] | None:
        if len(segments) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for want, got in zip(self.segments, segments, strict=True):
            if want.startswith("{") and want.endswith("}"):
                if not got:
                    return None
                params[want[1:-1]] = got
            elif want != got:
                return None
        return params


@dataclass
class PluginServices:
    """Per-plugin debug handlers, served under ``/apis/v1/plugins/<plugin>/<path>``."""

    _routes: dict[str, list[_Route]] = field(default_factory=dict)

    def register(self, plugin: str, path: str, handler: ServiceHandler) -> None:
        """Serve ``handler`` at ``path`` (``/gangs/{namespace}/{name}``: ``{x}`` is one path segment)."""
        pattern = "/" + path.strip("/")
        routes = self._routes.setdefault(plugin, [])
        if any(r.pattern == pattern for r in routes):
            raise ValueError(f"plugin {plugin!r} already serves {pattern!r}")
        routes.append(_Route(pattern, tuple(pattern.strip("/").split("/")), handler))

    def paths(self) -> list[str]:
        """Every registered service path, sorted."""
        return sorted(
            f"/apis/v1/plugins/{plugin}{r.pattern}" for plugin, rs in self._routes.items() for r in rs
        )

    def match(self, plugin: str, path: str) -> tuple[ServiceHandler, dict[str, str]] | None:
        segments = path.strip("/").split("/")
        for route in self._routes.get(plugin, ()):
            params = route.match(segments)
            if params is not None:
                return route.handler, params
        return None


def _no_explanation(namespace: str, name: str) -> dict[str, Any] | None:
    return None


async def _no_what_if(request: WhatIfRequest) -> WhatIfAnswer:
    raise RequestError("body", "this server answers no what-if", status=501)


class SchedulerHTTPServer:
    """One aiohttp app; ``async with`` starts it on ``host:port`` and stops it on exit."""

    def __init__(
        self,
        metrics: SchedulerMetrics,
        *,
        ready: Callable[[], bool],
        explain: ExplainProvider = _no_explanation,
        what_if: WhatIfProvider = _no_what_if,
        flags: DebugFlags | None = None,
        services: PluginServices | None = None,
        set_verbosity: Callable[[int], None] = logging_setup.set_verbosity,
        host: str = "0.0.0.0",
        port: int = 10251,
    ) -> None:
        self.metrics = metrics
        self.flags = flags if flags is not None else DebugFlags()
        self.services = services if services is not None else PluginServices()
        self.host = host
        self.port = port
        self._ready = ready
        self._explain = explain
        self._what_if = what_if
        self._set_verbosity = set_verbosity
        self._runner: web.AppRunner | None = None
        self.app = self._build_app()

    def register_plugin_service(self, plugin: str, path: str, handler: ServiceHandler) -> None:
        self.services.register(plugin, path, handler)

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("serving HTTP on %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> SchedulerHTTPServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def bound_port(self) -> int:
        """The port actually listened on (differs from ``port`` when that was 0)."""
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the server is not running")
        port: int = self._runner.addresses[0][1]
        return port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.bound_port}"

    # ---- routes --------------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/apis/v1/__services__", self._services)
        app.router.add_get("/apis/v1/plugins/{plugin}/{path:.*}", self._plugin_service)
        for method in ("GET", "PUT", "POST"):
            app.router.add_route(method, "/debug/flags/v", self._flag_v)
            app.router.add_route(method, "/debug/flags/s", self._flag_s)
        app.router.add_get("/debug/pods/{namespace}/{name}/explanation", self._explanation)
        app.router.add_post("/debug/whatif", self._whatif)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        try:
            ready = self._ready()
        except Exception:
            log.exception("readiness check failed")
            ready = False
        if ready:
            return web.Response(text="ok")
        return web.Response(
            status=503, text="not ready: caches are not synced (a watch has not listed or has stopped)"
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def _services(self, request: web.Request) -> web.Response:
        return web.json_response(self.services.paths())

    async def _plugin_service(self, request: web.Request) -> web.Response:
        plugin, path = request.match_info["plugin"], request.match_info["path"]
        found = self.services.match(plugin, path)
        if found is None:
            return _json_error(404, f"no service {path!r} for plugin {plugin!r}; see /apis/v1/__services__")
        handler, params = found
        try:
            result = handler(params)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            log.exception("debug service %s/%s failed", plugin, path)
            return _json_error(500, f"{type(exc).__name__}: {exc}")
        if result is None:
            return _json_error(404, f"{plugin} has nothing at {path!r}")
        return web.json_response(result, dumps=_json_dumps)

    async def _flag_v(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            return web.Response(text=str(self.flags.verbosity))
        value = await _int_body(request)
        if value is None:
            return web.Response(status=400, text="the body must be a non-negative integer verbosity, e.g. 4")
        self._set_verbosity(value)
        self.flags.verbosity = value
        log.info("log verbosity set to %d", value)
        return web.Response(text=f"successfully set klog.logging.verbosity to {value}")

    async def _flag_s(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            return web.Response(text=str(self.flags.top_n_scores))
        value = await _int_body(request)
        if value is None:
            return web.Response(
                status=400, text="the body must be a non-negative integer number of nodes, e.g. 10 (0: off)"
            )
        self.flags.top_n_scores = value
        log.info("debugTopNScores set to %d", value)
        return web.Response(text=f"successfully set debugTopNScores to {value}")

    async def _explanation(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        try:
            found = self._explain(namespace, name)
        except Exception as exc:
            log.exception("explaining pod %s/%s failed", namespace, name)
            return _json_error(500, f"{type(exc).__name__}: {exc}")
        if found is None:
            return _json_error(404, f"no scheduling explanation for pod {namespace}/{name}")
        return web.json_response(found, dumps=_json_dumps)

    async def _whatif(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _json_error(413, f"body: larger than {MAX_REQUEST_BYTES} bytes")
        status, payload = await handle_what_if(self._what_if, body)
        return web.json_response(payload, status=status, dumps=_json_dumps)


async def _int_body(request: web.Request) -> int | None:
    text = (await request.text()).strip()
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
