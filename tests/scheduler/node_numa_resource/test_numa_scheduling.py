"""NodeNUMAResource through the scheduler process on the in-memory backend: NRTs and pods in, the
node, the FailedScheduling message and the pod's ``resource-status`` out.

Every node is the issue's machine (``nrt_fixtures``): 2 sockets x 2 NUMA nodes x 8 cores x 2
threads, NUMA node n = cores 8n..8n+7 = CPUs 8n..8n+7 and their siblings 32+8n..32+8n+7. The
expected cpusets are worked out by hand in each test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from apis.client.backend import DEVICES, NODES, PODS
from apis.extension.numa import ANNOTATION_RESOURCE_SPEC, ANNOTATION_RESOURCE_STATUS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.node_numa_resource.plugin import NRTS
from tests.scheduler.node_numa_resource.nrt_fixtures import node, nrt, pod
from tests.scheduler.plugins.device_share_fixtures import device, gpu
from tests.scheduler.plugins.device_share_rdma_fixtures import nic

POLICY = "node.koordinator.sh/numa-topology-policy"

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
"""

MOST_ALLOCATED = (
    CONFIG
    + """\
  pluginConfig:
  - name: NodeNUMAResource
    args:
      numaScoringStrategy: {type: MostAllocated}
"""
)


async def start(backend: MemoryBackend, config: str = CONFIG) -> tuple[asyncio.Event, asyncio.Task[None]]:
    loaded = load_config(config, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    settings = AppSettings(
        profiles=tuple(loaded.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return stop, task


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def status_of(backend: MemoryBackend, name: str) -> dict[str, Any]:
    found = next(p for p in backend.list(PODS) if p.metadata.name == name)
    value: dict[str, Any] = json.loads((found.metadata.annotations or {})[ANNOTATION_RESOURCE_STATUS])
    return value


def failures(backend: MemoryBackend, name: str) -> list[str]:
    return [e.message for e in backend.events if e.reason == "FailedScheduling" and e.regarding.name == name]


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


async def schedule(
    backend: MemoryBackend,
    pods: list[dict[str, Any]],
    config: str = CONFIG,
    *,
    wait_for: list[str] | None = None,
) -> None:
    """Start the scheduler, create ``pods`` one after the other (each bound before the next), stop."""
    stop, task = await start(backend, config)
    try:
        for body in pods:
            backend.apply(PODS, body)
            name = body["metadata"]["name"]
            if wait_for is None or name in wait_for:
                await until(lambda name=name: name in bound(backend))
    finally:
        stop.set()
        await task


def numa_node(labels: dict[str, str] | None = None, name: str = "n0", **nrt_kw: Any) -> MemoryBackend:
    backend = MemoryBackend()
    backend.apply(NODES, node(name, labels=labels))
    backend.apply(NRTS, nrt(name, **nrt_kw))
    return backend


# ---- SingleNUMANode ----


async def test_single_numa_node_pods_spread_over_numa_nodes_under_least_allocated() -> None:
    """The first 4-CPU pod: four idle NUMA nodes score alike, the lowest id wins: NUMA 0, its cores 0
    and 1 whole (FullPCPUs by default): CPUs 0-1 and siblings 32-33. The second: NUMA 0 now scores
    lower (LeastAllocated), NUMA 1 wins: cores 8 and 9."""
    backend = numa_node({POLICY: "SingleNUMANode"})
    await schedule(backend, [pod("a", "4"), pod("b", "4")])
    assert status_of(backend, "a") == {
        "cpuset": "0-1,32-33",
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}],
    }
    assert status_of(backend, "b") == {
        "cpuset": "8-9,40-41",
        "numaNodeResources": [{"node": 1, "resources": {"cpu": "4", "memory": "1Gi"}}],
    }


async def test_most_allocated_numa_scoring_packs_the_fuller_numa_node() -> None:
    backend = numa_node({POLICY: "SingleNUMANode"})
    await schedule(backend, [pod("a", "4"), pod("b", "4")], MOST_ALLOCATED)
    assert status_of(backend, "a")["cpuset"] == "0-1,32-33"
    assert status_of(backend, "b") == {
        "cpuset": "2-3,34-35",
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}],
    }


async def test_a_pod_no_numa_node_can_hold_stays_pending_with_the_policy_named() -> None:
    """20 CPUs: more than one NUMA node's 16."""
    backend = numa_node({POLICY: "SingleNUMANode"})
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("big", "20"))
        await until(lambda: bool(failures(backend, "big")))
        message = failures(backend, "big")[0]
        assert "node(s) cannot satisfy SingleNUMANode policy: Unsatisfied NUMA cpu" in message, message
        assert "big" not in bound(backend)
    finally:
        stop.set()
        await task


