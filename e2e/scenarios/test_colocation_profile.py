"""The v1.7 Batch Colocation quick start, as ``docs/colocation.md`` writes it, on the real API server.

The commands and YAML files of the page's "Quick start" section are run as written (kubectl
create/label/apply): koord-manager (the session's process) mutates the quick start Job's pod into a
batch pod, and koord-scheduler (the session's, with the chart's RBAC) binds it on batch resources.
Two KWOK nodes of this module get batch allocatable from a status patch, standing in for
koord-manager's node resource controller. Also: a pod the profile does not select gets no patch
at all; a batch pod no node can hold stays Pending naming the resource; an ElasticQuota with a
batch-cpu max refuses a pod over it; a broken profile is refused naming the field.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import ssl
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from apis.quantity import Quantity
from e2e.cluster.__main__ import wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, make_pod, pods, wait_for

DOC = repo_root() / "docs" / "colocation.md"
CHART = repo_root() / "charts" / "koordinator-py"
NODES = ("colo-0", "colo-1")
BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
SPEC_KEY = "node.koordinator.sh/extended-resource-spec"
NAMESPACE = "batch-demo"
PLAIN = "batch-plain"
QUOTA_NS = "batch-quota"
WEBHOOK = "colocation-profile.koordinator-py.koordinator.sh"


def quick_start() -> str:
    text = DOC.read_text()
    return text[text.index("## Quick start") : text.index("\n## ", text.index("## Quick start") + 1)]


def doc_files() -> dict[str, str]:
    """The YAML files of the quick start: the ```yaml block after "Create `NAME`:"."""
    section = quick_start()
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"Create `([\w.-]+\.yaml)`:\s*```yaml\n(.*?)```", section, re.DOTALL)
    }


def doc_commands() -> list[str]:
    """The kubectl lines of the quick start's ```bash blocks, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", quick_start(), re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.startswith("kubectl ")]


def run_doc_command(cp: ControlPlane, line: str, files: dict[str, str]) -> None:
    args = shlex.split(line)[1:]
    given = None
    if "-f" in args:
        at = args.index("-f") + 1
        given, args[at] = files[args[at]], "-"
    cp.kubectl(*args, input=given)


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "colocation": "batch"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def _get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cp.kubectl("get", *args, "-o", "json"))
    return found


def _job_pod(cp: ControlPlane, namespace: str, job: str) -> dict[str, Any] | None:
    return next(
        (p for p in pods(cp, namespace) if p["metadata"].get("labels", {}).get("job-name") == job), None
    )


