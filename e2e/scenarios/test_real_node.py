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
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apis.cpulist import format_cpus, parse_cpus
from apis.extension.numa import (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_RESOURCE_STATUS,
)
from apis.quantity import Quantity
from e2e.cluster.controlplane import ControlPlane, KubectlError, repo_root
from e2e.image import name as image_name
from e2e.realnode import RealNodeConfig, leftovers, stop
from e2e.realnode.chart import NAMESPACE as CHART_NAMESPACE
from e2e.realnode.chart import wait_rolled_out
from e2e.realnode.images import BUSYBOX_IMAGE
from e2e.realnode.probes import (
    container_cfs_quotas,
    cpuset_hierarchies,
    pod_cgroup_dirs,
    pod_cpu_seconds,
    wait_cpusets,
    wait_pools,
)
from e2e.realnode.testpods import cpuset_pod, gang_member
from e2e.scenarios.test_elasticquota_scheduling import elastic_quota
from e2e.workloads import get_object, list_items
from e2e.workloads import pods as pods_in

pytestmark = pytest.mark.real_node

NAMESPACE = "real-node"
BURN = repo_root() / "docs" / "examples" / "real-node" / "burn.yaml"
REPORT_EVERY_5_SECONDS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
    "data": {"colocation-config": json.dumps({"metricReportIntervalSeconds": 5})},
}
# The container proves it runs: it reads its ServiceAccount token, opens a TCP connection to the
# `kubernetes` Service's ClusterIP (kube-proxy's DNAT to the API server's advertised address), says
# so, and only then becomes Ready.
SCRIPT = (
    "test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-ok; "
    "echo | nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT && echo service-ok; "
    "touch /tmp/ready; exec sleep 3600"
)


def node(cp: ControlPlane, name: str) -> dict[str, Any]:
    return get_object(cp, "node", name)


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
    fakes = [n for n in list_items(cp, "nodes") if n["metadata"]["name"] != c.node_name]
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
    running = get_object(cp, "pod", "sh", namespace=NAMESPACE)
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