async def test_the_kubelet_policy_in_the_nrt_takes_precedence_over_the_node_label() -> None:
    """The label says Restricted (20 CPUs would fit on two NUMA nodes), the kubelet single-numa-node
    at container scope: SingleNUMANode, and the pod stays pending."""
    backend = numa_node({POLICY: "Restricted"}, policies=["SingleNUMANodeContainerLevel"])
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("big", "20"))
        await until(lambda: bool(failures(backend, "big")))
        assert "cannot satisfy SingleNUMANode policy" in failures(backend, "big")[0]
    finally:
        stop.set()
        await task


# ---- Restricted, BestEffort ----


async def test_restricted_takes_the_two_lowest_numa_nodes_and_splits_evenly() -> None:
    """20 CPUs over NUMA {0, 1}: 10 each (cores 0-4 and 8-12 whole), memory 1Gi halved."""
    backend = numa_node({POLICY: "Restricted"})
    await schedule(backend, [pod("wide", "20")])
    assert status_of(backend, "wide") == {
        "cpuset": "0-4,8-12,32-36,40-44",
        "numaNodeResources": [
            {"node": 0, "resources": {"cpu": "10", "memory": "512Mi"}},
            {"node": 1, "resources": {"cpu": "10", "memory": "512Mi"}},
        ],
    }


async def test_restricted_kubelet_levels_map_to_restricted() -> None:
    backend = numa_node(policies=["RestrictedPodLevel"])
    await schedule(backend, [pod("wide", "20")])
    assert [e["node"] for e in status_of(backend, "wide")["numaNodeResources"]] == [0, 1]


async def test_best_effort_is_checked_in_filter_and_falls_back_to_all_numa_nodes() -> None:
    """BestEffort: a pod that fits one NUMA node gets one; one that fits none still runs."""
    backend = numa_node({POLICY: "BestEffort"})
    await schedule(backend, [pod("small", "2", qos="LS"), pod("huge", "40", qos="LS")])
    assert status_of(backend, "small") == {
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "2", "memory": "1Gi"}}]
    }
    assert len(status_of(backend, "huge")["numaNodeResources"]) >= 3


async def test_a_pod_policy_different_from_the_nodes_is_unresolvable_there() -> None:
    backend = numa_node({POLICY: "SingleNUMANode"})
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("r", "2", numa_policy="Restricted"))
        await until(lambda: bool(failures(backend, "r")))
        assert "node(s) NUMA Topology policy not match" in failures(backend, "r")[0]
    finally:
        stop.set()
        await task


async def test_a_pod_policy_applies_on_a_node_without_one() -> None:
    backend = numa_node()
    await schedule(backend, [pod("s", "4", numa_policy="SingleNUMANode", qos="LS")])
    assert status_of(backend, "s") == {
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "1Gi"}}]
    }


# ---- cpusets without a NUMA policy ----


async def test_an_lsr_pod_gets_whole_cores_on_a_node_without_policy() -> None:
    backend = numa_node()
    await schedule(backend, [pod("lsr", "4")])
    status = status_of(backend, "lsr")
    assert status["cpuset"] == "0-1,32-33"
    found = next(p for p in backend.list(PODS) if p.metadata.name == "lsr")
    # The implicit bind policy is written back, as Koordinator does.
    assert json.loads((found.metadata.annotations or {})[ANNOTATION_RESOURCE_SPEC]) == {
        "preferredCPUBindPolicy": "FullPCPUs"
    }


async def test_an_ls_pod_gets_no_cpuset_and_no_annotation() -> None:
    backend = numa_node()
    await schedule(backend, [pod("ls", "4", qos="LS")])
    found = next(p for p in backend.list(PODS) if p.metadata.name == "ls")
    assert ANNOTATION_RESOURCE_STATUS not in (found.metadata.annotations or {})


async def test_required_full_pcpus_with_an_odd_count_is_unresolvable() -> None:
    backend = numa_node()
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("odd", "3", spec={"requiredCPUBindPolicy": "FullPCPUs"}))
        await until(lambda: bool(failures(backend, "odd")))
        assert "not a multiple of the node's 2 CPUs per core" in failures(backend, "odd")[0]
    finally:
        stop.set()
        await task


async def test_a_full_pcpus_only_kubelet_makes_an_ls_pod_bind_whole_cores() -> None:
    kubelet = {"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0,32"}
    backend = numa_node(kubelet=kubelet)
    await schedule(backend, [pod("ls", "2", qos="LS")])
    # CPUs 0 and 32 are the kubelet's, never given. LeastAllocated takes the NUMA node with the most
    # free CPUs, then the socket with the most: NUMA 1 and 2 have 16, socket 1 (NUMA 2) 32 to
    # socket 0's 30: core 16 (CPUs 16 and 48).
    assert status_of(backend, "ls")["cpuset"] == "16,48"
    found = next(p for p in backend.list(PODS) if p.metadata.name == "ls")
    assert json.loads((found.metadata.annotations or {})[ANNOTATION_RESOURCE_SPEC]) == {
        "requiredCPUBindPolicy": "FullPCPUs"
    }