@pytest.fixture(scope="module")
def colocation(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    cp = control_plane
    classes = subprocess.run(
        [
            cp.tool("helm"),
            "template",
            "koordinator-py",
            str(CHART),
            "--show-only",
            "templates/priorityclasses.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cp.kubectl("apply", "-f", "-", input=classes)
    apply(cp, [_node(name) for name in NODES])
    wait_nodes_ready(cp)
    # koord-manager's node resource controller would write these from NodeMetric.
    batch = {BATCH_CPU: "5000", BATCH_MEMORY: "10Gi"}
    for name in NODES:
        patch = json.dumps({"status": {"capacity": batch, "allocatable": batch}})
        cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", patch)
    try:
        yield cp
    finally:
        cp.kubectl("delete", "clustercolocationprofile", "batch-workload-profile", "--ignore-not-found")
        for namespace in (NAMESPACE, PLAIN, QUOTA_NS):
            cp.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
        cp.kubectl("delete", "node", *NODES, "--ignore-not-found")


@pytest.fixture(scope="module")
def quick_start_profile(colocation: ControlPlane) -> ControlPlane:
    """Quick start steps 2 and 3, as written: the namespace, its label, the profile; returns once
    koord-manager applies the profile."""
    cp = colocation
    for line in doc_commands()[:3]:
        run_doc_command(cp, line, doc_files())
    cp.wait_service_account(NAMESPACE)
    wait_for(lambda: _profile_in_force(cp), 30, "koord-manager to apply the new profile")
    return cp


def _profile_in_force(cp: ControlPlane) -> bool:
    """koord-manager's index has the profile: a server-side dry run of a selected pod is mutated."""
    probe = make_pod(f"probe-{uuid.uuid4().hex[:6]}", NAMESPACE, labels={"app-type": "batch"})
    result = cp.run_kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe))
    return (
        result.returncode == 0
        and "koordinator.sh/qosClass" in json.loads(result.stdout)["metadata"]["labels"]
    )


def test_the_quick_start_makes_the_job_a_batch_pod_bound_on_batch_resources(
    quick_start_profile: ControlPlane, scheduler: Scheduler
) -> None:
    cp = quick_start_profile
    files = doc_files()
    assert set(files) == {"batch-colocation-profile.yaml", "batch-job.yaml", "manual-batch-job.yaml"}
    commands = doc_commands()
    assert len(commands) == 5, commands
    # Step 4: the Job; its controller creates the pod, which the webhook mutates.
    run_doc_command(cp, commands[3], files)
    pod = wait_for(lambda: _job_pod(cp, NAMESPACE, "data-processing-job"), 60, "the Job's pod")

    labels = pod["metadata"]["labels"]
    assert labels["koordinator.sh/qosClass"] == "BE"
    assert labels["koordinator.sh/mutated"] == "true"
    spec = pod["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("koord-batch", 5000)
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["schedulerName"] == "koord-scheduler"
    resources = spec["containers"][0]["resources"]
    for part in ("requests", "limits"):
        assert set(resources[part]) == {BATCH_CPU, BATCH_MEMORY}, resources
        assert Quantity.parse(resources[part][BATCH_CPU]) == Quantity.parse(2000)
        assert Quantity.parse(resources[part][BATCH_MEMORY]) == Quantity.parse("4Gi")
    extended = json.loads(pod["metadata"]["annotations"][SPEC_KEY])
    assert set(extended["containers"]["worker"]) == {"requests", "limits"}
    assert Quantity.parse(extended["containers"]["worker"]["requests"][BATCH_CPU]) == Quantity.parse(2000)

    # Step 6: koord-scheduler binds it on a node with batch resources.
    name = pod["metadata"]["name"]
    node = wait_for(
        lambda: _get(cp, "pod", name, "-n", NAMESPACE)["spec"].get("nodeName"), 60, "the batch pod bound"
    )
    assert node in NODES

    # Step 7: a pod asking for batch resources itself is left as written, and bound too.
    run_doc_command(cp, commands[4], files)
    manual = wait_for(lambda: _job_pod(cp, NAMESPACE, "manual-batch-job"), 60, "the manual Job's pod")
    assert "koordinator.sh/mutated" not in manual["metadata"]["labels"]
    assert SPEC_KEY not in (manual["metadata"].get("annotations") or {})
    assert set(manual["spec"]["containers"][0]["resources"]["requests"]) == {BATCH_CPU, BATCH_MEMORY}
    manual_name = manual["metadata"]["name"]
    bound = wait_for(
        lambda: _get(cp, "pod", manual_name, "-n", NAMESPACE)["spec"].get("nodeName"),
        60,
        "the manual pod bound",
    )
    assert bound in NODES


def _mutating_webhook(cp: ControlPlane) -> dict[str, Any]:
    configs = _get(cp, "mutatingwebhookconfigurations")["items"]
    return next(w for c in configs for w in c.get("webhooks") or [] if w["name"] == WEBHOOK)


def _review(cp: ControlPlane, pod: dict[str, Any]) -> dict[str, Any]:
    """Ask koord-manager's colocation webhook itself, at the URL and with the CA the API server uses."""
    webhook = _mutating_webhook(cp)
    client = webhook["clientConfig"]
    context = ssl.create_default_context(cadata=base64.b64decode(client["caBundle"]).decode())
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": pod["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "e2e"},
            "object": pod,
            "dryRun": True,
        },
    }
    request = urllib.request.Request(
        client["url"], data=json.dumps(review).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        response: dict[str, Any] = json.loads(answer.read())["response"]
    return response


def test_a_pod_the_profile_does_not_select_is_untouched(quick_start_profile: ControlPlane) -> None:
    cp = quick_start_profile
    cp.create_namespace(PLAIN)  # not labelled koordinator.sh/enable-colocation
    for namespace in (PLAIN, NAMESPACE):
        labels = {"app-type": "batch" if namespace == PLAIN else "web"}
        pod = make_pod(f"untouched-{namespace}", namespace, cpu="2", memory="4Gi", labels=labels)
        pod["metadata"]["annotations"] = {"team": "data"}
        pod["spec"]["schedulerName"] = "default-scheduler"
        # The webhook answers with no patch at all ...
        response = _review(cp, pod)
        assert response["allowed"] is True
        assert "patch" not in response, response
        # ... and the pod the API server stores is what was sent.
        created = json.loads(cp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(pod)))
        assert created["metadata"]["labels"] == labels
        assert created["metadata"]["annotations"] == {"team": "data"}
        assert created["spec"]["schedulerName"] == "default-scheduler"
        assert created["spec"]["containers"][0]["resources"] == pod["spec"]["containers"][0]["resources"]
        assert "priorityClassName" not in created["spec"]
        assert created["spec"]["priority"] == 0


