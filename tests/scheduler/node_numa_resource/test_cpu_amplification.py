"""CPU amplification (algorithms 11.3 step 4, 11.5): on a node whose
``node.koordinator.sh/resource-amplification-ratio`` gives cpu 1.5, 32 physical CPUs are 48
allocatable, and every CPU a cpuset binds counts as ceil(1000 x 1.5) milli-CPU against them.

The node is 1 socket x 2 NUMA nodes x 8 cores x 2 threads (32 CPUs, ``nrt_fixtures``), no NUMA
policy: a koord-prod LSR pod gets a cpuset (FullPCPUs by default), an LS pod does not.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.client.backend import NODES, PODS
from scheduler.backend.memory import MemoryBackend
from scheduler.plugins.node_numa_resource.amplification import amplified_cpu_fits
from scheduler.plugins.node_numa_resource.plugin import NRTS
from tests.scheduler.node_numa_resource.nrt_fixtures import nrt, pod
from tests.scheduler.node_numa_resource.test_numa_scheduling import (
    bound,
    failures,
    schedule,
    start,
    status_of,
    until,
)

RATIO = "node.koordinator.sh/resource-amplification-ratio"
AMPLIFIED = "Insufficient amplified cpu"
PAGE = Path(__file__).resolve().parents[3] / "docs" / "numa.md"

ONLY_NUMA_SCORE = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeNUMAResource}]
"""


def amplified_node(name: str = "n0", ratio: str | None = '{"cpu":1.50}', cpu: str = "48") -> MemoryBackend:
    backend = MemoryBackend()
    add_node(backend, name, ratio, cpu)
    return backend


def add_node(backend: MemoryBackend, name: str, ratio: str | None, cpu: str) -> None:
    annotations = {RATIO: ratio} if ratio is not None else {}
    body: dict[str, Any] = {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": {"cpu": cpu, "memory": "128Gi", "pods": "110"}},
    }
    backend.apply(NODES, body)
    backend.apply(NRTS, nrt(name, numa_nodes=2))


async def refused(backend: MemoryBackend, body: dict[str, Any]) -> str:
    backend.apply(PODS, body)
    name = body["metadata"]["name"]
    await until(lambda: bool(failures(backend, name)))
    assert name not in bound(backend)
    return failures(backend, name)[0]


# ---- the fit check by hand ----


def test_a_cpuset_pod_leaves_48_minus_24() -> None:
    """16 cpuset CPUs on 48 amplified: 16000 requested - 16000 held + ceil(16000 x 1.5) = 24000,
    24000 left: a second 16-CPU cpuset pod (24000) just fits, a 17-CPU one (25500) does not; an
    ordinary 20-cpu pod fits, and 24 cpu is the most that does."""
    node = {"ratio": 1.5, "node_allocatable": 48000, "node_requested": 16000, "cpuset_cpus": 16}
    assert amplified_cpu_fits(pod_milli_cpu=16000, pod_binds=True, **node)
    assert not amplified_cpu_fits(pod_milli_cpu=17000, pod_binds=True, **node)
    assert amplified_cpu_fits(pod_milli_cpu=20000, pod_binds=False, **node)
    assert amplified_cpu_fits(pod_milli_cpu=24000, pod_binds=False, **node)
    assert not amplified_cpu_fits(pod_milli_cpu=24001, pod_binds=False, **node)


def test_after_an_ordinary_20_cpu_pod_a_second_16_cpu_cpuset_pod_is_refused() -> None:
    """36000 requested (16 cpuset + 20), 16 CPUs held: 20000 + 24000 = 44000, 4000 left: a 16-CPU
    cpuset pod needs 24000. Unamplified it would still fail (16000 > 12000); 2 CPUs (3000) fit."""
    node = {"ratio": 1.5, "node_allocatable": 48000, "node_requested": 36000, "cpuset_cpus": 16}
    assert not amplified_cpu_fits(pod_milli_cpu=16000, pod_binds=True, **node)
    assert amplified_cpu_fits(pod_milli_cpu=2000, pod_binds=True, **node)
    assert not amplified_cpu_fits(pod_milli_cpu=3000, pod_binds=True, **node)