async def test_a_fractional_cpu_on_a_full_pcpus_only_node_is_unresolvable() -> None:
    backend = numa_node({"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"})
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("frac", "1500m", qos="LS"))
        await until(lambda: bool(failures(backend, "frac")))
        assert "the requested CPUs must be integer" in failures(backend, "frac")[0]
    finally:
        stop.set()
        await task


async def test_bound_pods_cpusets_are_read_back_and_never_given_again() -> None:
    """A pod bound before the scheduler started holds cores 0-1 (its resource-status): the new pod,
    packed onto the fuller NUMA node 0 (MostAllocated), gets cores 2-3, not 0-1 again."""
    backend = numa_node()
    held = pod("old", "4", node_name="n0")
    held["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps(
        {"cpuset": "0-1,32-33", "numaNodeResources": [{"node": 0, "resources": {"cpu": "4"}}]}
    )
    backend.apply(PODS, held)
    await schedule(backend, [pod("new", "4")], MOST_ALLOCATED)
    assert status_of(backend, "new")["cpuset"] == "2-3,34-35"


# ---- exclusivity ----


@pytest.mark.parametrize(
    ("exclusive", "numa"),
    [pytest.param("Required", 2, id="required-avoids-shared"), pytest.param(None, 0, id="none-packs")],
)
async def test_single_numa_node_exclusive_keeps_a_pod_off_a_shared_numa_node(
    exclusive: str | None, numa: int
) -> None:
    """``wide`` spans NUMA 0 and 1. Under MostAllocated the next pod would pack onto NUMA 0; with
    ``singleNUMANodeExclusive: Required`` it must take an idle NUMA node (2)."""
    backend = numa_node({POLICY: "Restricted"})
    small = pod("small", "2", numa_policy="Restricted", qos="LS")
    if exclusive is not None:
        small = pod("small", "2", numa_policy="Restricted", exclusive=exclusive, qos="LS")
    else:
        small["metadata"]["annotations"]["scheduling.koordinator.sh/numa-topology-spec"] = json.dumps(
            {"numaTopologyPolicy": "Restricted", "singleNUMANodeExclusive": "Preferred"}
        )
    await schedule(backend, [pod("wide", "20"), small], MOST_ALLOCATED)
    assert [e["node"] for e in status_of(backend, "small")["numaNodeResources"]] == [numa]


# ---- batch resources and GPUs ----


