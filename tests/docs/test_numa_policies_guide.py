"""docs/numa.md "NUMA topology policies": the "Try it" YAML, applied as a user would, gives the
resource-status and the pending reason the page prints (in-memory backend, the real scheduler)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from apis.client.backend import NODES, PODS
from scheduler.backend.memory import MemoryBackend
from scheduler.plugins.node_numa_resource.plugin import NRTS
from tests.scheduler.node_numa_resource.nrt_fixtures import cpu_topology_annotation
from tests.scheduler.node_numa_resource.test_numa_scheduling import bound, failures, start, status_of, until

PAGE = Path(__file__).resolve().parents[2] / "docs" / "numa.md"


def section(title: str) -> str:
    text = PAGE.read_text()
    start_at = text.index(f"## {title}")
    return text[start_at : text.index("\n## ", start_at + 1)]


def documents() -> list[dict[str, Any]]:
    block = re.findall(r"```yaml\n(.*?)```", section("NUMA topology policies"), re.S)[-1]
    return [doc for doc in yaml.safe_load_all(block) if doc]


def console_lines() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", section("NUMA topology policies"), re.S)
    block = next(b for b in blocks if "numa-too-big" in b)  # the Try-it's; the Gangs paragraph has its own
    return [line for line in block.splitlines() if not line.startswith("$")]


def test_the_cpu_topology_on_the_page_is_the_machine_it_describes() -> None:
    nrt = next(d for d in documents() if d["kind"] == "NodeResourceTopology")
    annotation = nrt["metadata"]["annotations"]["node.koordinator.sh/cpu-topology"]
    assert json.loads(annotation) == json.loads(cpu_topology_annotation())


async def test_the_try_it_yaml_gives_what_the_page_prints() -> None:
    status_line, reason_line = console_lines()
    backend = MemoryBackend()
    for doc in documents():
        if doc["kind"] == "Node":
            backend.apply(NODES, doc)
        elif doc["kind"] == "NodeResourceTopology":
            backend.apply(NRTS, doc)
    stop, task = await start(backend)
    try:
        for doc in documents():
            if doc["kind"] == "Pod":
                doc["metadata"]["namespace"] = "default"  # kubectl's default namespace
                backend.apply(PODS, doc)
        await until(lambda: "numa-lsr" in bound(backend) and bool(failures(backend, "numa-too-big")))
        assert status_of(backend, "numa-lsr") == json.loads(status_line)
        assert reason_line in failures(backend, "numa-too-big")[-1]
        assert "numa-too-big" not in bound(backend)
    finally:
        stop.set()
        await task
