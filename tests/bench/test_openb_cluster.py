"""The openb trace as objects (``e2e.bench.openb_cluster``) and the audit that fails a replay that
over-allocated anything (``e2e.bench.openb_audit``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.client.backend import DEVICES, NODES, PODS
from apis.core import Pod
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    LABEL_GPU_MODEL,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY_RATIO,
)
from e2e.bench.openb_audit import OverAllocationError, audit
from e2e.bench.openb_cluster import NAMESPACE, cluster_description, gpu_percent, pod_manifest
from e2e.bench.openb_trace import Submission, TraceNode, TraceTask
from scheduler.backend.memory import MemoryBackend

NODES_ = [
    TraceNode("a", 64000, 262144, 2, "P100"),
    TraceNode("b", 96000, 786432, 8, "V100M32"),
    TraceNode("c", 64000, 262144, 2, "P100"),
    TraceNode("d", 64000, 262145, 2, "P100"),  # a MiB more: another shape
]


def _submission(num_gpu: int, gpu_milli: int, models: tuple[str, ...] = ()) -> Submission:
    return Submission("p-copy-3", TraceTask("p", 6000, 12288, num_gpu, gpu_milli, models))


def test_nodes_of_one_shape_form_one_pool_with_its_gpu_model_and_cards() -> None:
    cluster = cluster_description(NODES_)

    assert [(p.name, p.count) for p in cluster.node_pools] == [
        ("openb-64c-256g-2xp100", 2),
        ("openb-96c-768g-8xv100m32", 1),
        ("openb-64c-262145mi-2xp100", 1),
    ]
    nodes = cluster.nodes()
    assert [n["metadata"]["labels"][LABEL_GPU_MODEL] for n in nodes] == ["P100", "P100", "V100M32", "P100"]
    assert nodes[0]["status"]["allocatable"]["cpu"] == "64"
    assert nodes[0]["status"]["allocatable"]["memory"] == "256Gi"
    devices = cluster.devices()
    assert [len(d["spec"]["devices"]) for d in devices] == [2, 2, 8, 2]
    assert devices[2]["spec"]["devices"][0]["resources"]["koordinator.sh/gpu-memory"] == "32Gi"


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "percent"),
    [(1, 460, 46), (1, 125, 13), (1, 1000, 100), (8, 1000, 800)],
    ids=["share", "share-rounded-up", "one", "eight"],
)
def test_a_task_asks_for_gpu_core_and_memory_ratio_in_percent(
    num_gpu: int, gpu_milli: int, percent: int
) -> None:
    sub = _submission(num_gpu, gpu_milli)

    requests = pod_manifest(sub)["spec"]["containers"][0]["resources"]["requests"]

    assert gpu_percent(sub.task) == percent
    assert requests == {
        "cpu": "6000m",
        "memory": "12288Mi",
        RESOURCE_GPU_CORE: str(percent),
        RESOURCE_GPU_MEMORY_RATIO: str(percent),
    }


def test_a_cpu_only_task_asks_for_no_gpu_and_a_gpu_spec_is_a_required_model_affinity() -> None:
    cpu_only = pod_manifest(_submission(0, 0))
    pinned = pod_manifest(_submission(1, 1000, ("V100M16", "V100M32")))

    assert cpu_only["metadata"] == {"name": "p-copy-3", "namespace": NAMESPACE, "labels": {"app": "openb"}}
    assert set(cpu_only["spec"]["containers"][0]["resources"]["requests"]) == {"cpu", "memory"}
    assert "affinity" not in cpu_only["spec"]
    terms = pinned["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": LABEL_GPU_MODEL, "operator": "In", "values": ["V100M16", "V100M32"]}]}
    ]
    Pod.model_validate(pinned)  # a valid Pod


def _backend() -> MemoryBackend:
    backend = MemoryBackend()
    cluster = cluster_description(NODES_[:2])
    for node in cluster.nodes():
        backend.apply(NODES, node)
    for device in cluster.devices():
        backend.apply(DEVICES, DEVICES.model.model_validate(device))
    return backend


def _bind(backend: MemoryBackend, name: str, node: str, cpu: str, gpus: list[tuple[int, int]]) -> None:
    core = sum(c for _, c in gpus)
    requests = {"cpu": cpu, "memory": "1Gi"} | ({RESOURCE_GPU_CORE: str(core)} if core else {})
    allocated = [
        {"minor": m, "resources": {RESOURCE_GPU_CORE: str(c), RESOURCE_GPU_MEMORY_RATIO: str(c)}}
        for m, c in gpus
    ]
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": allocated})} if gpus else {},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}],
        },
    }
    backend.apply(PODS, Pod.model_validate(pod))


def test_the_audit_passes_a_cluster_within_its_capacity() -> None:
    backend = _backend()
    _bind(backend, "half", "openb-64c-256g-2xp100-0", "32", [(0, 50)])
    _bind(backend, "other-half", "openb-64c-256g-2xp100-0", "32", [(0, 50), (1, 100)])
    _bind(backend, "cpu-only", "openb-96c-768g-8xv100m32-0", "96", [])

    result = audit(backend)

    assert (result.pods, result.nodes, result.cards, result.violations) == (3, 2, 10, [])
    assert [(n.node, n.model, n.cpu_milli, n.memory_mib, n.gpu_core) for n in result.left] == [
        ("openb-64c-256g-2xp100-0", "P100", 0, 256 * 1024 - 2 * 1024, [0, 0]),
        ("openb-96c-768g-8xv100m32-0", "V100M32", 0, 768 * 1024 - 1024, [100] * 8),
    ]


def test_the_audit_names_every_over_allocated_card_and_node_and_an_unbound_pod() -> None:
    backend = _backend()
    _bind(backend, "first", "openb-64c-256g-2xp100-0", "40", [(0, 60)])
    _bind(backend, "second", "openb-64c-256g-2xp100-0", "40", [(0, 60), (5, 100)])
    backend.apply(PODS, Pod.model_validate(pod_manifest(_submission(1, 1000))))  # never bound

    result = audit(backend)

    node, card = "node openb-64c-256g-2xp100-0", "node openb-64c-256g-2xp100-0 GPU 0"
    assert sorted(result.violations) == sorted(
        [
            "pod p-copy-3 is left unbound (a failed pod is withdrawn)",
            "pod second holds GPU 5 of openb-64c-256g-2xp100-0: no such card",
            "pod second asked for gpu-core 160 and holds 60",
            f"{node}: cpu 80000 allocated of 64000",
            f"{card}: koordinator.sh/gpu-core 120 allocated of 100",
            f"{card}: koordinator.sh/gpu-memory-ratio 120 allocated of 100",
        ]
    )
    assert result.violation_count == 6
    assert str(OverAllocationError("MostAllocated", result)).startswith("MostAllocated: 6 over-allocations")


def test_the_audit_checks_the_gpu_model_a_pod_may_run_on() -> None:
    backend = _backend()
    _bind(backend, "pinned", "openb-64c-256g-2xp100-0", "4", [(1, 100)])

    result = audit(backend, {"pinned": ("V100M16", "V100M32")})

    assert result.violations == [
        "pod pinned may run on V100M16|V100M32 and got P100 on openb-64c-256g-2xp100-0"
    ]
