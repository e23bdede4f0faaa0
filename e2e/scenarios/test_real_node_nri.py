"""koordlet's NRI plugin on the real node: koordlet registers on containerd's NRI socket and an LSR
pod's container starts with its cpuset, set by NRI at creation rather than corrected by a later
reconcile (docs/koordlet.md#nri); a pod with an allocated GPU starts with ``NVIDIA_VISIBLE_DEVICES``.

To tell the two apart, koordlet runs with the reconcile's cpuset writes off (``--apply-cpusets=false``):
with NRI on, the container holds the scheduler's cpuset at the first reading after it starts; with
NRI off too, it still has every CPU after several reconcile periods, so nothing else set it.
The module has its own cluster (e2e/scenarios/conftest.py), so changing koordlet's flags here
touches no other test file.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apis.cpulist import format_cpus, parse_cpus
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from apis.extension.numa import ANNOTATION_NODE_CPU_TOPOLOGY, ANNOTATION_RESOURCE_STATUS
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import RealNodeConfig
from e2e.realnode.chart import NAMESPACE as CHART_NAMESPACE
from e2e.realnode.chart import wait_rolled_out
from e2e.realnode.probes import container_cfs_quotas, container_cpusets, cpuset_hierarchies
from e2e.realnode.testpods import cpuset_pod, sleeper_pod

pytestmark = [pytest.mark.real_node, pytest.mark.full]

DAEMONSET = f"/apis/apps/v1/namespaces/{CHART_NAMESPACE}/daemonsets/koordlet"
RECONCILE_OFF = "--apply-cpusets=false"
NRI_OFF = "-enable-nri-runtime-hook=false"
REGISTERED = "NRI: registered as 00-koordlet_nri"


def koordlet_logs(cp: ControlPlane) -> str:
    return cp.run_kubectl("logs", "-n", CHART_NAMESPACE, "daemonset/koordlet").stdout


def restart_koordlet_with(cp: ControlPlane, *extra: str) -> None:
    """The chart's koordlet command with ``extra`` flags after it; back when every pod of the
    DaemonSet has rolled out and, with NRI on, has registered."""
    daemonset = cp.get_json(DAEMONSET)
    command = [
        arg
        for arg in daemonset["spec"]["template"]["spec"]["containers"][0]["command"]
        if arg not in (RECONCILE_OFF, NRI_OFF)
    ]
    patch = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/command", "value": [*command, *extra]}
    ]
    cp.kubectl(
        "patch", "daemonset", "koordlet", "-n", CHART_NAMESPACE, "--type=json", "-p", json.dumps(patch)
    )
    wait_rolled_out(cp, timeout=180)
    if NRI_OFF not in extra:
        wait_registered(cp)


def wait_registered(cp: ControlPlane, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while REGISTERED not in (logs := koordlet_logs(cp)):
        if time.monotonic() > deadline:
            pytest.fail(f"koordlet did not register with NRI in {timeout:g}s:\n{logs[-3000:]}")
        time.sleep(1.0)


def wait_cpu_topology(cp: ControlPlane, c: RealNodeConfig) -> None:
    """koord-scheduler binds an LSR pod to CPUs from the NodeResourceTopology koordlet reports."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topology = cp.read("noderesourcetopology", c.node_name) or {}
        if ANNOTATION_NODE_CPU_TOPOLOGY in (topology.get("metadata", {}).get("annotations") or {}):
            return
        time.sleep(1.0)
    pytest.fail(f"koordlet reported no CPU topology for {c.node_name}")


def start_lsr_pod(cp: ControlPlane, c: RealNodeConfig, name: str) -> tuple[dict[str, Any], frozenset[int]]:
    """An LSR pod of one whole CPU, Ready on the real node; the pod and the CPUs it was given."""
    cp.kubectl("apply", "-f", "-", input=json.dumps(cpuset_pod(name, c, "LSR", cpu="1", limit="1")))
    cp.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "-n", "default", "--timeout=90s")
    pod = cp.get_json(f"/api/v1/namespaces/default/pods/{name}")
    assert pod["spec"]["nodeName"] == c.node_name
    status = json.loads(pod["metadata"].get("annotations", {}).get(ANNOTATION_RESOURCE_STATUS) or "{}")
    cpus = parse_cpus(status.get("cpuset") or "")
    assert len(cpus) == 1, f"koord-scheduler gave the LSR pod {status}"
    return pod, cpus


