"""docs/whatif.md's worked example, replayed: koord-scheduler on the `make up` cluster's nodes
(e2e/clusters/dev.yaml) with the v1.7 topology and PriorityClasses and `make up`'s scheduler
configuration, in memory, prints through `koordctl whatif` exactly the tables the guide shows."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import yaml

from apis.client.backend import TOPOLOGIES
from e2e.components import LOCAL_SCHEDULER_CONFIG
from scheduler.http import SchedulerHTTPServer
from scheduler.koordctl import main as koordctl
from scheduler.metrics import SchedulerMetrics
from scheduler.simulator.description import load
from scheduler.simulator.run import cluster_backend, memory_app
from scheduler.whatif.priorities import PRIORITYCLASSES

ROOT = Path(__file__).parents[2]
GUIDE = (ROOT / "docs" / "whatif.md").read_text()
JOB = "docs/examples/whatif/train-must-gather.yaml"


def _printed(command: str) -> str:
    """The lines the guide shows after ``$ command``, up to the next command or the block's end."""
    block = re.search(r"```\n(\$ koordctl whatif .*?)```", GUIDE, re.S)
    assert block is not None
    parts = re.split(r"^\$ (.*)\n", block.group(1), flags=re.M)
    shown = dict(zip(parts[1::2], parts[2::2], strict=True))
    return shown[command]


async def test_the_worked_example_prints_what_the_guide_shows(capsys: pytest.CaptureFixture[str]) -> None:
    backend = cluster_backend(load(ROOT / "e2e" / "clusters" / "dev.yaml"))
    for doc in yaml.safe_load_all((ROOT / "docs/examples/v1.7/02-cluster-network-topology.yaml").read_text()):
        backend.apply(TOPOLOGIES, doc)
    for doc in yaml.safe_load_all((ROOT / "docs/examples/v1.7/04-priority-classes.yaml").read_text()):
        backend.apply(PRIORITYCLASSES, doc)
    app = memory_app(LOCAL_SCHEDULER_CONFIG, backend)
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_nodes.wait()
        await app.handlers.synced_pods.wait()
        async with SchedulerHTTPServer(
            SchedulerMetrics(), ready=lambda: True, what_if=app.whatif.answer, port=0
        ) as server:
            for output in ((), ("-o", "wide")):
                capsys.readouterr()
                args = ["whatif", "-f", str(ROOT / JOB), "--server", server.url, *output]
                assert await asyncio.to_thread(koordctl, args) == 0
                command = " ".join(["koordctl whatif -f", JOB, *output])
                assert capsys.readouterr().out == _printed(command)
    finally:
        stop.set()
        await task
