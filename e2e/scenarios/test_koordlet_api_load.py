"""koordlet's load on the API server: in simulation mode, for several KWOK nodes, with the chart's
koordlet RBAC, it lists each kind once and then only watches. Running steadily after its first
report, its ``koordlet_kube_api_requests_total`` shows no LIST or GET growth, only the writes of its
reports, while its NodeMetrics and NodeResourceTopologies keep being written."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koordlet_simulation
from e2e.scenarios.test_koordlet import NAMESPACE, koordlet_kubeconfig, node_metric
from e2e.scenarios.test_koordlet_topology import nrt
from e2e.scheduler_process import free_port
from e2e.tier import sized
from e2e.workloads import wait_for

NODES = [f"apiload-{i}" for i in range(4)]
WATCHED = ("nodes", "pods", "nodeslos", "nodemetrics", "noderesourcetopologies")
STEADY_SECONDS = sized(6, 20)
"""How long koordlet runs steadily: about 6 report rounds in `make test`, 20 in `make test-full`."""


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"type": "kwok"}, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        },
    }


@pytest.fixture(scope="module")
def koordlet(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalComponent, int]]:
    for name in NODES:
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(_node(name)))
    load = {
        "nodes": [
            {
                "name": NODES[0],
                "usage": {"cpu": "2", "memory": "4Gi"},
                "topology": {"coresPerNUMANode": 4, "threadsPerCore": 2, "memoryPerNUMANode": "16Gi"},
            },
            {"names": NODES[1:], "usage": {"cpu": "1", "memory": "2Gi"}},
        ]
    }
    path = tmp_path_factory.mktemp("koordlet-api-load") / "load.yaml"
    path.write_text(yaml.safe_dump(load))
    port = free_port()
    component = koordlet_simulation(
        control_plane,
        path,
        kubeconfig=koordlet_kubeconfig(control_plane),
        metrics_port=port,
        name="koordlet-api-load",
        # every simulation loop runs: reports every second, NRTs, BE memory eviction's reads
        extra_args=("--topology-interval-seconds", "0.5", "--feature-gates", "BEMemoryEvict=true"),
    )
    component.start()
    try:
        yield component, port
    finally:
        print(component.stop())
        control_plane.run_kubectl("delete", "node", *NODES, "--ignore-not-found")


def requests(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    counted: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "koordlet_kube_api_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counted[(sample.labels["verb"], sample.labels["resource"])] = sample.value
    return counted


def _update_time(cp: ControlPlane, name: str) -> str | None:
    status = (node_metric(cp, name) or {}).get("status") or {}
    found: str | None = status.get("updateTime")
    return found


def test_the_chart_lets_koordlet_watch_what_it_reads(control_plane: ControlPlane) -> None:
    koordlet_kubeconfig(control_plane)  # the chart's ServiceAccount and RBAC
    user = f"system:serviceaccount:{NAMESPACE}:koordlet"
    for resource in (
        "nodes",
        "pods",
        "nodeslos.slo.koordinator.sh",
        "nodemetrics.slo.koordinator.sh",
        "noderesourcetopologies.topology.node.k8s.io",
    ):
        for verb in ("list", "watch"):
            allowed = control_plane.run_kubectl(
                "auth", "can-i", verb, resource, "--all-namespaces", "--as", user
            )
            assert allowed.stdout.strip() == "yes", f"{verb} {resource}: {allowed.stdout}{allowed.stderr}"


def test_steady_koordlet_only_watches_and_writes(
    control_plane: ControlPlane, koordlet: tuple[LocalComponent, int]
) -> None:
    _, port = koordlet
    for name in NODES:
        wait_for(lambda name=name: _update_time(control_plane, name), 60, f"koordlet's report for {name}")  # type: ignore[misc]
    wait_for(lambda: nrt(control_plane, NODES[0]), 60, f"the NodeResourceTopology of {NODES[0]}")
    before = requests(port)
    for resource in WATCHED:
        assert before.get(("list", resource), 0) >= 1, (resource, before)
        assert before.get(("watch", resource), 0) >= 1, (resource, before)
    first_update = _update_time(control_plane, NODES[1])

    # a pod coming to a node reaches koordlet through its pod watch, not a list
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "apiload-pod", "namespace": "default"},
        "spec": {"nodeName": NODES[0], "containers": [{"name": "app", "image": "fake"}]},
    }
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
    try:
        time.sleep(STEADY_SECONDS)  # steady state: one report round a second, two topology rounds
        after = requests(port)
    finally:
        control_plane.run_kubectl("delete", "pod", "apiload-pod", "--ignore-not-found", "--wait=false")

    grown = {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}
    polled = {key: n for key, n in grown.items() if key[0] in ("list", "get")}
    assert polled == {}, f"koordlet polled the API server: {grown}"
    assert grown.get(("update", "nodemetrics/status"), 0) >= len(NODES), grown
    assert _update_time(control_plane, NODES[1]) != first_update  # still reporting
    assert nrt(control_plane, NODES[0]) is not None