@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_a_ratio_of_at_most_one_amplifies_nothing(ratio: float) -> None:
    assert amplified_cpu_fits(
        pod_milli_cpu=48000, pod_binds=True, ratio=ratio, node_allocatable=0, node_requested=0, cpuset_cpus=0
    )


def test_the_amplified_size_is_koordinators_float_ceil() -> None:
    """3 CPUs at 1.09: float64 3000 x 1.09 = 3270.0000000000005, ceil 3271 (Koordinator's
    ``Amplify``), so 3270 left is not enough."""
    node = {"ratio": 1.09, "node_requested": 0, "cpuset_cpus": 0}
    assert amplified_cpu_fits(pod_milli_cpu=3000, pod_binds=True, node_allocatable=3271, **node)
    assert not amplified_cpu_fits(pod_milli_cpu=3000, pod_binds=True, node_allocatable=3270, **node)


# ---- through the scheduler ----


async def test_cpuset_cpus_count_amplified_against_the_node() -> None:
    """After a 16-CPU cpuset pod (24 of 48 counted): an ordinary 25-cpu pod is refused though 16 +
    25 <= 48 (NodeResourcesFit admits it); 17 cpuset CPUs (25500) are refused by the same check, and
    an ordinary 24-cpu pod fits exactly."""
    backend = amplified_node()
    await schedule(backend, [pod("a", "16")])
    assert status_of(backend, "a")["cpuset"] == "0-7,16-23"
    stop, task = await start(backend)
    try:
        assert AMPLIFIED in await refused(backend, pod("ordinary-25", "25", qos="LS"))
        assert AMPLIFIED in await refused(backend, pod("cpuset-17", "17"))
        backend.apply(PODS, pod("ordinary-24", "24", qos="LS"))
        await until(lambda: "ordinary-24" in bound(backend))
    finally:
        stop.set()
        await task


async def test_after_a_cpuset_pod_and_an_ordinary_20_cpu_pod_4_cpu_are_left() -> None:
    """48 - 24 - 20 = 4: a 3-CPU cpuset pod (4500) is refused though 12 cpu are unrequested and 16
    CPUs unbound; a 2-CPU one (3000) runs. (A second 16-CPU cpuset pod would be refused already by
    NodeResourcesFit, 16 > 12, which runs first.)"""
    backend = amplified_node()
    await schedule(backend, [pod("a", "16"), pod("ordinary", "20", qos="LS")])
    stop, task = await start(backend)
    try:
        assert AMPLIFIED in await refused(backend, pod("cpuset-3", "3"))
        backend.apply(PODS, pod("cpuset-2", "2"))
        await until(lambda: "cpuset-2" in bound(backend))
    finally:
        stop.set()
        await task


@pytest.mark.parametrize("ratio", [None, '{"cpu":1.00}', '{"memory":1.50}', ""])
async def test_without_a_cpu_ratio_above_one_cpuset_cpus_count_as_requested(ratio: str | None) -> None:
    """The same node: 16 + 25 <= 48, the ordinary pod runs."""
    backend = amplified_node(ratio=ratio)
    await schedule(backend, [pod("a", "16"), pod("ordinary-25", "25", qos="LS")])
    assert set(bound(backend)) == {"a", "ordinary-25"}


async def test_a_malformed_ratio_is_no_amplification_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = amplified_node(ratio='{"cpu":"1.5"')
    with caplog.at_level(logging.WARNING):
        await schedule(backend, [pod("a", "16"), pod("ordinary-25", "25", qos="LS")])
    assert set(bound(backend)) == {"a", "ordinary-25"}
    warnings = [e for e in backend.events if e.regarding.kind == "Node" and e.type == "Warning"]
    assert len(warnings) == 1, warnings
    assert RATIO in warnings[0].message
    assert warnings[0].regarding.name == "n0"
    assert sum(RATIO in r.getMessage() for r in caplog.records) == 1