def test_a_batch_pod_no_node_can_hold_stays_pending_naming_the_resource(
    quick_start_profile: ControlPlane, scheduler: Scheduler
) -> None:
    cp = quick_start_profile
    big = make_pod("big-batch", NAMESPACE)
    batch = {BATCH_CPU: "1000", BATCH_MEMORY: "64Gi"}  # 10Gi on each batch node
    big["spec"]["containers"][0]["resources"] = {"requests": batch, "limits": batch}
    apply(cp, [big])
    message = wait_for(
        lambda: next((m for m in failed_scheduling(cp, NAMESPACE, "big-batch") if BATCH_MEMORY in m), None),
        60,
        "FailedScheduling naming batch-memory",
    )
    assert f"Insufficient {BATCH_MEMORY}" in message, message
    assert not _get(cp, "pod", "big-batch", "-n", NAMESPACE)["spec"].get("nodeName")


def test_an_elastic_quota_with_a_batch_cpu_max_refuses_a_pod_over_it(
    colocation: ControlPlane, scheduler: Scheduler
) -> None:
    cp = colocation
    cp.create_namespace(QUOTA_NS)
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": QUOTA_NS, "namespace": QUOTA_NS},
        "spec": {"max": {BATCH_CPU: "3000", BATCH_MEMORY: "20Gi"}},
    }
    apply(cp, [quota])

    def batch_pod(name: str) -> dict[str, Any]:
        pod = make_pod(name, QUOTA_NS)
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {BATCH_CPU: "2000", BATCH_MEMORY: "1Gi"},
            "limits": {BATCH_CPU: "2000", BATCH_MEMORY: "1Gi"},
        }
        return pod

    apply(cp, [batch_pod("first")])
    wait_for(lambda: _get(cp, "pod", "first", "-n", QUOTA_NS)["spec"].get("nodeName"), 60, "first bound")
    apply(cp, [batch_pod("second")])
    message = wait_for(
        lambda: next(
            (m for m in failed_scheduling(cp, QUOTA_NS, "second") if "Insufficient quotas" in m), None
        ),
        60,
        "FailedScheduling naming the quota",
    )
    assert f"Insufficient quotas: quota {QUOTA_NS} {BATCH_CPU} used 2k + request 2k > " in message, message
    assert not _get(cp, "pod", "second", "-n", QUOTA_NS)["spec"].get("nodeName")


def test_a_broken_profile_is_refused_naming_the_field(control_plane: ControlPlane) -> None:
    bad = {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": "bad-profile"},
        "spec": {
            "probability": "half",
            "selector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
        },
    }
    result = control_plane.run_kubectl("apply", "-f", "-", input=yaml.safe_dump(bad))
    assert result.returncode != 0, "the broken profile was accepted"
    assert "spec.probability: 'half' is neither an integer nor a percentage" in result.stderr, result.stderr
    assert "spec.selector.matchExpressions[0].values: must be non-empty for operator In" in result.stderr


def test_the_chart_lets_koord_manager_read_what_the_webhook_needs(control_plane: ControlPlane) -> None:
    cp = control_plane
    rendered = subprocess.run(
        [cp.tool("helm"), "template", "ccp-rbac", str(CHART), "--show-only", "templates/manager-rbac.yaml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    account = f"ccp-rbac-{uuid.uuid4().hex[:6]}"
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    for doc in docs:
        doc["metadata"]["name"] = account
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = account
            doc["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": "default"}]
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    try:
        user = f"system:serviceaccount:default:{account}"
        for verb, resource in [
            ("list", "clustercolocationprofiles.config.koordinator.sh"),
            ("watch", "clustercolocationprofiles.config.koordinator.sh"),
            ("list", "namespaces"),
            ("watch", "namespaces"),
            ("get", "namespaces"),
            ("get", "priorityclasses.scheduling.k8s.io"),
            ("create", "events"),
        ]:
            allowed = cp.run_kubectl("auth", "can-i", verb, resource, "--as", user)
            assert allowed.stdout.strip() == "yes", f"{verb} {resource}: {allowed.stdout}{allowed.stderr}"
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            cp.kubectl("delete", kind, account, "--ignore-not-found")
