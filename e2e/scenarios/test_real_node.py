"""The real node: a kubelet over containerd 2.x (runc, CNI bridge, NRI on) joins a local cluster
beside KWOK nodes, runs a pod whose container really executes, and leaves nothing on the host
when it stops (docs/real-node.md).

A cluster of its own in the real-node flavour (``ControlPlane(real_node=True)``: an API server
pods can reach, kwok managing only the annotated fake nodes). A host that cannot run the node
fails here with the preflight's list of what is missing: this file never skips. It is marked
``real_node`` so that a run can leave it out (``-m "not real_node"``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.__main__ import apply_description, wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import RealNodeConfig, config_for, import_image, leftovers, preflight, start, stop
from e2e.realnode.images import BUSYBOX_IMAGE, busybox_image
from scheduler.simulator import description as desc

pytestmark = pytest.mark.real_node

CLUSTER = os.environ.get("KOORD_E2E_CLUSTER", "e2e") + "-realnode"
NODES = desc.ClusterDescription.model_validate(
    {"name": CLUSTER, "nodePools": [{"name": "fake", "count": 2, "cpu": "8", "memory": "16Gi"}]}
)
NAMESPACE = "real-node"
# The container proves it runs: it reads its ServiceAccount token, opens a TCP connection to the
# `kubernetes` Service's ClusterIP (kube-proxy's DNAT to the API server's advertised address), says
# so, and only then becomes Ready.
SCRIPT = (
    "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-ok; "
    "echo | nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT && echo service-ok; "
    "touch /tmp/ready; exec sleep 3600"
)


@pytest.fixture(scope="module")
def real_node() -> Iterator[tuple[ControlPlane, RealNodeConfig]]:
    cp = ControlPlane(name=CLUSTER, real_node=True)
    c = config_for(cp)
    preflight.check(c)  # fails the tests with what this host lacks, before anything starts
    cp.start()
    try:
        apply_description(cp, NODES)
        wait_nodes_ready(cp)
        start(cp, c)
        import_image(c, busybox_image(c), BUSYBOX_IMAGE)
        yield cp, c
    finally:
        cp.stop(quiet=True)  # the real node first (ControlPlane._stop_real_node)


def node(cp: ControlPlane, name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(cp.kubectl("get", "node", name, "-o", "json"))
    return result


def ready(obj: dict[str, Any]) -> bool:
    conditions = obj.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_real_node_is_ready_beside_the_kwok_nodes(real_node: tuple[ControlPlane, RealNodeConfig]) -> None:
    cp, c = real_node
    real = node(cp, c.node_name)
    assert ready(real)
    assert real["metadata"]["labels"][c.node_label] == "true"
    assert "kwok.x-k8s.io/node" not in (real["metadata"].get("annotations") or {})
    info = real["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    assert (
        info["kubeletVersion"]
        == json.loads(cp.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
    )
    fakes = [
        n
        for n in json.loads(cp.kubectl("get", "nodes", "-o", "json"))["items"]
        if n["metadata"]["name"] != c.node_name
    ]
    assert len(fakes) == 2
    assert all(ready(n) for n in fakes), "kwok stopped managing the fake nodes"
    assert c.pod_resources_socket.is_socket()
    assert c.nri_socket.is_socket()


def test_a_pod_really_runs_on_the_real_node(real_node: tuple[ControlPlane, RealNodeConfig]) -> None:
    cp, c = real_node
    cp.create_namespace(NAMESPACE)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sh", "namespace": NAMESPACE},
        "spec": {
            "nodeName": c.node_name,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "sh",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", SCRIPT],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1},
                }
            ],
        },
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    cp.kubectl("wait", "--for=condition=Ready", "pod/sh", "-n", NAMESPACE, "--timeout=90s")
    running = json.loads(cp.kubectl("get", "pod", "sh", "-n", NAMESPACE, "-o", "json"))
    status = running["status"]["containerStatuses"][0]
    assert "running" in status["state"]
    assert status["ready"]
    assert running["status"]["podIP"].startswith(c.pod_gateway.rsplit(".", 1)[0])
    logs = cp.kubectl("logs", "sh", "-n", NAMESPACE)
    assert "token-ok" in logs, logs
    assert "service-ok" in logs, logs

    # Burstable QoS (requests only): kubelet's pod cgroup below our cgroupRoot, in each v1
    # controller (or the v2 hierarchy), with the container's cgroup in it holding its processes.
    uid = running["metadata"]["uid"]
    container_id = status["containerID"].removeprefix("containerd://")
    pod_cgroups = pod_cgroup_dirs(c, uid)
    assert pod_cgroups, f"no cgroup of pod {uid} below {c.cgroup_root}"
    for pod_cgroup in pod_cgroups:
        procs = (pod_cgroup / container_id / "cgroup.procs").read_text().split()
        assert procs, f"{pod_cgroup / container_id} holds no process"

    cp.delete_namespace(NAMESPACE)
    deadline = time.monotonic() + 60
    while pod_cgroup_dirs(c, uid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pod_cgroup_dirs(c, uid), "kubelet left the deleted pod's cgroups"


def pod_cgroup_dirs(c: RealNodeConfig, uid: str) -> list[Path]:
    root = Path("/sys/fs/cgroup")
    memory = root / "memory" if (root / "memory").is_dir() else root
    return sorted(memory.glob(f"{c.cgroup_root.lstrip('/')}/kubepods/**/pod{uid}"))


def test_stopping_the_real_node_leaves_nothing_on_the_host(
    real_node: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = real_node
    # a pod still running when the node stops: its container, shim, mounts and veth must go too
    cp.create_namespace(NAMESPACE + "-stop")
    cp.kubectl(
        "run",
        "left",
        "-n",
        NAMESPACE + "-stop",
        f"--image={BUSYBOX_IMAGE}",
        "--image-pull-policy=Never",
        f"--overrides={json.dumps({'spec': {'nodeName': c.node_name}})}",
        "--command",
        "--",
        "sleep",
        "3600",
    )
    cp.kubectl("wait", "--for=condition=Ready", "pod/left", "-n", NAMESPACE + "-stop", "--timeout=90s")
    assert leftovers(c), "a running node shows on the host"
    stop(c)
    assert leftovers(c) == []
    cp.kubectl("delete", "namespace", NAMESPACE + "-stop", "--wait=false")