async def test_score_counts_cpuset_cpus_amplified() -> None:
    """A 16-CPU cpuset pod, NodeNUMAResource the only scorer (LeastAllocated cpu):
    amplified (48 allocatable, ratio 1.5): (48000 - 24000) x 100 / 48000 = 50;
    plain (40 allocatable): (40000 - 16000) x 100 / 40000 = 60, so the pod goes to plain.
    Unamplified, the first would score (48000 - 16000) x 100 / 48000 = 66 and win."""
    backend = amplified_node("amplified")
    add_node(backend, "plain", None, "40")
    await schedule(backend, [pod("a", "16")], ONLY_NUMA_SCORE)
    assert bound(backend) == {"a": "plain"}


async def test_the_documented_node_refuses_an_ordinary_25_cpu_pod_after_a_16_cpu_cpuset_pod() -> None:
    """docs/numa.md "CPU amplification": its Node, a 16-CPU cpuset pod, then 25 cpu do not fit."""
    text = PAGE.read_text()
    offset = text.index("### CPU amplification")
    block = re.search(r"```yaml\n(.*?)```", text[offset:], re.S)
    assert block is not None
    body = yaml.safe_load(block.group(1))
    backend = MemoryBackend()
    backend.apply(NODES, body)
    backend.apply(NRTS, nrt(body["metadata"]["name"], numa_nodes=2))
    await schedule(backend, [pod("a", "16")])
    stop, task = await start(backend)
    try:
        assert AMPLIFIED in await refused(backend, pod("ordinary-25", "25", qos="LS"))
    finally:
        stop.set()
        await task


# ---- NUMA nodes of an amplified node (Koordinator's amplifyNUMANodeResources) ----


def _numa_cpu(backend: MemoryBackend, name: str) -> dict[int, str]:
    return {int(r["node"]): r["resources"]["cpu"] for r in status_of(backend, name)["numaNodeResources"]}


async def test_a_numa_node_holds_as_much_cpu_as_it_is_amplified_to() -> None:
    """Each NUMA node's 16 CPUs are 24 cpu at 1.5, as the node's 32 are 48: an ordinary
    SingleNUMANode pod of 20 cpu fits one NUMA node (against 16 it would fit none)."""
    backend = amplified_node()
    await schedule(backend, [pod("wide", "20", qos="LS", numa_policy="SingleNUMANode")])
    assert bound(backend) == {"wide": "n0"}
    assert list(_numa_cpu(backend, "wide").values()) == ["20"]


async def test_a_numa_nodes_cpuset_cpus_count_amplified_against_it() -> None:
    """An 8-CPU cpuset pod on NUMA 0 counts 12 of its 24, and an ordinary 20-cpu pod takes NUMA 1:
    a 13-cpu SingleNUMANode pod then fits neither (12 and 4 left), though NUMA 0 has 16 unrequested
    and the node 20 (48 - 28) of which 16 count once the cpuset is amplified."""
    backend = amplified_node()
    await schedule(
        backend,
        [
            pod("pinned", "8", numa_policy="SingleNUMANode"),
            pod("big", "20", qos="LS", numa_policy="SingleNUMANode"),
        ],
    )
    pinned = _numa_cpu(backend, "pinned")
    assert list(pinned.values()) == ["8"]
    (big_numa,) = _numa_cpu(backend, "big")
    assert big_numa not in pinned
    stop, task = await start(backend)
    try:
        reason = await refused(backend, pod("thirteen", "13", qos="LS", numa_policy="SingleNUMANode"))
        assert "SingleNUMANode" in reason
        backend.apply(PODS, pod("twelve", "12", qos="LS", numa_policy="SingleNUMANode"))
        await until(lambda: "twelve" in bound(backend))
        assert list(_numa_cpu(backend, "twelve")) == list(pinned)
    finally:
        stop.set()
        await task


async def test_a_memory_ratio_amplifies_the_numa_nodes_memory_too() -> None:
    """With memory amplified by 1.5 each NUMA node's 64Gi holds 96Gi, as the node's allocatable
    does: an 80Gi SingleNUMANode pod fits one NUMA node (against 64Gi it would fit none)."""
    backend = amplified_node(ratio='{"memory":1.50}', cpu="32")
    await schedule(backend, [pod("memory-80", "2", "80Gi", qos="LS", numa_policy="SingleNUMANode")])
    assert bound(backend) == {"memory-80": "n0"}
    (only,) = status_of(backend, "memory-80")["numaNodeResources"]
    assert only["resources"]["memory"] == "80Gi"
