"""The Helm chart lints, and what it renders is accepted by the real API server (dry run)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.image import name as image_name
from scheduler.plugins.coscheduling.args import CoschedulingArgs

CHART = repo_root() / "charts" / "koordinator-py"


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}}


def _beside_local_webhooks(rendered: str) -> str:
    """The session's koord-manager manages webhook configurations of the chart's names, pointing
    at its local URL; a dry run merged into them would hold both a URL and a Service. Dry-run the
    chart's under other names."""
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for doc in docs:
        if doc["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            doc["metadata"]["name"] += "-dry-run"
    return yaml.safe_dump_all(docs)


def test_helm_lint(control_plane: ControlPlane) -> None:
    result = control_plane.run_helm("lint", str(CHART), "--strict")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_chart_passes_server_side_dry_run(control_plane: ControlPlane) -> None:
    rendered = control_plane.run_helm(
        "template", "koordinator-py", str(CHART), "--include-crds", "--kube-version", "1.35.4"
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: CustomResourceDefinition" in rendered.stdout
    # The namespace must exist for a dry run of what goes into it (a dry run creates nothing).
    control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(NAMESPACE))
    applied = control_plane.run_kubectl(
        "apply", "--dry-run=server", "-f", "-", input=_beside_local_webhooks(rendered.stdout)
    )
    assert applied.returncode == 0, applied.stderr
    assert "created (server dry run)" in applied.stdout or "configured (server dry run)" in applied.stdout


def test_chart_crds_are_the_generated_ones() -> None:
    generated = sorted(p.name for p in (repo_root() / "crds").glob("*.yaml"))
    in_chart = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert generated == in_chart
    for name in generated:
        assert (repo_root() / "crds" / name).read_text() == (CHART / "crds" / name).read_text()


def _rendered(cp: ControlPlane, *args: str) -> list[dict[str, Any]]:
    result = cp.run_helm("template", "koordinator-py", str(CHART), "--kube-version", "1.35.4", *args)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_the_chart_owns_the_webhook_configurations(control_plane: ControlPlane) -> None:
    """A stopping koord-manager replica must not take admission with it: the chart renders the
    configurations (operators.webhookgen) and koord-manager leaves them alone."""
    docs = _rendered(control_plane)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    validating = by_kind[("ValidatingWebhookConfiguration", "koordinator-py.koordinator.sh")]
    mutating = by_kind[("MutatingWebhookConfiguration", "koordinator-py.koordinator.sh")]
    secret = by_kind[("Secret", "koord-manager-webhook-cert")]
    for webhook in validating["webhooks"] + mutating["webhooks"]:
        assert webhook["clientConfig"]["service"]["name"] == "koord-manager"
        assert webhook["clientConfig"]["caBundle"] == secret["data"]["tls.crt"]
    deployment = by_kind[("Deployment", "koord-manager")]
    assert (
        "--no-manage-webhook-configuration"
        in deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    )
    role = by_kind[("ClusterRole", "koord-manager")]
    assert not [r for r in role["rules"] if "admissionregistration.k8s.io" in r["apiGroups"]]


@pytest.mark.parametrize(
    ("values", "aware", "preempt"),
    [
        pytest.param([], False, False, id="koordinator-defaults"),
        pytest.param(
            [
                "--set",
                "scheduler.coscheduling.awareNetworkTopology=true",
                "--set",
                "scheduler.coscheduling.enablePreemption=true",
            ],
            True,
            True,
            id="v1.7-features-on",
        ),
    ],
)
def test_the_v17_feature_values_render_into_the_scheduler_config(
    control_plane: ControlPlane, values: list[str], aware: bool, preempt: bool
) -> None:
    docs = _rendered(control_plane, "--show-only", "templates/scheduler-configmap.yaml", *values)
    config = yaml.safe_load(docs[0]["data"]["config.yaml"])
    (profile,) = config["profiles"]
    (entry,) = [p for p in profile["pluginConfig"] if p["name"] == "Coscheduling"]
    raw = {k: v for k, v in entry["args"].items() if k not in ("apiVersion", "kind")}
    args = CoschedulingArgs.model_validate(raw)
    assert (args.aware_network_topology, args.enable_preemption) == (aware, preempt)
    assert "plugins" not in profile  # the default plugin set stays on


@pytest.mark.parametrize(
    ("component", "gates"),
    [
        ("scheduler", "ElasticQuotaIgnorePodOverhead=true,DisableDefaultQuota=true"),
        ("manager", "ElasticQuotaGuaranteeUsage=true"),
    ],
)
def test_feature_gates_reach_the_components(control_plane: ControlPlane, component: str, gates: str) -> None:
    def command(*values: str) -> list[str]:
        docs = _rendered(control_plane, "--show-only", f"templates/{component}-deployment.yaml", *values)
        container = docs[0]["spec"]["template"]["spec"]["containers"][0]
        return list(container["command"])

    assert not any(arg.startswith("--feature-gates") for arg in command())
    escaped = gates.replace(",", "\\,")  # --set splits on unescaped commas
    assert f"--feature-gates={gates}" in command("--set-string", f"{component}.featureGates={escaped}")


def test_chart_images_are_what_make_image_builds(control_plane: ControlPlane) -> None:
    """Every container the chart renders runs the image `make image` builds and names
    (e2e/image/name.py): the chart's default cannot drift from the image."""
    docs = _rendered(control_plane, "--set", "descheduler.enabled=true")
    images: dict[str, dict[str, Any]] = {}
    for doc in docs:
        if doc["kind"] not in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            images[f"{doc['kind']}/{doc['metadata']['name']}/{container['name']}"] = container
    assert len(images) >= 4, sorted(images)
    for where, container in images.items():
        assert container["image"] == image_name.reference(), where
        assert container["imagePullPolicy"] == "IfNotPresent", where


def test_a_slow_start_is_never_a_liveness_failure(control_plane: ControlPlane) -> None:
    """Every container with a liveness probe has a startup probe giving it minutes (kubeadm's for
    kube-scheduler: 24 x 10 s), and no probe gives up after kubelet's default 1 s: on a busy
    2-core node our components took more than the old 15 s + 3 x 10 s to import and were killed
    over and over (CrashLoopBackOff) before they ever answered."""
    docs = _rendered(control_plane, "--set", "descheduler.enabled=true")
    checked = []
    for doc in docs:
        if doc["kind"] not in ("Deployment", "DaemonSet"):
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            where = f"{doc['kind']}/{doc['metadata']['name']}/{container['name']}"
            if "livenessProbe" not in container:
                continue
            startup = container.get("startupProbe")
            assert startup is not None, where
            assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, where
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                if probe in container:
                    assert container[probe].get("timeoutSeconds", 1) >= 5, f"{where} {probe}"
            checked.append(where)
    assert len(checked) >= 4, checked


def test_koordlet_runs_as_root_only_when_it_writes_cgroups(control_plane: ControlPlane) -> None:
    """The image's user (65532) has no capabilities even in a privileged container, and the host's
    cgroup files are root's: with koordlet.qos koordlet runs as root (every cgroup write failed with
    EACCES on the real node otherwise); without it, as the image's user, read-only."""

    def security(*values: str) -> dict[str, Any]:
        docs = _rendered(control_plane, "--show-only", "templates/koordlet-daemonset.yaml", *values)
        context: dict[str, Any] = docs[0]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        return context

    writing = security()
    assert "privileged" not in writing  # root owns the files: no capability is needed (real node)
    assert writing["capabilities"] == {"drop": ["ALL"]}
    assert writing["allowPrivilegeEscalation"] is False
    assert (writing["runAsUser"], writing["runAsGroup"], writing["runAsNonRoot"]) == (0, 0, False)
    reading = security("--set", "koordlet.qos=false")
    assert "runAsUser" not in reading
    assert reading["allowPrivilegeEscalation"] is False


def test_the_podresources_proxy_value_adds_its_gate_and_mounts(control_plane: ControlPlane) -> None:
    """As Koordinator's DaemonSet: the kubelet's pod-resources directory read-only, the proxy's
    directory created if missing, and the gate PodResourcesProxy beside the gates already set."""

    def daemonset(*values: str) -> dict[str, Any]:
        docs = _rendered(control_plane, "--show-only", "templates/koordlet-daemonset.yaml", *values)
        spec: dict[str, Any] = docs[0]["spec"]["template"]["spec"]
        return spec

    off = daemonset()
    assert not any(arg.startswith("--feature-gates") for arg in off["containers"][0]["command"])
    assert "pod-resources" not in json.dumps(off)
    on = daemonset(
        "--set",
        "koordlet.podResourcesProxy.enabled=true",
        "--set",
        "koordlet.hostKubelet.path=/data/kubelet/",
        "--set-string",
        "koordlet.featureGates=BECPUEvict=true",
    )
    container = on["containers"][0]
    assert "--feature-gates=BECPUEvict=true,PodResourcesProxy=true" in container["command"]
    assert "--var-lib-kubelet-dir=/host/var/lib/kubelet" in container["command"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"] for v in on["volumes"]}
    # the kubelet's socket is in its root dir, which the chart mounts anyway (koordlet.hostKubelet)
    assert "kubelet-pod-resources" not in mounts
    assert volumes["host-kubelet"]["path"] == "/data/kubelet/"
    assert mounts["pod-resources-proxy"]["mountPath"] == "/var/run/koordlet/pod-resources"
    assert volumes["pod-resources-proxy"] == {
        "path": "/var/run/koordlet/pod-resources",
        "type": "DirectoryOrCreate",
    }
    # without the root dir, its pod-resources directory alone
    narrow = daemonset(
        "--set",
        "koordlet.podResourcesProxy.enabled=true",
        "--set",
        "koordlet.hostKubelet.mount=false",
        "--set",
        "koordlet.hostKubelet.path=/data/kubelet/",
    )
    mounts = {m["name"]: m for m in narrow["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"] for v in narrow["volumes"]}
    assert "host-kubelet" not in mounts
    assert mounts["kubelet-pod-resources"]["mountPath"] == "/host/var/lib/kubelet/pod-resources"
    assert mounts["kubelet-pod-resources"]["readOnly"] is True
    assert volumes["kubelet-pod-resources"]["path"] == "/data/kubelet/pod-resources"
    assert "--var-lib-kubelet-dir=/host/var/lib/kubelet" in narrow["containers"][0]["command"]


def test_koordlet_reads_the_kubelets_root_dir_read_only_and_the_hosts_proc(
    control_plane: ControlPlane,
) -> None:
    """As Koordinator's chart mounts /var/lib/kubelet: the node's kubelet root dir (its config.yaml
    and cpu_manager_state, which koordlet reads under --host-root) read-only, following the host's
    mounts, at /host/var/lib/kubelet; the host's /proc at /host/proc (its cpuinfo, meminfo and, with
    QoS, the sched sysctls); the container keeps no capability and is not privileged."""

    def daemonset(*values: str) -> dict[str, Any]:
        docs = _rendered(control_plane, "--show-only", "templates/koordlet-daemonset.yaml", *values)
        spec: dict[str, Any] = docs[0]["spec"]["template"]["spec"]
        return spec

    spec = daemonset()
    (container,) = spec["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "host-kubelet"]
    assert mount == {
        "name": "host-kubelet",
        "mountPath": "/host/var/lib/kubelet",
        "readOnly": True,
        "mountPropagation": "HostToContainer",
    }
    (volume,) = [v for v in spec["volumes"] if v["name"] == "host-kubelet"]
    assert volume["hostPath"] == {"path": "/var/lib/kubelet", "type": "Directory"}
    assert "--host-root=/host" in container["command"]  # config.yaml: /host + /var/lib/kubelet/...
    assert "--var-lib-kubelet-dir=/host/var/lib/kubelet" in container["command"]
    assert not any(arg.startswith("--kubelet-config") for arg in container["command"])
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in container["securityContext"]

    moved = daemonset("--set", "koordlet.hostKubelet.path=/data/kubelet")
    (volume,) = [v for v in moved["volumes"] if v["name"] == "host-kubelet"]
    assert volume["hostPath"]["path"] == "/data/kubelet"

    # only the kubelet's mount: --host-root still points koordlet at it
    alone = daemonset("--set", "koordlet.hostCgroup.mount=false", "--set", "koordlet.hostSys.mount=false")
    assert "--host-root=/host" in alone["containers"][0]["command"]
    off = daemonset("--set", "koordlet.hostKubelet.mount=false")
    assert "/var/lib/kubelet" not in json.dumps(off)

    (proc,) = [m for m in container["volumeMounts"] if m["name"] == "host-proc"]
    assert proc == {"name": "host-proc", "mountPath": "/host/proc", "readOnly": False}  # qos: the sysctls
    (volume,) = [v for v in spec["volumes"] if v["name"] == "host-proc"]
    assert volume["hostPath"] == {"path": "/proc", "type": "Directory"}
    reader = daemonset("--set", "koordlet.qos=false")
    (proc,) = [m for m in reader["containers"][0]["volumeMounts"] if m["name"] == "host-proc"]
    assert proc["readOnly"] is True
    assert "host-proc" not in json.dumps(daemonset("--set", "koordlet.hostProc.mount=false"))

    renamed = control_plane.run_helm(
        "template",
        "koordinator-py",
        str(CHART),
        "--set",
        "koordlet.podResourcesProxy.kubeletRootDir=/data/kubelet",
    )
    assert renamed.returncode != 0
    assert "koordlet.hostKubelet.path" in renamed.stderr
