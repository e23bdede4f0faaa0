"""koordlet's NRI plugin on the real node: koordlet registers on containerd's NRI socket and an LSR
pod's container starts with its cpuset, set by NRI at creation rather than corrected by a later
reconcile (docs/koordlet.md#nri); a pod with an allocated GPU starts with ``NVIDIA_VISIBLE_DEVICES``;
a BE pod on batch resources starts with the ``cpu.shares``, CFS quota and memory limit of its
batch-cpu and batch-memory (its container's through the NRI adjustment, its pod cgroup's written at
RunPodSandbox) and, with the NodeSLO's ``coreSched`` policy and the BE class's CPU QoS on, with
``cpu.idle`` 1 on its pod cgroup, where an LS pod's is 0.

To tell the two apart, koordlet runs with the reconcile's writes of those settings off
(``--apply-cpusets=false``, ``--apply-cpu-qos=false``, ``--apply-batch-resources=false``): with NRI
on, the cgroups hold NRI's values at the first reading after the container starts; with NRI off too,
they still hold kubelet's after several reconcile periods, so nothing else set them. With NRI off
and the reconcile's batch-resource writes on, the reconcile alone brings a BE pod's cgroups to the
same values and puts back one reset by hand.
The module has its own cluster (e2e/scenarios/conftest.py), so changing koordlet's flags and the
NodeSLO here touches no other test file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
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
from e2e.realnode.colocation import slo_config, wait_batch_cpu
from e2e.realnode.probes import (
    container_cfs_quotas,
    container_cpusets,
    cpuset_hierarchies,
    pod_cgroup_file,
    qos_cgroup_file,
    read_or_empty,
)
from e2e.realnode.testpods import batch_pod, cpuset_pod, ls_pod, sleeper_pod
from operators.logic.colocation_profile import with_extended_resource_spec

pytestmark = [pytest.mark.real_node, pytest.mark.full]

DAEMONSET = f"/apis/apps/v1/namespaces/{CHART_NAMESPACE}/daemonsets/koordlet"
RECONCILE_OFF = "--apply-cpusets=false"
QOS_RECONCILE_OFF = ("--apply-cpu-qos=false", "--apply-batch-resources=false")
NRI_OFF = "-enable-nri-runtime-hook=false"
RESCTRL_ON = ",Resctrl=true"
RESCTRL_ANNOTATION = {"node.koordinator.sh/resctrl": json.dumps({"llc": {"schemata": {"range": [0, 50]}}})}
RESCTRL_ROOT = Path("/sys/fs/resctrl")
REGISTERED = "NRI: registered as 00-koordlet_nri"
CORE_SCHED_BE = {
    "policies": {"cpuPolicy": "coreSched"},
    "lsClass": {"cpuQOS": {"enable": True}},
    "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}},
}
BATCH_CPU_MILLI = 20
BATCH_MEMORY = 64 << 20
CGROUP_V1 = Path("/sys/fs/cgroup/cpu").is_dir()


def koordlet_logs(cp: ControlPlane) -> str:
    return cp.run_kubectl("logs", "-n", CHART_NAMESPACE, "daemonset/koordlet").stdout


def restart_koordlet_with(cp: ControlPlane, *extra: str, resctrl: bool = False) -> None:
    """The chart's koordlet command with ``extra`` flags after it (and the ``Resctrl`` gate on with
    ``resctrl``); back when every pod of the DaemonSet has rolled out and, with NRI on, has
    registered."""
    daemonset = cp.get_json(DAEMONSET)
    command = [
        arg.removesuffix(RESCTRL_ON)
        for arg in daemonset["spec"]["template"]["spec"]["containers"][0]["command"]
        if arg not in (RECONCILE_OFF, *QOS_RECONCILE_OFF, NRI_OFF)
    ]
    if resctrl:
        gates = [i for i, arg in enumerate(command) if arg.startswith("--feature-gates=")]
        for i in gates:
            command[i] += RESCTRL_ON
        if not gates:
            command.append("--feature-gates=" + RESCTRL_ON.lstrip(","))
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


def wait_node_slo_seen(cp: ControlPlane, c: RealNodeConfig, timeout: float = 60) -> None:
    """koord-manager has rendered the coreSched NodeSLO and the restarted koordlet has read it."""
    deadline = time.monotonic() + timeout
    while True:
        slo = cp.read("nodeslo", c.node_name, namespace=None) or {}
        strategy = (slo.get("spec") or {}).get("resourceQOSStrategy") or {}
        rendered = (strategy.get("policies") or {}).get("cpuPolicy") == "coreSched"
        if rendered and f"NodeSLO {c.node_name} found" in koordlet_logs(cp):
            return
        if time.monotonic() > deadline:
            pytest.fail(f"no coreSched NodeSLO read by koordlet in {timeout:g}s: {strategy}")
        time.sleep(1.0)


@pytest.fixture(scope="module")
def core_sched_colocation(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> Iterator[tuple[ControlPlane, RealNodeConfig]]:
    """Batch resources on the real node and the BE class's CPU QoS on with coreSched (cpu.idle);
    every QoS switch off again after the module."""
    cp, c = chart
    slo_config(cp, qos=CORE_SCHED_BE)
    wait_batch_cpu(cp, c, 2 * BATCH_CPU_MILLI)
    yield cp, c
    slo_config(cp)


def be_pod_as_the_webhook_writes_it(name: str, c: RealNodeConfig) -> dict[str, Any]:
    """A BE pod on batch-cpu and batch-memory only, with the extended-resource-spec annotation
    koord-manager's webhook writes on a pod a ClusterColocationProfile converts: what the runtime
    hands NRI about its resources."""
    return with_extended_resource_spec(
        batch_pod(name, c, batch_cpu=str(BATCH_CPU_MILLI), batch_memory=str(BATCH_MEMORY))
    )


def delete_pods(cp: ControlPlane, *names: str) -> None:
    cp.kubectl("delete", "pod", *names, "-n", "default", "--ignore-not-found", "--wait=true", "--timeout=60s")


def start_pods(cp: ControlPlane, *pods: dict[str, Any]) -> list[dict[str, Any]]:
    for pod in pods:
        cp.kubectl("apply", "-f", "-", input=json.dumps(pod))
    names = [f"pod/{p['metadata']['name']}" for p in pods]
    cp.kubectl("wait", "--for=condition=Ready", *names, "-n", "default", "--timeout=90s")
    return [cp.get_json(f"/api/v1/namespaces/default/pods/{p['metadata']['name']}") for p in pods]


def batch_cgroups(c: RealNodeConfig, pod: dict[str, Any], *, container: bool) -> dict[str, str]:
    """The pod's (or its container's) cpu.shares, CFS quota and memory limit: the v1 files, or
    cpu.weight, cpu.max and memory.max on v2."""
    files = (
        (("cpu", "cpu.shares"), ("cpu", "cpu.cfs_quota_us"), ("memory", "memory.limit_in_bytes"))
        if CGROUP_V1
        else (("cpu", "cpu.weight"), ("cpu", "cpu.max"), ("memory", "memory.max"))
    )
    found = {}
    for controller, name in files:
        path = pod_cgroup_file(c, controller, pod, name, container=container)
        found[name] = read_or_empty(path) if path is not None else ""
    return found


def koordinators_batch_cgroups(milli_cpu: int, memory: int) -> dict[str, str]:
    """Koordinator's batchresource formulas for requests equal to limits: MilliCPUToShares,
    MilliCPUToQuota (100 ms period) and the memory limit in bytes; runc's shares-to-weight on v2."""
    shares = max(milli_cpu * 1024 // 1000, 2)
    quota = max(milli_cpu * 100_000 // 1000, 1000)
    if CGROUP_V1:
        return {
            "cpu.shares": str(shares),
            "cpu.cfs_quota_us": str(quota),
            "memory.limit_in_bytes": str(memory),
        }
    weight = 1 + (shares - 2) * 9999 // 262142
    return {"cpu.weight": str(weight), "cpu.max": f"{quota} 100000", "memory.max": str(memory)}


def cpu_idle(c: RealNodeConfig, pod: dict[str, Any]) -> str:
    path = pod_cgroup_file(c, "cpu", pod, "cpu.idle")
    return read_or_empty(path) if path is not None else ""


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


def test_a_be_pod_starts_with_its_batch_resources_and_cpu_idle_when_only_nri_can_set_them(
    core_sched_colocation: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = core_sched_colocation
    assert qos_cgroup_file(c, "cpu", "kubepods/besteffort", "cpu.idle").exists(), "a kernel before 5.15"
    restart_koordlet_with(cp, RECONCILE_OFF, *QOS_RECONCILE_OFF, resctrl=True)
    wait_node_slo_seen(cp, c)

    # the LS pod asks for its own resctrl group: its container starts either way
    ls_own_resctrl = ls_pod("ls-nri", c, annotations=RESCTRL_ANNOTATION)
    try:
        be, ls = start_pods(cp, be_pod_as_the_webhook_writes_it("be-nri", c), ls_own_resctrl)
        # the first readings: no waiting, no retry
        be_container = batch_cgroups(c, be, container=True)
        be_pod = batch_cgroups(c, be, container=False)
        idle = {"be-nri": cpu_idle(c, be), "ls-nri": cpu_idle(c, ls)}
        age = started_seconds_ago(be)
        check_be_and_ls(cp, ls, be_container, be_pod, idle, age)
    finally:
        delete_pods(cp, "be-nri", "ls-nri")


def check_be_and_ls(
    cp: ControlPlane,
    ls: dict[str, Any],
    be_container: dict[str, str],
    be_pod: dict[str, str],
    idle: dict[str, str],
    age: float,
) -> None:
    want = koordinators_batch_cgroups(BATCH_CPU_MILLI, BATCH_MEMORY)
    assert be_container == want, f"BE container read {age:.1f}s after it started"
    # the kernel gives an idle group the least weight and reads it back as its shares: the pod
    # cgroup's 20 was written (the log below says so) before its cpu.idle
    idle_weight = {"cpu.shares": "3"} if CGROUP_V1 else {"cpu.weight": "1"}
    assert be_pod == {**want, **idle_weight}, f"BE pod cgroup read {age:.1f}s after its container started"
    assert idle == {"be-nri": "1", "ls-nri": "0"}, f"read {age:.1f}s after the BE container started"
    logs = koordlet_logs(cp)
    sandbox = [line for line in logs.splitlines() if "NRI: RunPodSandbox default/be-nri:" in line]
    assert sandbox, logs[-3000:]
    assert f"cpu.shares={BATCH_CPU_MILLI * 1024 // 1000}" in sandbox[-1]  # in v1 units, as logged
    assert "cpu.idle=1" in sandbox[-1]
    created = [line for line in logs.splitlines() if "NRI: CreateContainer default/be-nri/sleep:" in line]
    assert created, logs[-3000:]
    assert f"memory limit {BATCH_MEMORY}" in created[-1]
    ls_lines = [line for line in logs.splitlines() if "NRI: " in line and "default/ls-nri" in line]
    group = RESCTRL_ROOT / f"koordlet-{ls['metadata']['uid']}"
    if (RESCTRL_ROOT / "schemata").exists():  # a host with RDT: the group and the class
        assert group.is_dir()
        assert any(f"RDT class {group.name}" in line for line in ls_lines), ls_lines
    else:  # this project's host: no resctrl, so no class that containerd would refuse
        assert not group.exists()
        assert not [line for line in ls_lines if "RDT class" in line or "resctrl" in line], ls_lines
    print(
        f"BE container {be_container}, BE pod {be_pod}, cpu.idle {idle}, "
        f"read {age:.1f}s after the BE container started; koordlet: {sandbox[-1]}"
    )


def test_without_nri_the_reconcile_keeps_a_be_pods_batch_resources(
    core_sched_colocation: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """With NRI off and the reconcile's batch-resource writes on (its CPU QoS writes off, so no
    cpu.idle hides the shares), a BE pod's container and pod cgroups reach Koordinator's
    ``cpu.shares``, CFS quota and memory limit within a few QoS rounds; the container's shares put
    back to kubelet's value by hand are restored by the reconcile."""
    cp, c = core_sched_colocation
    restart_koordlet_with(cp, RECONCILE_OFF, "--apply-cpu-qos=false", NRI_OFF)
    wait_node_slo_seen(cp, c)
    want = koordinators_batch_cgroups(BATCH_CPU_MILLI, BATCH_MEMORY)
    try:
        (be,) = start_pods(cp, be_pod_as_the_webhook_writes_it("be-reconcile", c))
        container, container_age = wait_batch_cgroups(c, be, want, container=True)
        pod, pod_age = wait_batch_cgroups(c, be, want, container=False)
        shares_name = "cpu.shares" if CGROUP_V1 else "cpu.weight"
        shares = pod_cgroup_file(c, "cpu", be, shares_name, container=True)
        assert shares is not None
        kubelets = "2" if CGROUP_V1 else "1"
        shares.write_text(kubelets)
        reset = time.monotonic()
        after_reset = read_or_empty(shares)
        restored, restored_in = wait_file(shares, want[shares_name], since=reset)
    finally:
        delete_pods(cp, "be-reconcile")
    assert container == want, f"BE container {container_age:.1f}s after it started"
    assert pod == want, f"BE pod cgroup {pod_age:.1f}s after its container started"
    # kubelet's value held until the reconcile's next round, or was rewritten within this read
    assert after_reset in (kubelets, want[shares_name])
    assert restored == want[shares_name], f"{shares_name} {restored!r} {restored_in:.1f}s after the reset"
    print(
        f"BE container {container} {container_age:.1f}s after it started, pod {pod} "
        f"{pod_age:.1f}s; {shares_name} reset to {kubelets} (read back {after_reset}), "
        f"{restored} again {restored_in:.1f}s later"
    )


RECONCILE_WAIT_SECONDS = 30.0


def wait_batch_cgroups(
    c: RealNodeConfig, pod: dict[str, Any], want: dict[str, str], *, container: bool
) -> tuple[dict[str, str], float]:
    """The cgroup's batch values once they are ``want`` (or the last read after 30 s), and how
    long after the container started they were read."""
    deadline = time.monotonic() + RECONCILE_WAIT_SECONDS
    while (found := batch_cgroups(c, pod, container=container)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return found, started_seconds_ago(pod)


def wait_file(path: Path, want: str, *, since: float) -> tuple[str, float]:
    deadline = since + RECONCILE_WAIT_SECONDS
    while (found := read_or_empty(path)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return found, time.monotonic() - since


def test_without_nri_and_the_reconcile_the_container_keeps_every_cpu(
    core_sched_colocation: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """The control: nothing but koordlet's two paths sets the cpuset, the BE pod's batch resources
    and its cpu.idle, so the tests above saw NRI's."""
    cp, c = core_sched_colocation
    every_cpu = parse_cpus(Path("/sys/devices/system/cpu/online").read_text().strip())
    restart_koordlet_with(cp, RECONCILE_OFF, *QOS_RECONCILE_OFF, NRI_OFF)
    wait_cpu_topology(cp, c)
    wait_node_slo_seen(cp, c)
    try:
        pod, cpus = start_lsr_pod(cp, c, "lsr-no-nri")
        (be,) = start_pods(cp, be_pod_as_the_webhook_writes_it("be-no-nri", c))
        check_control(c, pod, cpus, be, every_cpu)
    finally:
        delete_pods(cp, "lsr-no-nri", "be-no-nri")


def check_control(
    c: RealNodeConfig,
    pod: dict[str, Any],
    cpus: frozenset[int],
    be: dict[str, Any],
    every_cpu: frozenset[int],
) -> None:
    time.sleep(10)  # three of the reconcile's 3 s topology rounds, ten of its 1 s QoS rounds
    found = container_cpusets(c, pod)
    assert found, "no cgroup of the LSR container has cpuset.cpus"
    assert set(found.values()) == {every_cpu}, {str(p): format_cpus(held) for p, held in found.items()}
    assert cpus < every_cpu
    # kubelet's values for a BestEffort pod: the least shares, no quota, no memory limit, not idle
    kubelets = (
        {"cpu.shares": "2", "cpu.cfs_quota_us": "-1"}
        if CGROUP_V1
        else {"cpu.weight": "1", "cpu.max": "max 100000"}
    )
    for where in (batch_cgroups(c, be, container=True), batch_cgroups(c, be, container=False)):
        memory = where.pop("memory.limit_in_bytes" if CGROUP_V1 else "memory.max")
        assert where == kubelets
        assert memory != str(BATCH_MEMORY)
    assert cpu_idle(c, be) == "0"
