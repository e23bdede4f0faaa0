"""The chart installed for real: our image imported into the real node's containerd, then
``helm install`` with every component on the real node (docs/real-node.md, "The chart").

The values are the chart's defaults but for what this one small node needs: each component pinned
to the real node by its label (the KWOK nodes would "run" them without running anything), small
requests (the node is this 2-core host), koordlet told kubelet's cgroup root and root dir, where
containerd's NRI socket is and that there is no NVIDIA toolkit, serving its PodResources proxy from
this cluster's kubelet, with BE memory eviction and blkio QoS gated on, and koord-descheduler enabled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.image import name as image_name
from e2e.realnode.config import RealNodeConfig
from e2e.realnode.images import import_image
from e2e.realnode.node import progress

__all__ = [
    "CHART",
    "NAMESPACE",
    "RELEASE",
    "build_and_import_image",
    "install_chart",
    "values_for",
    "wait_rolled_out",
]

CHART = repo_root() / "charts" / "koordinator-py"
RELEASE = "koordinator-py"
NAMESPACE = "koordinator-system"
DEPLOYMENTS = ("koord-scheduler", "koord-manager", "koord-descheduler")
SMALL = {"requests": {"cpu": "50m", "memory": "128Mi"}}


def values_for(config: RealNodeConfig) -> dict[str, Any]:
    """The chart values of an install on the real node."""
    on_real_node = {config.node_label: "true"}
    values: dict[str, Any] = {
        component: {"nodeSelector": on_real_node, "resources": SMALL}
        for component in ("scheduler", "manager", "descheduler")
    }
    values["descheduler"]["enabled"] = True
    values["koordlet"] = {
        "nodeSelector": on_real_node,
        "cgroupRoot": config.cgroup_root,
        "nvidiaVisibleDevices": "",
        "nri": {"socketDir": str(config.nri_socket.parent), "socketName": config.nri_socket.name},
        # the QoS the real-node tests prove (test_real_node_qos.py); each also needs its NodeSLO switch
        "featureGates": "BEMemoryEvict=true,BlkIOReconcile=true",
        "resources": {**SMALL, "limits": {"cpu": "500m", "memory": "512Mi"}},
        # the kubelet's root (its config.yaml, cpu_manager_state, pod-resources socket) and the
        # proxy's socket are this cluster's, not /var/lib/kubelet's
        "hostKubelet": {"path": str(config.kubelet_root)},
        "podResourcesProxy": {"enabled": True, "path": str(config.pod_resources_proxy_dir)},
    }
    return values


def build_and_import_image(config: RealNodeConfig) -> None:
    """``make image`` (seconds when nothing changed), then the archive into the node's containerd."""
    progress("make image")
    subprocess.run(
        ["bash", str(repo_root() / "e2e" / "image" / "build.sh"), "amd64"],
        env={**os.environ, "PY": sys.executable},
        check=True,
    )
    import_image(config, image_name.archive("amd64"), image_name.reference())


def install_chart(cp: ControlPlane, config: RealNodeConfig, *, timeout: float = 300.0) -> None:
    """Build and import the image, ``helm upgrade --install`` the chart, and wait until every
    Deployment has rolled out and koordlet is Ready on the real node."""
    build_and_import_image(config)
    values = config.state_dir / "chart-values.yaml"
    values.write_text(yaml.safe_dump(values_for(config), sort_keys=False))
    progress(f"helm install {RELEASE} {CHART.relative_to(repo_root())} -f {values}")
    began = time.monotonic()
    cp.helm("upgrade", "--install", RELEASE, str(CHART), "-f", str(values), "--timeout", f"{timeout:g}s")
    wait_rolled_out(cp, timeout=timeout)
    took = time.monotonic() - began
    progress(f"chart installed, every component Ready on {config.node_name} in {took:.1f}s")


def _rolled_out(obj: dict[str, Any]) -> bool:
    status, spec = obj.get("status") or {}, obj.get("spec") or {}
    generation_seen = status.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
    if obj["kind"] == "DaemonSet":
        wanted = status.get("desiredNumberScheduled", 0)
        return bool(
            generation_seen
            and wanted > 0
            and status.get("updatedNumberScheduled", 0) == wanted
            and status.get("numberReady", 0) == wanted
        )
    wanted = spec.get("replicas", 1)
    return bool(
        generation_seen
        and status.get("updatedReplicas", 0) == wanted
        and status.get("readyReplicas", 0) == wanted
        and status.get("replicas", 0) == wanted  # the old replicas are gone
    )


def wait_rolled_out(cp: ControlPlane, *, timeout: float = 300.0) -> None:
    """Every Deployment of the chart and the koordlet DaemonSet rolled out: updated, Ready, the old
    replicas gone."""
    deadline = time.monotonic() + timeout
    while True:
        objs = [cp.get_json(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{d}") for d in DEPLOYMENTS]
        objs.append(cp.get_json(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/koordlet"))
        waiting = [o["metadata"]["name"] for o in objs if not _rolled_out(o)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            pods = cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide")
            raise TimeoutError(f"not rolled out after {timeout:g}s: {', '.join(waiting)}\n{pods}")
        time.sleep(1.0)