def started_seconds_ago(pod: dict[str, Any]) -> float:
    started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    return (datetime.now(UTC) - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds()


def test_koordlet_registers_with_containerds_nri(chart: tuple[ControlPlane, RealNodeConfig]) -> None:
    cp, c = chart
    assert c.nri_socket.is_socket(), f"containerd serves no NRI socket at {c.nri_socket}"
    wait_registered(cp)


def test_an_lsr_container_starts_with_its_cpuset_when_only_nri_can_set_it(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = chart
    assert cpuset_hierarchies(), "no cgroup hierarchy with cpuset.cpus on this host"
    every_cpu = parse_cpus(Path("/sys/devices/system/cpu/online").read_text().strip())
    assert len(every_cpu) >= 2, "an LSR pod of one CPU needs a host of two CPUs at least"
    restart_koordlet_with(cp, RECONCILE_OFF)
    wait_cpu_topology(cp, c)

    pod, cpus = start_lsr_pod(cp, c, "lsr-nri")
    found = container_cpusets(c, pod)  # the first reading: no waiting, no retry
    age = started_seconds_ago(pod)
    assert found, "no cgroup of the LSR container has cpuset.cpus"
    assert {str(path): format_cpus(held) for path, held in found.items()} == {
        str(path): format_cpus(cpus) for path in found
    }, f"read {age:.1f}s after the container started"
    quotas = container_cfs_quotas(c, pod)
    assert quotas, "no cpu controller holds the LSR container's CFS quota"
    assert set(quotas.values()) <= {"-1", "max"}, f"LSR container throttled: {quotas}"
    logs = koordlet_logs(cp)
    assert f"NRI: CreateContainer default/lsr-nri/sleep: cpuset {format_cpus(cpus)}" in logs, logs[-3000:]
    print(f"LSR container held cpuset {format_cpus(cpus)} when read {age:.1f}s after it started")
    cp.kubectl("delete", "pod", "lsr-nri", "-n", "default", "--wait=true", "--timeout=60s")


def test_a_pod_with_an_allocated_gpu_starts_with_nvidia_visible_devices(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """The device half of NRI (Koordinator v1.6): the container's environment names the GPU minors
    of the pod's device-allocated annotation. The real node has no GPU, so the pod is bound to it
    directly with an allocation written by hand; runc without the NVIDIA runtime mounts nothing."""
    cp, c = chart
    wait_registered(cp)
    allocated = {"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100"}}]}
    pod = sleeper_pod(
        "gpu-env",
        c,
        labels={},
        resources={"requests": {"cpu": "10m", "memory": "16Mi"}},
        annotations={ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)},
    )
    pod["spec"].pop("schedulerName")
    pod["spec"].pop("nodeSelector")
    pod["spec"]["nodeName"] = c.node_name
    cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    cp.kubectl("wait", "--for=condition=Ready", "pod/gpu-env", "-n", "default", "--timeout=90s")
    env = cp.kubectl("exec", "gpu-env", "-n", "default", "--", "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES")
    assert env.strip() == "0"
    logs = koordlet_logs(cp)
    created = [line for line in logs.splitlines() if "NRI: CreateContainer default/gpu-env/sleep:" in line]
    assert created, logs[-3000:]
    assert "NVIDIA_VISIBLE_DEVICES=0" in created[-1]
    cp.kubectl("delete", "pod", "gpu-env", "-n", "default", "--wait=true", "--timeout=60s")


def test_without_nri_and_the_reconcile_the_container_keeps_every_cpu(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """The control: nothing but koordlet's two paths sets the cpuset, so the test above saw NRI's."""
    cp, c = chart
    every_cpu = parse_cpus(Path("/sys/devices/system/cpu/online").read_text().strip())
    restart_koordlet_with(cp, RECONCILE_OFF, NRI_OFF)
    wait_cpu_topology(cp, c)
    pod, cpus = start_lsr_pod(cp, c, "lsr-no-nri")
    time.sleep(10)  # three of the reconcile's 3 s topology rounds
    found = container_cpusets(c, pod)
    assert found, "no cgroup of the LSR container has cpuset.cpus"
    assert set(found.values()) == {every_cpu}, {str(p): format_cpus(held) for p, held in found.items()}
    assert cpus < every_cpu
    cp.kubectl("delete", "pod", "lsr-no-nri", "-n", "default", "--wait=true", "--timeout=60s")
