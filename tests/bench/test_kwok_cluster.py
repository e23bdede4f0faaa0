"""The benches' cluster start policy (``e2e.bench.kwok_cluster.start_cluster``), with a fake
ControlPlane whose ``start`` follows a script and a fake API server that serves its one node Ready
or not: a failed start and a KWOK that never makes a node Ready are each started again, other
errors are not, and after the last attempt the error names (and chains) the last failure."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from e2e.bench.harness import BenchError
from e2e.bench.kube_api import Api
from e2e.bench.kwok_cluster import NodesNeverReady, StartPolicy, start_cluster
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.cluster.controlplane import ControlPlane, ToolsMissing

FAILS, NEVER_READY, READY = "fails", "never-ready", "ready"
POLICY = StartPolicy(attempts=3, ready_within=0.3)


@dataclass
class FakeApiServer:
    """Serves ``GET /api/v1/nodes``: one node, Ready as the current start said."""

    url: str = ""
    ready: bool = False

    async def nodes(self, _: web.Request) -> web.Response:
        status = "True" if self.ready else "False"
        node = {
            "metadata": {"name": "node-0"},
            "status": {"conditions": [{"type": "Ready", "status": status}]},
        }
        return web.json_response({"items": [node], "metadata": {"resourceVersion": "1"}})


@dataclass(frozen=True)
class FakeControlPlane(ControlPlane):
    """Each ``start`` takes the next outcome of ``script``: fail as kwokctl does, or come up with the
    node never Ready (KWOK lost its port), or come up."""

    server: FakeApiServer = field(default_factory=FakeApiServer)
    script: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def start(self, *, wait: str = "3m") -> None:
        self.calls.append("start")
        outcome = self.script.pop(0)
        if outcome == FAILS:
            raise RuntimeError(f"kwokctl create cluster failed (start {self.calls.count('start')})")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters: [{{name: fake, cluster: {{server: '{self.server.url}'}}}}]\n"
            "users: [{name: fake, user: {token: fake}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
        )
        self.server.ready = outcome == READY

    def stop(self, *, quiet: bool = False, component_timeout: float = 10.0) -> None:
        self.calls.append("stop")
        self.kubeconfig.unlink(missing_ok=True)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        self.calls.append(f"kubectl {args[0]}")
        return ""


@contextlib.asynccontextmanager
async def fake_cluster(tmp_path: Path, script: list[str]) -> AsyncIterator[FakeControlPlane]:
    server = FakeApiServer()
    app = web.Application()
    app.router.add_get("/api/v1/nodes", server.nodes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield FakeControlPlane(name="fake", root=tmp_path, server=server, script=script)
    finally:
        await runner.cleanup()


class Step:
    """The benches' own nodes step: wait until the one node is Ready and untainted."""

    def __init__(self) -> None:
        self.runs = 0

    async def __call__(self, api: Api) -> None:
        self.runs += 1
        await wait_nodes_schedulable(api, 1, 1)


async def test_a_start_that_fails_is_started_again(tmp_path: Path) -> None:
    step, said = Step(), list[str]()
    async with fake_cluster(tmp_path, [FAILS, READY]) as cp:
        api = await start_cluster(cp, step, connections=1, phases={}, policy=POLICY, progress=said.append)
        await api.close()

    assert cp.calls.count("start") == 2
    assert cp.calls[:3] == ["stop", "start", "stop"]
    assert "kubectl apply" in cp.calls  # the CRDs, on the start that came up
    assert step.runs == 1
    assert any("did not start: kwokctl create cluster failed (start 1)" in m for m in said)
    assert any("attempt 2/3" in m for m in said)


async def test_nodes_never_ready_cancel_the_step_and_start_again(tmp_path: Path) -> None:
    step, said, phases = Step(), list[str](), dict[str, float]()
    async with fake_cluster(tmp_path, [NEVER_READY, READY]) as cp:
        api = await start_cluster(cp, step, connections=1, phases=phases, policy=POLICY, progress=said.append)
        await api.close()

    assert cp.calls.count("start") == 2
    assert step.runs == 2  # the first, waiting for a node that never turned Ready, was given up
    assert any("no node Ready 0.3s after the nodes step began" in m for m in said)
    assert set(phases) == {"cluster start", "create nodes"}


@pytest.mark.parametrize(
    ("script", "last"),
    [
        ([NEVER_READY, FAILS, FAILS], "kwokctl create cluster failed (start 3)"),
        ([FAILS, FAILS, NEVER_READY], "no node Ready 0.3s"),
    ],
)
async def test_gives_up_after_the_attempts_with_the_last_error(
    tmp_path: Path, script: list[str], last: str
) -> None:
    async with fake_cluster(tmp_path, list(script)) as cp:
        with pytest.raises(BenchError, match="did not come up in 3 attempt") as raised:
            await start_cluster(cp, Step(), connections=1, phases={}, policy=POLICY, progress=print)

    assert cp.calls.count("start") == 3
    assert last in str(raised.value)
    cause: Any = raised.value.__cause__
    assert isinstance(cause, RuntimeError)
    assert last in str(cause)
    assert isinstance(cause, NodesNeverReady) == (script[-1] == NEVER_READY)


async def test_an_error_of_the_step_itself_is_not_retried(tmp_path: Path) -> None:
    async def broken(api: Api) -> None:
        raise BenchError("namespace bench: no default ServiceAccount after 60s")

    async with fake_cluster(tmp_path, [READY, READY]) as cp:
        with pytest.raises(BenchError, match="no default ServiceAccount"):
            await start_cluster(cp, broken, connections=1, phases={}, policy=POLICY, progress=print)

    assert cp.calls.count("start") == 1


async def test_missing_tools_are_not_retried(tmp_path: Path) -> None:
    class NoTools(FakeControlPlane):
        def start(self, *, wait: str = "3m") -> None:
            self.calls.append("start")
            raise ToolsMissing(".bin/kwokctl is missing: run `make tools`")

    async with fake_cluster(tmp_path, []) as fake:
        cp = NoTools(name="fake", root=tmp_path, server=fake.server)
        with pytest.raises(ToolsMissing):
            await start_cluster(cp, Step(), connections=1, phases={}, policy=POLICY, progress=print)

    assert cp.calls.count("start") == 1
