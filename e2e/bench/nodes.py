"""KWOK nodes made schedulable: wait until they are Ready and lift the ``not-ready`` taint the API
server puts on every new node, as kube-controller-manager would (only faster)."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

from apis.client.kubernetes import request_json
from e2e.bench.harness import BenchError, log_progress
from e2e.bench.kube_api import Api, run_all

__all__ = [
    "NOT_READY_TAINT",
    "has_not_ready_taint",
    "lift_not_ready",
    "node_ready",
    "wait_nodes_schedulable",
]

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


async def wait_nodes_schedulable(api: Api, expected: int, concurrency: int, within: float = 900.0) -> None:
    """Until ``expected`` nodes are Ready and rid of the ``not-ready`` taint (their own taints stay).

    The API server's admission taints every new node ``node.kubernetes.io/not-ready:NoSchedule``;
    KWOK marks the nodes Ready within seconds, but kube-controller-manager's node lifecycle controller
    lifts the taint at only about 5 nodes/s (its client QPS is 20). So the harness lifts it itself
    from the nodes that are Ready, as that controller would.
    """
    deadline = time.monotonic() + within
    while True:
        nodes, _ = await api.list("/api/v1/nodes")
        ready = [n for n in nodes if node_ready(n)]
        tainted = [n for n in ready if has_not_ready_taint(n)]
        schedulable = len(ready) - len(tainted)
        log_progress(f"nodes: {len(ready)}/{expected} Ready, {schedulable}/{expected} schedulable")
        if schedulable >= expected:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"only {schedulable}/{expected} nodes Ready and schedulable after {within:.0f}s")
        if tainted:
            await run_all([functools.partial(lift_not_ready, api, n) for n in tainted], concurrency)
        else:
            await asyncio.sleep(2)


def has_not_ready_taint(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") == NOT_READY_TAINT for t in taints)


async def lift_not_ready(api: Api, node: dict[str, Any]) -> None:
    """Remove the ``not-ready`` taint from ``node`` and keep its other taints."""
    name = node["metadata"]["name"]
    kept = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    await request_json(
        api.client,
        "PATCH",
        f"/api/v1/nodes/{name}",
        what=f"untaint node {name}",
        body={"spec": {"taints": kept or None}},
        content_type="application/merge-patch+json",
    )


def node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
