"""The HTTP server: health, readiness, metrics, Koordinator's debug API, and the log verbosity it sets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import test_utils, web

from scheduler.http import DebugFlags, PluginServices, SchedulerHTTPServer
from scheduler.logging_setup import (
    JsonFormatter,
    configure_logging,
    level_for_verbosity,
    set_verbosity,
    verbosity_for_level,
)
from scheduler.metrics import SchedulerMetrics

Client = test_utils.TestClient[web.Request, web.Application]


class Fixture:
    """A server with a readiness switch, a stored explanation and two plugin services."""

    def __init__(self) -> None:
        self.is_ready = False
        self.explanations: dict[tuple[str, str], dict[str, Any]] = {
            ("default", "p1"): {"result": "unschedulable", "message": "0/3 nodes are available"}
        }
        self.metrics = SchedulerMetrics()
        self.server = SchedulerHTTPServer(
            self.metrics,
            ready=lambda: self.is_ready,
            explain=lambda ns, name: self.explanations.get((ns, name)),
            host="127.0.0.1",
            port=0,
        )
        self.server.register_plugin_service("Coscheduling", "/gangs/{namespace}/{name}", self._gang)
        self.server.register_plugin_service("ElasticQuota", "quotas", self._quotas)

    @staticmethod
    def _gang(params: Mapping[str, str]) -> dict[str, Any] | None:
        if params["name"] == "missing":
            return None
        if params["name"] == "broken":
            raise RuntimeError("gang state is corrupt")
        return {"gang": f"{params['namespace']}/{params['name']}", "minMember": 2}

    @staticmethod
    async def _quotas(params: Mapping[str, str]) -> list[str]:
        return ["root", "team-a"]


@asynccontextmanager
async def client_of(fx: Fixture) -> AsyncIterator[Client]:
    async with test_utils.TestClient(test_utils.TestServer(fx.server.app)) as client:
        yield client


@pytest.fixture
def restore_root_level() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


async def test_healthz_and_livez_answer_ok() -> None:
    async with client_of(Fixture()) as client:
        for path in ("/healthz", "/livez"):
            resp = await client.get(path)
            assert resp.status == 200
            assert await resp.text() == "ok"


async def test_readyz_flips_once_caches_are_synced() -> None:
    fx = Fixture()
    async with client_of(fx) as client:
        resp = await client.get("/readyz")
        assert resp.status == 503
        fx.is_ready = True
        resp = await client.get("/readyz")
        assert resp.status == 200
        assert await resp.text() == "ok"


async def test_readyz_is_503_when_the_check_raises() -> None:
    def broken() -> bool:
        raise RuntimeError("no cache")

    server = SchedulerHTTPServer(SchedulerMetrics(), ready=broken)
    async with test_utils.TestClient(test_utils.TestServer(server.app)) as client:
        assert (await client.get("/readyz")).status == 503


async def test_metrics_serves_the_prometheus_text() -> None:
    fx = Fixture()
    fx.metrics.attempt("scheduled", "koord-scheduler", 0.01)
    async with client_of(fx) as client:
        resp = await client.get("/metrics")
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    assert 'scheduler_schedule_attempts_total{profile="koord-scheduler",result="scheduled"} 1.0' in text
    assert "scheduler_pending_pods" in text


async def test_services_lists_every_registered_plugin_service() -> None:
    async with client_of(Fixture()) as client:
        resp = await client.get("/apis/v1/__services__")
        assert resp.status == 200
        assert await resp.json() == [
            "/apis/v1/plugins/Coscheduling/gangs/{namespace}/{name}",
            "/apis/v1/plugins/ElasticQuota/quotas",
        ]


@pytest.mark.parametrize(
    ("path", "status", "body"),
    [
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gangs/default/g1",
            200,
            {"gang": "default/g1", "minMember": 2},
            id="sync-handler-with-params",
        ),
        pytest.param("/apis/v1/plugins/ElasticQuota/quotas", 200, ["root", "team-a"], id="async-handler"),
        pytest.param("/apis/v1/plugins/ElasticQuota/quotas/", 200, ["root", "team-a"], id="trailing-slash"),
        pytest.param(
            "/apis/v1/plugins/Coscheduling/gangs/default/missing", 404, None, id="handler-returns-none"
        ),
        pytest.param("/apis/v1/plugins/Coscheduling/gangs/default", 404, None, id="no-such-path"),
        pytest.param("/apis/v1/plugins/NoSuchPlugin/x", 404, None, id="no-such-plugin"),
        pytest.param("/apis/v1/plugins/Coscheduling/gangs/default/broken", 500, None, id="handler-raises"),
    ],
)
async def test_plugin_services_dispatch(path: str, status: int, body: Any) -> None:
    async with client_of(Fixture()) as client:
        resp = await client.get(path)
        assert resp.status == status
        data = await resp.json()
    if body is not None:
        assert data == body
    else:
        assert "error" in data


def test_registering_a_service_twice_is_an_error() -> None:
    services = PluginServices()
    services.register("Reservation", "/reservations/{name}", lambda p: {})
    with pytest.raises(ValueError, match="already serves"):
        services.register("Reservation", "reservations/{name}/", lambda p: {})


@pytest.mark.usefixtures("restore_root_level")
async def test_put_debug_flags_v_changes_the_log_level() -> None:
    fx = Fixture()
    root = logging.getLogger()
    async with client_of(fx) as client:
        resp = await client.put("/debug/flags/v", data="5")
        assert resp.status == 200
        assert await resp.text() == "successfully set klog.logging.verbosity to 5"
        assert root.level == logging.DEBUG
        assert await (await client.get("/debug/flags/v")).text() == "5"

        resp = await client.post("/debug/flags/v", data="0\n")
        assert resp.status == 200
        assert root.level == logging.INFO
        assert fx.server.flags.verbosity == 0

        for bad in ("five", "-1", ""):
            resp = await client.put("/debug/flags/v", data=bad)
            assert resp.status == 400
        assert root.level == logging.INFO


async def test_debug_flags_s_sets_the_shared_top_n_scores() -> None:
    """The scheduler reads the same DebugFlags (tests/scheduler/test_debug_scores.py logs with it)."""
    flags = DebugFlags()
    server = SchedulerHTTPServer(SchedulerMetrics(), ready=lambda: True, flags=flags)
    async with test_utils.TestClient(test_utils.TestServer(server.app)) as client:
        for method, count in (("PUT", "100"), ("POST", "7\n")):
            resp = await client.request(method, "/debug/flags/s", data=count)
            assert resp.status == 200
            assert await resp.text() == f"successfully set debugTopNScores to {count.strip()}"
            assert flags.top_n_scores == int(count)
            assert await (await client.get("/debug/flags/s")).text() == count.strip()


async def test_explanation_is_404_for_an_unknown_pod_and_200_for_a_known_one() -> None:
    async with client_of(Fixture()) as client:
        resp = await client.get("/debug/pods/default/nope/explanation")
        assert resp.status == 404
        assert "default/nope" in (await resp.json())["error"]
        resp = await client.get("/debug/pods/default/p1/explanation")
        assert resp.status == 200
        assert await resp.json() == {"result": "unschedulable", "message": "0/3 nodes are available"}


async def test_the_server_listens_until_the_context_exits() -> None:
    fx = Fixture()
    fx.is_ready = True
    async with fx.server as server:
        assert server.bound_port > 0
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/healthz") as resp:
                assert resp.status == 200
            async with session.get(f"{server.url}/readyz") as resp:
                assert resp.status == 200
    with pytest.raises(RuntimeError, match="not running"):
        _ = fx.server.bound_port


# ---- logging setup (the verbosity mapping /debug/flags/v uses) ---------------------------------


@pytest.mark.parametrize(
    ("v", "level"),
    [(0, logging.INFO), (1, logging.INFO), (2, 15), (3, 12), (4, logging.DEBUG), (10, logging.DEBUG)],
)
def test_klog_verbosity_maps_to_logging_levels(v: int, level: int) -> None:
    assert level_for_verbosity(v) == level
    assert verbosity_for_level(level) <= v


def test_negative_verbosity_is_rejected() -> None:
    with pytest.raises(ValueError, match="verbosity"):
        level_for_verbosity(-1)


@pytest.mark.usefixtures("restore_root_level")
def test_json_logs_carry_extra_fields_and_exceptions() -> None:
    stream = io.StringIO()
    handler = configure_logging(2, stream=stream)
    try:
        log = logging.getLogger("scheduler.test")
        log.info("bound %s", "default/p", extra={"pod": "default/p", "node": "n1"})
        log.log(level_for_verbosity(2), "detail")
        log.debug("hidden at v=2")
        try:
            raise ValueError("bad")
        except ValueError:
            log.exception("failed")
        set_verbosity(4)
        log.debug("shown at v=4")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["bound default/p", "detail", "failed", "shown at v=4"]
    first = lines[0]
    assert first["level"] == "INFO"
    assert first["logger"] == "scheduler.test"
    assert (first["pod"], first["node"]) == ("default/p", "n1")
    assert first["time"].endswith("Z")
    assert (lines[1]["level"], lines[1]["v"]) == ("INFO", 2)
    assert lines[2]["level"] == "ERROR"
    assert "ValueError: bad" in lines[2]["exception"]
    assert lines[3]["level"] == "DEBUG"


@pytest.mark.usefixtures("restore_root_level")
def test_configure_logging_replaces_its_own_handler_only() -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    first = configure_logging(0, stream=io.StringIO())
    second = configure_logging(0, stream=io.StringIO())
    try:
        assert first not in root.handlers
        assert second in root.handlers
        assert all(h in root.handlers for h in before)
        assert isinstance(second.formatter, JsonFormatter)
    finally:
        root.removeHandler(second)
