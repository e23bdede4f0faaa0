"""Host applications end to end: ``host-application-config`` in ``slo-controller-config`` becomes the
node's NodeSLO ``hostApplications`` (koord-manager), and koordlet, running on the host as a real
process with the chart's RBAC, writes the node's LS share pool into an LS application's cgroup and
writes it again when an LSE pod takes CPUs out of the pool (the v1.4 notes: "the koordlet will set
all CPU cores in the CPU share pool").

koordlet's host is a fake tree under ``--host-root``: a 16-CPU, 2-NUMA-node sysfs and a cgroup v1
hierarchy, so the test can read what koordlet wrote. The node is a KWOK node of the test's own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apis.cpulist import format_cpus, parse_cpus
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent
from e2e.devices import Pool
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.workloads import apply, wait_for
from tests.koordlet.qos.cgroupfs import CgroupTree
from tests.koordlet.topology.fake_sysfs import FakeMachine, linux_numbering

NODE = "host-apps-0"
NAMESPACE = "host-apps-e2e"
CONFIG_NAMESPACE = "koordinator-system"
CONFIG = "slo-controller-config"
KEY = "host-application-config"
POOL = Pool("host-apps")
TAINT = POOL.taint
APP_CGROUP = "host-latency-sensitive/nginx"
GIB_KB = 1024 * 1024
TIMEOUT = 60.0
# Only this test's node gets the application: the session's other nodes' NodeSLOs stay as they are.
HOST_APPLICATIONS = {
    "nodeConfigs": [
        {
            "name": "host-apps-e2e",
            "nodeSelector": {"matchLabels": POOL.selector},
            "applications": [
                {
                    "name": "nginx",
                    "qos": "LS",
                    "cgroupPath": {"base": "CgroupRoot", "parentDir": "host-latency-sensitive"},
                }
            ],
        }
    ]
}


def _lse_pod(cpuset: str) -> dict[str, Any]:
    """A Guaranteed LSE pod bound to the node, its CPUs as koord-scheduler records them."""
    resources = {"cpu": "2", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "lse",
            "namespace": NAMESPACE,
            "labels": {"koordinator.sh/qosClass": "LSE"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpuset})},
        },
        "spec": {
            "nodeName": NODE,
            "tolerations": [TAINT],
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": resources, "limits": resources}}
            ],
        },
    }


def _ensure_config_map(cp: ControlPlane) -> None:
    if cp.read("namespace", CONFIG_NAMESPACE) is None:
        cp.create_namespace(CONFIG_NAMESPACE)
    if cp.read("configmap", CONFIG, namespace=CONFIG_NAMESPACE) is None:
        cp.kubectl("create", "configmap", CONFIG, "-n", CONFIG_NAMESPACE)


def _set_key(cp: ControlPlane, value: str | None) -> None:
    patch = json.dumps({"data": {KEY: value}})  # null removes the key
    cp.kubectl("patch", "configmap", CONFIG, "-n", CONFIG_NAMESPACE, "--type=merge", "-p", patch)


def _app_cpuset(root: Path) -> str:
    return (root / "sys/fs/cgroup/cpuset" / APP_CGROUP / "cpuset.cpus").read_text().strip()


def _ls_pools(cp: ControlPlane) -> str | None:
    """The LS share pools (one per NUMA node) koordlet reported in the node's NodeResourceTopology,
    as one CPU list."""
    found = cp.read("noderesourcetopology", NODE)
    if found is None:
        return None
    annotations = found["metadata"].get("annotations") or {}
    pools = json.loads(annotations.get("node.koordinator.sh/cpu-shared-pools", "[]"))
    return format_cpus({cpu for pool in pools for cpu in parse_cpus(pool["cpuset"])}) or None


@pytest.fixture(scope="module")
def host(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The node, the key and koordlet on its fake host; the root of that host."""
    cp = control_plane
    root = tmp_path_factory.mktemp("host-apps")
    FakeMachine(root).build(linux_numbering(1, 2, 4, 2), {0: 8 * GIB_KB, 1: 8 * GIB_KB}, smt_active=1)
    tree = CgroupTree(root, 1)
    tree.add(APP_CGROUP)
    assert _app_cpuset(root) == "0-7"  # the kernel-like default, not what koordlet will write
    cp.create_namespace(NAMESPACE)
    apply(cp, [POOL.node(NODE, {"cpu": "16", "memory": "16Gi", "pods": "110"})])
    wait_nodes_ready(cp)
    _ensure_config_map(cp)
    _set_key(cp, json.dumps(HOST_APPLICATIONS))
    koordlet = LocalComponent(
        name="koordlet-host-apps",
        argv=(
            sys.executable,
            "-m",
            "koordlet",
            "--node-name",
            NODE,
            "--kubeconfig",
            str(koordlet_kubeconfig(cp)),
            "--host-root",
            str(root),
            "--cgroup-version",
            "1",
            "--topology-interval-seconds",
            "1",
            "--report-interval-seconds",
            "1",
            "--metrics-port",
            "0",
        ),
        cluster=cp,
    )
    koordlet.start()
    try:
        yield root
    finally:
        print(koordlet.stop())
        _set_key(cp, None)
        cp.kubectl("delete", "namespace", NAMESPACE, "--wait=false")
        cp.kubectl("delete", "node", NODE, "--ignore-not-found")
        cp.kubectl("delete", "noderesourcetopology", NODE, "--ignore-not-found")


def test_the_config_key_reaches_the_node_slo_of_the_selected_node_only(
    control_plane: ControlPlane, host: Path
) -> None:
    def applications(node: str) -> list[dict[str, Any]] | None:
        slo = control_plane.read("nodeslo", node)
        if slo is None:
            return None
        found: list[dict[str, Any]] = slo["spec"].get("hostApplications") or []
        return found

    apps = wait_for(lambda: applications(NODE), TIMEOUT, f"hostApplications in NodeSLO {NODE}")
    assert [(a["name"], a["qos"]) for a in apps] == [("nginx", "LS")]
    assert applications("cpu-0") == []


def test_an_ls_host_application_gets_the_share_pool_and_follows_it(
    control_plane: ControlPlane, host: Path
) -> None:
    cp = control_plane
    wait_for(lambda: _app_cpuset(host) == "0-15", TIMEOUT, "the whole machine as the LS pool, in the cgroup")
    assert _ls_pools(cp) == "0-15"

    apply(cp, [_lse_pod("1-2")])
    wait_for(
        lambda: _app_cpuset(host) == "0,3-15",
        TIMEOUT,
        f"the pool without the LSE pod's CPUs in {APP_CGROUP}",
    )
    assert _ls_pools(cp) == "0,3-15"
