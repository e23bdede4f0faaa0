"""A benchmark's own KWOK cluster: started fresh with the CRDs and the bench's nodes, started again
when it does not come up, and stopped at the end with its logs kept.

Two clusters starting at the same moment on one machine can both pick the same free port: then
``kwokctl create cluster`` fails, or it succeeds but KWOK (or etcd) lost its port ("bind: address
already in use" in its log) and no node ever turns Ready. Both are worth another start, a bounded
number of times. The nodes step is the bench's own (it creates its nodes and waits until they are
schedulable, under its own bound); while it runs, a watchdog gives the attempt up when no node at
all is Ready after ``StartPolicy.ready_within`` seconds. Every other error of the step is the
bench's and ends the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import aiohttp
from pydantic import BaseModel, Field

from apis.client.backend import BackendError
from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api
from e2e.bench.nodes import node_ready
from e2e.bench.processes import keep_cluster_logs
from e2e.cluster.__main__ import install_crds
from e2e.cluster.controlplane import ControlPlane, ToolsMissing

__all__ = ["NodesNeverReady", "NodesStep", "StartPolicy", "start_cluster", "stop_cluster"]

NodesStep = Callable[[Api], Awaitable[None]]
"""Creates the bench's nodes (and whatever else it needs before they are) and waits for them."""


class StartPolicy(BaseModel, frozen=True):
    attempts: int = Field(default=3, ge=1)
    """Starts at the most, the first included."""
    ready_within: float = Field(default=60.0, gt=0)
    """Seconds from the start of the nodes step until at least one node must be Ready (KWOK marks
    a node Ready about a second after it is created)."""
    kwokctl_wait: str = "60s"
    """``kwokctl create cluster --wait``: how long it waits for the components to come up."""


class NodesNeverReady(BenchError):
    """No node turned Ready within the policy's bound: KWOK is not running."""


async def start_cluster(
    cp: ControlPlane,
    nodes: NodesStep,
    *,
    connections: int,
    phases: dict[str, float],
    policy: StartPolicy | None = None,
    nodes_phase: str = "create nodes",
    progress: Callable[[str], None] = log_progress,
) -> Api:
    """A fresh ``cp`` with the CRDs and the nodes of ``nodes``, and a client connected to it
    (the caller closes it). Times ``"cluster start"`` and ``nodes_phase`` into ``phases`` (the
    last attempt's). After ``policy.attempts`` starts that did not come up: ``BenchError`` naming
    the last error, which is its ``__cause__``."""
    policy = policy or StartPolicy()
    last: Exception | None = None
    for attempt in range(1, policy.attempts + 1):
        if attempt > 1:
            progress(f"cluster {cp.name}: starting it again (attempt {attempt}/{policy.attempts})")
        try:
            with phase(phases, "cluster start", progress):
                await asyncio.to_thread(_fresh, cp, policy.kwokctl_wait)
        except ToolsMissing:
            raise
        except RuntimeError as exc:  # kwokctl failed, or kubectl could not install the CRDs
            last = exc
            progress(f"cluster {cp.name} did not start: {_brief(exc)}")
            continue
        api = await Api.connect(cp.kubeconfig, connections)
        try:
            with phase(phases, nodes_phase, progress):
                await _with_watchdog(nodes(api), _first_node_ready(api, policy.ready_within))
            return api
        except NodesNeverReady as exc:
            await api.close()
            last = exc
            progress(f"cluster {cp.name}: {exc}")
        except BaseException:
            await api.close()
            raise
    assert last is not None
    raise BenchError(
        f"cluster {cp.name} did not come up in {policy.attempts} attempt(s); "
        f"the last: {type(last).__name__}: {_brief(last)}"
    ) from last


async def stop_cluster(
    cp: ControlPlane,
    api: Api | None,
    *,
    phases: dict[str, float],
    keep: bool,
    progress: Callable[[str], None] = log_progress,
) -> None:
    """Close ``api`` and, unless ``keep``, stop ``cp``, its logs kept in ``.cluster/<name>/cluster-logs/``."""
    if api is not None:
        await api.close()
    if not keep:
        with phase(phases, "cluster stop", progress):
            keep_cluster_logs(cp)
            cp.stop()


def _fresh(cp: ControlPlane, wait: str) -> None:
    cp.stop(quiet=True)
    cp.start(wait=wait)
    install_crds(cp)


async def _with_watchdog(step: Awaitable[None], watchdog: Awaitable[None]) -> None:
    """Run ``step``; if ``watchdog`` raises first, cancel ``step`` and raise that instead."""
    step_task = asyncio.ensure_future(step)
    watch_task = asyncio.ensure_future(watchdog)
    try:
        await asyncio.wait({step_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
        if watch_task.done():
            watch_task.result()
        await step_task
    finally:
        for task in (step_task, watch_task):
            task.cancel()
        await asyncio.gather(step_task, watch_task, return_exceptions=True)


async def _first_node_ready(api: Api, within: float) -> None:
    deadline = time.monotonic() + within
    interval = min(1.0, within / 4)
    while True:
        with contextlib.suppress(BackendError, aiohttp.ClientError, TimeoutError):
            items, _ = await api.list("/api/v1/nodes")
            if any(node_ready(n) for n in items):
                return
        if time.monotonic() > deadline:
            raise NodesNeverReady(
                f"no node Ready {within:g}s after the nodes step began (KWOK not running: "
                '"bind: address already in use" in its log?)'
            )
        await asyncio.sleep(interval)


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