async def test_batch_cpu_is_placed_on_numa_nodes_like_cpu() -> None:
    """Each NUMA node reports 8000 batch milli-cores: two pods of 6000 each take a NUMA node of
    their own (together they would not fit one), and no cpuset (BE pods get none)."""
    backend = numa_node({POLICY: "SingleNUMANode"}, extra={"kubernetes.io/batch-cpu": "8000"})
    with_batch = node("n0", labels={POLICY: "SingleNUMANode"})
    with_batch["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "32000"
    backend.apply(NODES, with_batch)
    await schedule(backend, [batch_pod("be1"), batch_pod("be2")])
    assert status_of(backend, "be1") == {
        "numaNodeResources": [{"node": 0, "resources": {"kubernetes.io/batch-cpu": "6k", "memory": "1Gi"}}]
    }
    assert [e["node"] for e in status_of(backend, "be2")["numaNodeResources"]] == [1]


def batch_pod(name: str) -> dict[str, Any]:
    body = pod(name, "1", qos="BE")
    wanted = {"kubernetes.io/batch-cpu": "6000", "memory": "1Gi"}
    body["spec"]["containers"][0]["resources"] = {"requests": wanted, "limits": wanted}
    return body


async def test_gpu_and_cpus_land_on_the_same_numa_node() -> None:
    """The node's GPUs hang off NUMA 1 and 2; a Restricted pod asking for one GPU and 4 CPUs gets
    NUMA 1 (the lowest that holds both), CPUs of cores 8-9 and card 2 (NUMA 1's first)."""
    backend = numa_node({POLICY: "Restricted"})
    backend.apply(
        NODES,
        {
            **node("n0", labels={POLICY: "Restricted"}),
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"}},
        },
    )
    cards = [gpu(2, numa=1), gpu(3, numa=1), gpu(4, numa=2), gpu(5, numa=2)]
    backend.apply(DEVICES, device("n0", *cards).model_dump(by_alias=True, exclude_none=True))
    await schedule(backend, [pod("train", "4", extra={"nvidia.com/gpu": "1"})])
    status = status_of(backend, "train")
    assert status["cpuset"] == "8-9,40-41"
    assert [e["node"] for e in status["numaNodeResources"]] == [1]
    found = next(p for p in backend.list(PODS) if p.metadata.name == "train")
    allocated = json.loads((found.metadata.annotations or {})["scheduling.koordinator.sh/device-allocated"])
    assert [entry["minor"] for entry in allocated["gpu"]] == [2]


# ---- node scoring ----

PACKING = (
    CONFIG
    + """\
  pluginConfig:
  - name: NodeNUMAResource
    args:
      scoringStrategy: {type: MostAllocated}
      numaScoringStrategy: {type: MostAllocated}
"""
)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(PACKING, "n0", id="most-allocated-packs"),
        pytest.param(CONFIG, "n1", id="least-allocated-spreads"),
    ],
)
async def test_nodes_are_scored_by_the_numa_nodes_the_pod_would_get(config: str, expected: str) -> None:
    """n0 runs a pod holding 8 CPUs of NUMA node 0, n1 nothing. Packing: the new pod joins NUMA 0 of
    n0 (12 of 16 CPUs used: 75 against n1's 25); spreading: n1."""
    backend = MemoryBackend()
    for name in ("n0", "n1"):
        backend.apply(NODES, node(name, labels={POLICY: "SingleNUMANode"}))
        backend.apply(NRTS, nrt(name))
    held = pod("old", "8", qos="LS", node_name="n0")
    held["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps(
        {"numaNodeResources": [{"node": 0, "resources": {"cpu": "8", "memory": "1Gi"}}]}
    )
    backend.apply(PODS, held)
    await schedule(backend, [pod("new", "4", qos="LS")], config)
    assert bound(backend)["new"] == expected


async def test_an_rdma_nic_and_cpus_land_on_the_same_numa_node() -> None:
    """The only NIC hangs off NUMA node 2: a Restricted pod asking for 4 CPUs and an RDMA share gets
    NUMA node 2 (cores 16-17) and that NIC."""
    backend = MemoryBackend()
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110", "koordinator.sh/rdma": "100"}
    backend.apply(
        NODES,
        {
            "metadata": {"name": "n0", "labels": {POLICY: "Restricted"}},
            "status": {"allocatable": allocatable},
        },
    )
    backend.apply(NRTS, nrt("n0"))
    backend.apply(
        DEVICES, device("n0", nic(1, numa=2, pcie="pci2")).model_dump(by_alias=True, exclude_none=True)
    )
    await schedule(backend, [pod("rdma", "4", extra={"koordinator.sh/rdma": "1"})])
    status = status_of(backend, "rdma")
    assert status["cpuset"] == "16-17,48-49"
    assert [e["node"] for e in status["numaNodeResources"]] == [2]
    found = next(p for p in backend.list(PODS) if p.metadata.name == "rdma")
    allocated = json.loads((found.metadata.annotations or {})["scheduling.koordinator.sh/device-allocated"])
    assert [entry["minor"] for entry in allocated["rdma"]] == [1]


# ---- preemption ----

PREEMPTING = (
    CONFIG
    + """\
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""
)


async def test_preemption_frees_the_cpus_a_single_numa_pod_needs() -> None:
    """Four low-priority pods hold a whole NUMA node each (their resource-status cpusets). An urgent
    8-CPU pod fits no NUMA node until a victim's CPUs count as free in the preemption's what-if:
    exactly one low pod is evicted and the urgent pod gets CPUs of its NUMA node."""
    backend = numa_node({POLICY: "SingleNUMANode"})
    for numa in range(4):
        low = pod(f"low-{numa}", "16", node_name="n0")
        low["spec"]["priority"] = 1000
        cpus = f"{8 * numa}-{8 * numa + 7},{32 + 8 * numa}-{32 + 8 * numa + 7}"
        low["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps(
            {
                "cpuset": cpus,
                "numaNodeResources": [{"node": numa, "resources": {"cpu": "16", "memory": "1Gi"}}],
            }
        )
        backend.apply(PODS, low)
    urgent = pod("urgent", "8")
    urgent["spec"]["priority"] = 1_000_000
    await schedule(backend, [urgent], PREEMPTING)
    evicted = [e.regarding.name for e in backend.events if e.reason == "Preempted"]
    assert len(evicted) == 1, evicted
    numa = int(evicted[0].rsplit("-", 1)[1])
    assert status_of(backend, "urgent")["numaNodeResources"][0]["node"] == numa