def test_the_chart_runs_every_component_from_our_image_on_the_real_node(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = chart
    pods = [p for p in pods_in(cp, CHART_NAMESPACE) if not p["metadata"].get("deletionTimestamp")]
    components = sorted({p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods})
    assert components == ["descheduler", "koordlet", "manager", "scheduler"]
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == c.node_name, name
        assert pod["status"]["phase"] == "Running", name
        (container,) = pod["status"]["containerStatuses"]
        assert container["ready"], name
        assert container["image"] == image_name.reference(), name
        assert container["containerID"].startswith("containerd://"), name


def test_koordlet_reports_the_cpu_manager_policy_the_kubelet_runs_with(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """The chart mounts the kubelet's root dir (``koordlet.hostKubelet``), where this node's kubelet
    keeps its ``config.yaml`` as kubeadm's does: the NodeResourceTopology's CPU manager policy is
    the one the kubelet's ``/configz`` shows. Without the mount koordlet cannot read the file and
    writes ``{}`` (unknown), which koord-scheduler takes for no policy."""
    cp, c = chart
    configz = json.loads(cp.kubectl("get", "--raw", f"/api/v1/nodes/{c.node_name}/proxy/configz"))
    want = configz["kubeletconfig"]["cpuManagerPolicy"]
    deadline = time.monotonic() + 60
    reported: dict[str, Any] = {}
    while time.monotonic() < deadline:
        topology = cp.read("noderesourcetopology", c.node_name) or {}
        annotations = topology.get("metadata", {}).get("annotations") or {}
        reported = json.loads(annotations.get(ANNOTATION_KUBELET_CPU_MANAGER_POLICY) or "{}")
        if reported.get("policy") == want:
            break
        time.sleep(1.0)
    assert reported.get("policy") == want, (
        f"the kubelet runs the {want!r} CPU manager policy; {c.node_name}'s NodeResourceTopology "
        f"says {ANNOTATION_KUBELET_CPU_MANAGER_POLICY}={json.dumps(reported)}"
    )


def test_koordlet_reads_the_hosts_proc_for_the_cpu_basic_info(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """The chart mounts the host's /proc at /host/proc (``koordlet.hostProc``), where koordlet reads
    ``cpuinfo``: the NodeResourceTopology's cpu-basic-info carries the model name and vendor this
    host's /proc/cpuinfo shows (the real node is this host). Without the mount both are missing."""
    cp, c = chart
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines())
        if key.strip() in ("model name", "vendor_id")
    )
    deadline = time.monotonic() + 60
    reported: dict[str, Any] = {}
    while time.monotonic() < deadline:
        topology = cp.read("noderesourcetopology", c.node_name) or {}
        annotations = topology.get("metadata", {}).get("annotations") or {}
        reported = json.loads(annotations.get(ANNOTATION_CPU_BASIC_INFO) or "{}")
        if reported.get("cpuModel"):
            break
        time.sleep(1.0)
    assert (reported.get("cpuModel"), reported.get("vendorID")) == (
        fields["model name"],
        fields["vendor_id"],
    ), (
        f"/proc/cpuinfo says {fields}; {c.node_name}'s NodeResourceTopology says "
        f"{ANNOTATION_CPU_BASIC_INFO}={json.dumps(reported)}"
    )


def test_the_admission_webhook_answers_through_the_charts_service(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, _ = chart
    bad = elastic_quota("inverted", "default", min={"cpu": "2"}, max={"cpu": "1"})
    proc = cp.run_kubectl("apply", "-f", "-", input=json.dumps(bad))
    assert proc.returncode != 0, "an ElasticQuota whose min exceeds its max was admitted"
    assert "admission webhook" in proc.stderr, proc.stderr
    assert "spec.min.cpu" in proc.stderr, proc.stderr
    good = elastic_quota("fine", "default", min={"cpu": "1"}, max={"cpu": "2"})
    cp.kubectl("apply", "-f", "-", input=json.dumps(good))
    cp.kubectl("delete", "elasticquota", "fine", "-n", "default", "--wait=false")


def test_a_koord_scheduler_deployment_runs_there_and_koordlet_reports_its_cpu(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    """docs/examples/real-node/burn.yaml: bound by koord-scheduler, Running and Ready on the real
    node, and its busy CPU in the real node's NodeMetric as its cgroup accounts it (about half a
    CPU, its limit, on an idle node)."""
    cp, c = chart
    # koord-manager passes the interval on to koordlet through the NodeMetric's spec.
    cp.kubectl("apply", "-f", "-", input=json.dumps(REPORT_EVERY_5_SECONDS))
    cp.apply_file(BURN)
    cp.kubectl("rollout", "status", "deployment/burn", "-n", "default", "--timeout=120s")
    (pod,) = [p for p in pods_in(cp, "default", "app=burn") if not p["metadata"].get("deletionTimestamp")]
    name = pod["metadata"]["name"]
    assert pod["spec"]["schedulerName"] == "koord-scheduler"
    assert pod["spec"]["nodeName"] == c.node_name
    assert pod["status"]["containerStatuses"][0]["ready"]

    # The truth is the pod's own cgroup: CPU seconds since its container started, over that time.
    # (On a loaded 2-core CI machine a busy loop gets less than a whole CPU: compare, not assume.)
    uid = pod["metadata"]["uid"]
    started = datetime.fromisoformat(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    deadline = time.monotonic() + 90
    reported = truth = 0.0
    while time.monotonic() < deadline:
        metric = cp.get_json(f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{c.node_name}")
        status = metric.get("status") or {}
        interval = (metric.get("spec") or {}).get("metricCollectPolicy", {}).get("reportIntervalSeconds")
        usage = {p["name"]: p["podUsage"]["resources"] for p in status.get("podsMetric") or ()}
        if name in usage and interval == 5:
            reported = Quantity.parse(usage[name]["cpu"]).milli_value() / 1000
            truth = pod_cpu_seconds(c, uid) / (datetime.now(UTC) - started).total_seconds()
            if truth >= 0.25 and abs(reported - truth) <= 0.1 + 0.25 * truth:
                break
        time.sleep(1.0)
    assert truth >= 0.25, f"the busy pod used {truth:.2f} CPU by its cgroup: it did not run"
    assert abs(reported - truth) <= 0.1 + 0.25 * truth, (
        f"koordlet reported {reported:.3f} CPU for a pod whose cgroup says {truth:.3f}"
    )
    cp.kubectl("delete", "deployment", "burn", "-n", "default", "--wait=false")


def test_a_gang_of_two_starts_together_on_the_real_node(chart: tuple[ControlPlane, RealNodeConfig]) -> None:
    cp, c = chart
    members = [gang_member(f"worker-{i}", c) for i in range(2)]
    cp.kubectl("apply", "-f", "-", input=json.dumps(members[0]))
    with pytest.raises(KubectlError):  # one member alone waits for the other
        cp.kubectl("wait", "--for=condition=PodScheduled", "pod/worker-0", "-n", "default", "--timeout=5s")
    cp.kubectl("apply", "-f", "-", input=json.dumps(members[1]))
    cp.kubectl(
        "wait", "--for=condition=Ready", "pod/worker-0", "pod/worker-1", "-n", "default", "--timeout=90s"
    )
    pods = [p for p in pods_in(cp, "default", "app=gang") if p["metadata"]["name"].startswith("worker-")]
    assert {p["spec"]["nodeName"] for p in pods} == {c.node_name}
    cp.kubectl("delete", "pod", "worker-0", "worker-1", "-n", "default", "--wait=false")


# Full tier: 16-46 s of a rolling update on the one node; the fast tier keeps the chart's install.
@pytest.mark.full
def test_koord_scheduler_leads_again_after_a_rolling_restart(
    chart: tuple[ControlPlane, RealNodeConfig],
) -> None:
    cp, c = chart
    lease = "/apis/coordination.k8s.io/v1/namespaces/koordinator-system/leases/koord-scheduler"
    before = cp.get_json(lease)["spec"]["holderIdentity"]
    old = {
        p["metadata"]["name"] for p in pods_in(cp, CHART_NAMESPACE, "app.kubernetes.io/component=scheduler")
    }
    cp.kubectl("rollout", "restart", "deployment/koord-scheduler", "-n", CHART_NAMESPACE)
    wait_rolled_out(cp, timeout=180)
    deadline = time.monotonic() + 60
    holder = before
    while time.monotonic() < deadline:
        holder = cp.get_json(lease)["spec"].get("holderIdentity") or ""
        if holder and holder.split("_")[0] not in old:
            break
        time.sleep(1.0)
    assert holder.split("_")[0] not in old, f"the Lease is still held by an old replica: {holder}"
    member = gang_member("after-restart", c, gang=False)
    cp.kubectl("apply", "-f", "-", input=json.dumps(member))
    cp.kubectl("wait", "--for=condition=Ready", "pod/after-restart", "-n", "default", "--timeout=90s")
    cp.kubectl("delete", "pod", "after-restart", "-n", "default", "--wait=false")


def assert_holds(cp: ControlPlane, found: dict[Path, frozenset[int]], want: frozenset[int], who: str) -> None:
    assert found, f"{who}: no cgroup of its container has cpuset.cpus"
    wrong = {str(path): format_cpus(cpus) for path, cpus in found.items() if cpus != want}
    if wrong:  # koordlet says why a write failed (a read-only mount, EACCES, EBUSY)
        logs = cp.run_kubectl("logs", "-n", CHART_NAMESPACE, "daemonset/koordlet").stdout.splitlines()
        skipped = "\n".join(line for line in logs if "cgroup write skipped" in line)
        pytest.fail(f"{who}: want {format_cpus(want)}, found {wrong}\nkoordlet:\n{skipped[-3000:]}")


@pytest.mark.parametrize("qos", ["LSR", "LSE"])
def test_an_lsr_or_lse_pod_gets_its_cpuset_on_its_real_container_and_the_pools_follow(
    chart: tuple[ControlPlane, RealNodeConfig], qos: str
) -> None:
    """koord-scheduler gives an LSR (LSE) pod of one whole CPU a cpuset in its resource-status;
    koordlet writes it into the container's cgroup with the CFS quota unset, and the LS share pool
    (an LS pod's cgroup) is the other CPU of this 2-CPU host; the BE pool keeps an LSR pod's CPU and
    loses an LSE pod's. When the pod goes, the pools and the LS pod get every CPU back."""
    cp, c = chart
    every_cpu = parse_cpus(Path("/sys/devices/system/cpu/online").read_text().strip())
    assert len(every_cpu) >= 2, f"an {qos} pod of one CPU needs a host of two CPUs at least"
    assert cpuset_hierarchies(), "no cgroup hierarchy with cpuset.cpus on this host"
    deadline = time.monotonic() + 60
    topology: dict[str, Any] = {}
    while time.monotonic() < deadline:
        topology = cp.read("noderesourcetopology", c.node_name) or {}
        if ANNOTATION_NODE_CPU_TOPOLOGY in (topology.get("metadata", {}).get("annotations") or {}):
            break
        time.sleep(1.0)
    assert ANNOTATION_NODE_CPU_TOPOLOGY in (topology.get("metadata", {}).get("annotations") or {}), (
        f"koordlet reported no CPU topology for {c.node_name}: {topology}"
    )

    bound, ls = qos.lower(), f"ls-beside-{qos.lower()}"
    cp.kubectl("apply", "-f", "-", input=json.dumps(cpuset_pod(ls, c, "LS", cpu="100m", limit="1")))
    cp.kubectl("apply", "-f", "-", input=json.dumps(cpuset_pod(bound, c, qos, cpu="1", limit="1")))
    cp.kubectl("wait", "--for=condition=Ready", f"pod/{bound}", f"pod/{ls}", "-n", "default", "--timeout=90s")
    pod = cp.get_json(f"/api/v1/namespaces/default/pods/{bound}")
    assert pod["spec"]["nodeName"] == c.node_name
    assert pod["status"]["qosClass"] == "Guaranteed"
    status = json.loads(pod["metadata"].get("annotations", {}).get(ANNOTATION_RESOURCE_STATUS) or "{}")
    cpus = parse_cpus(status.get("cpuset") or "")
    assert len(cpus) == 1, f"koord-scheduler gave the {qos} pod {status}"
    assert cpus < every_cpu, f"koord-scheduler gave the {qos} pod {status}"
    shared = every_cpu - cpus

    assert_holds(cp, wait_cpusets(cp, c, bound, cpus), cpus, f"{qos} pod")
    assert_holds(cp, wait_cpusets(cp, c, ls, shared), shared, "LS pod")
    quotas = container_cfs_quotas(c, pod)
    assert quotas, f"no cpu controller holds the {qos} container's CFS quota"
    assert set(quotas.values()) <= {"-1", "max"}, f"{qos} container throttled: {quotas}"
    be = shared if qos == "LSE" else every_cpu
    assert wait_pools(cp, c, shared, be) == (shared, be)

    cp.kubectl("delete", "pod", bound, "-n", "default", "--wait=true", "--timeout=60s")
    assert wait_pools(cp, c, every_cpu, every_cpu) == (every_cpu, every_cpu)
    assert_holds(cp, wait_cpusets(cp, c, ls, every_cpu), every_cpu, f"LS pod after the {qos} pod went")
    cp.kubectl("delete", "pod", ls, "-n", "default", "--wait=true", "--timeout=60s")


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
