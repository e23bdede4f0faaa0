"""NodeMetric objects with fresh usage for every bench node, so that LoadAwareScheduling works on
real numbers during a throughput run (``--load-aware``).

TODO(koordlet --simulate): written by the harness as a stand-in for koordlet's simulation mode
(issue 15 item 2), the intended writer; switch once it is on main.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from apis.client.kubernetes import request_json
from e2e.bench.kube_api import Api, create_all, run_all

__all__ = ["report_node_metrics", "usage_of"]

_PATH = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
MAX_USAGE_PERCENT = 30
"""Reported usage cycles over 0..30% of each node: with the workload's estimates no node reaches
the default 65% cpu threshold, so every pod still fits and the rates compare like for like."""


def usage_of(index: int, cpu_milli: int, memory_bytes: int) -> dict[str, str]:
    percent = (index * 7) % (MAX_USAGE_PERCENT + 1)
    return {"cpu": f"{cpu_milli * percent // 100}m", "memory": str(memory_bytes * percent // 100)}


async def report_node_metrics(
    api: Api, nodes: Sequence[str], cpu_milli: int, memory_bytes: int, concurrency: int
) -> None:
    """Create a NodeMetric per node and write its status (updateTime now)."""
    objects = [
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        }
        for name in nodes
    ]
    await create_all(api, lambda _: _PATH, objects, "nodemetrics", concurrency)
    updated = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def patch(index: int, name: str) -> Any:
        body = {
            "status": {
                "updateTime": updated,
                "nodeMetric": {"nodeUsage": {"resources": usage_of(index, cpu_milli, memory_bytes)}},
            }
        }

        async def call() -> None:
            await request_json(
                api.client,
                "PATCH",
                f"{_PATH}/{name}/status",
                what=f"nodemetric {name} status",
                body=body,
                content_type="application/merge-patch+json",
                seconds=60,
            )

        return call

    await run_all([patch(i, name) for i, name in enumerate(nodes)], concurrency)
