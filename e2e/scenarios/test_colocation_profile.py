"""The v1.7 Batch Colocation quick start, as ``docs/colocation.md`` writes it, on the real API server.

The commands and YAML files of the page's "Quick start" section are run as written (kubectl
create/label/apply): koord-manager (the session's process) mutates the quick start Job's pod into a
batch pod; koordlet's simulation (a real process, the chart's koordlet RBAC) reports the dev
cluster's co-location node ``colo-0`` (created here from ``e2e/clusters/dev.yaml``) from the load
file `make up` uses, ``e2e/clusters/dev-load.yaml``; the page's ``slo-controller-config`` makes
koord-manager compute that node's batch and mid resources, which must be what the page prints (and
what the formulas give, computed here from the pool and the load file); koord-scheduler (the
session's, with the chart's RBAC) then binds the pod on them. The test writes no node status.
Also: a pod the profile does not select gets no patch at all; a batch pod no node can hold stays
Pending naming the resource; an ElasticQuota with a batch-cpu max refuses a pod over it; a broken
profile is refused naming the field.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from apis.quantity import Quantity
from e2e.chart_roles import assert_can, koord_manager_role
from e2e.cluster.__main__ import DEFAULT_DESCRIPTION, apply_description, wait_nodes_ready
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import DEV_LOAD, LocalComponent, koordlet_simulation
from e2e.samples import COLOCATION_FILES, priority_classes, profile_in_force
from e2e.scenarios.test_koordlet import koordlet_kubeconfig
from e2e.scheduler_process import Scheduler
from e2e.workloads import apply, failed_scheduling, get_object, make_pod, pods, wait_for
from koordlet.simulate.model import load_file
from scheduler.simulator import description as desc

DOC = repo_root() / "docs" / "colocation.md"
CHART = repo_root() / "charts" / "koordinator-py"
COLO_POOL = "colo"
NODE = "colo-0"
CONFIG_NAMESPACE, CONFIG = "koordinator-system", "slo-controller-config"
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


def doc_console(command: str) -> str:
    """What the quick start's console blocks print for ``$ command``: the lines up to the next ``$``."""
    for block in re.findall(r"```console\n(.*?)```", quick_start(), re.DOTALL):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line == f"$ {command}":
                output = []
                for rest in lines[i + 1 :]:
                    if rest.startswith("$ "):
                        break
                    output.append(rest)
                return "\n".join(output)
    raise AssertionError(f"the quick start shows no `$ {command}`")


def run_console(cp: ControlPlane, command: str) -> str:
    return cp.kubectl(*shlex.split(command)[1:]).strip()


def run_doc_command(cp: ControlPlane, line: str, files: dict[str, str]) -> None:
    args = shlex.split(line)[1:]
    given = None
    if "-f" in args:
        at = args.index("-f") + 1
        given, args[at] = files[args[at]], "-"
    cp.kubectl(*args, input=given)


def colo_pool() -> desc.NodePool:
    """The dev cluster's co-location pool, as `make up` creates it."""
    return next(p for p in desc.load(DEFAULT_DESCRIPTION).node_pools if p.name == COLO_POOL)


def expected_resources() -> dict[str, int]:
    """algorithms.md 10.2 (usage policy, 60 % / 65 % reclaim) and the v1.6 mid formula (10.3) for
    ``colo-0``: no pod of its own, so everything koordlet reports is system usage and there is no
    Prod pod to reclaim from (ProdReclaimable 0); ``midUnallocatedPercent`` from the page's ConfigMap."""
    pool = colo_pool()
    usage = load_file(DEV_LOAD).for_node(NODE)
    assert usage is not None
    assert not usage.pods
    assert usage.usage is not None
    assert usage.usage.cpu is not None
    assert usage.usage.memory is not None
    config = json.loads(
        yaml.safe_load(doc_files()["slo-controller-config.yaml"])["data"]["colocation-config"]
    )
    mid_percent = config["midUnallocatedPercent"]
    out: dict[str, int] = {}
    capacities = (pool.cpu.milli_value(), pool.memory.value())
    used = (usage.usage.cpu.milli_value(), usage.usage.memory.value())
    for name, cap, use, reclaim in zip(("cpu", "memory"), capacities, used, (60, 65), strict=True):
        margin = cap * (100 - reclaim) // 100
        out[f"kubernetes.io/batch-{name}"] = max(cap - margin - use, 0)
        out[f"kubernetes.io/mid-{name}"] = 0 + (cap - use) * mid_percent // 100
    return out


def _job_pod(cp: ControlPlane, namespace: str, job: str) -> dict[str, Any] | None:
    return next(
        (p for p in pods(cp, namespace) if p["metadata"].get("labels", {}).get("job-name") == job), None
    )


@pytest.fixture(scope="module")
def colocation(control_plane: ControlPlane) -> Iterator[LocalComponent]:
    """Koordinator's PriorityClasses, the dev cluster's ``colo-0`` and koordlet's simulation with
    `make up`'s load file; co-location off until the quick start's ConfigMap."""
    cp = control_plane
    cp.kubectl("apply", "-f", "-", input=priority_classes(cp))
    if cp.read("namespace", CONFIG_NAMESPACE) is None:
        cp.create_namespace(CONFIG_NAMESPACE)
    cp.kubectl("delete", "configmap", CONFIG, "-n", CONFIG_NAMESPACE, "--ignore-not-found")
    apply_description(cp, desc.ClusterDescription(name="colocation", node_pools=[colo_pool()]))
    wait_nodes_ready(cp)
    wait_for(
        lambda: cp.read("nodemetric", NODE) is not None,
        60,
        f"koord-manager's NodeMetric {NODE}",
    )
    koordlet = koordlet_simulation(
        cp,
        DEV_LOAD,
        kubeconfig=koordlet_kubeconfig(cp),
        report_interval_seconds=None,
        name="koordlet-quickstart",
    )
    koordlet.start()
    try:
        yield koordlet
    finally:
        print(koordlet.stop())
        cp.kubectl("delete", "configmap", CONFIG, "-n", CONFIG_NAMESPACE, "--ignore-not-found")
        cp.kubectl("delete", "clustercolocationprofile", "batch-workload-profile", "--ignore-not-found")
        for namespace in (NAMESPACE, PLAIN, QUOTA_NS):
            cp.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
        cp.kubectl("delete", "node", NODE, "--ignore-not-found")


def _allocatable(cp: ControlPlane) -> dict[str, str]:
    allocatable: dict[str, str] = get_object(cp, "node", NODE)["status"]["allocatable"]
    return allocatable


def _wait_printed_allocatable(cp: ControlPlane) -> dict[str, str]:
    """Wait until ``colo-0``'s allocatable is what the page prints; return it."""
    command = "kubectl get node colo-0 -o jsonpath='{.status.allocatable}'"
    printed: dict[str, str] = json.loads(doc_console(command))
    last: list[str] = []

    def matches() -> bool:
        last[:] = [run_console(cp, command)]
        return bool(json.loads(last[0]) == printed)

    try:
        wait_for(matches, 60, "koord-manager's batch and mid resources on colo-0")
    except AssertionError:
        raise AssertionError(f"the page prints {printed}, the node has {last}") from None
    return printed


@pytest.fixture(scope="module")
def colocation_enabled(colocation: LocalComponent, control_plane: ControlPlane) -> ControlPlane:
    """The quick start's ConfigMap applied and koord-manager's resources on colo-0."""
    cp = control_plane
    run_doc_command(cp, "kubectl apply -f slo-controller-config.yaml", doc_files())
    _wait_printed_allocatable(cp)
    return cp


@pytest.fixture(scope="module")
def quick_start_profile(control_plane: ControlPlane, colocation: LocalComponent) -> ControlPlane:
    """Quick start steps 2 and 3, as written: the namespace, its label, the profile; returns once
    koord-manager applies the profile."""
    cp = control_plane
    for line in doc_commands()[:3]:
        run_doc_command(cp, line, doc_files())
    cp.wait_service_account(NAMESPACE)
    wait_for(lambda: profile_in_force(cp, NAMESPACE), 30, "koord-manager to apply the new profile")
    return cp


def test_the_quick_start_files_are_what_make_up_applies() -> None:
    files = doc_files()
    assert set(files) == {
        "batch-colocation-profile.yaml",
        "batch-job.yaml",
        "slo-controller-config.yaml",
        "manual-batch-job.yaml",
    }
    for path in COLOCATION_FILES:
        if path.name in files:
            assert path.read_text() == files[path.name], path
    namespace = yaml.safe_load(COLOCATION_FILES[0].read_text())
    assert doc_commands()[:2] == [
        f"kubectl create namespace {namespace['metadata']['name']}",
        "kubectl label namespace {} {}={}".format(
            namespace["metadata"]["name"], *next(iter(namespace["metadata"]["labels"].items()))
        ),
    ]
    # the load file the page shows is make up's, comments aside
    shown = re.search(
        r"The load file, `e2e/clusters/dev-load.yaml`.*?```yaml\n(.*?)```", quick_start(), re.DOTALL
    )
    assert shown is not None
    assert yaml.safe_load(shown.group(1)) == yaml.safe_load(DEV_LOAD.read_text())


def test_the_quick_start_makes_the_job_a_batch_pod_bound_on_batch_resources(
    quick_start_profile: ControlPlane, colocation: LocalComponent, scheduler: Scheduler
) -> None:
    cp = quick_start_profile
    files = doc_files()
    commands = doc_commands()
    assert len(commands) == 6, commands
    # The page starts from a fresh cluster: complaints earlier modules provoked on purpose (a bad
    # colocation-config) are not this walk-through's.
    complaints = (
        "kubectl get events -n koordinator-system --field-selector involvedObject.name=slo-controller-config"
    )
    selector = "--field-selector=involvedObject.name=slo-controller-config"
    cp.run_kubectl("delete", "events", "-n", "koordinator-system", selector)
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

    # Step 6: co-location is off, so no node has batch resources yet and the pod waits.
    name = pod["metadata"]["name"]
    wait_for(
        lambda: any(BATCH_CPU in m for m in failed_scheduling(cp, NAMESPACE, name)),
        60,
        "the batch pod Pending on batch-cpu before co-location is on",
    )
    assert BATCH_CPU not in _allocatable(cp)
    assert not get_object(cp, "pod", name, namespace=NAMESPACE)["spec"].get("nodeName")
    # koordlet reports what the page shows.
    usage = "kubectl get nodemetric colo-0 -o jsonpath='{.status.nodeMetric.nodeUsage}'"
    shown_usage = json.loads(doc_console(usage))
    wait_for(
        lambda: json.loads(run_console(cp, usage) or "{}") == shown_usage,
        60,
        f"koordlet's report of {NODE}: {shown_usage}",
    )

    # The ConfigMap: koord-manager writes the resources the page prints, which are the formulas'.
    run_doc_command(cp, commands[4], files)
    printed = _wait_printed_allocatable(cp)
    computed = {k: Quantity.parse(v).value() for k, v in printed.items() if "batch-" in k or "mid-" in k}
    assert computed == expected_resources()
    assert computed[BATCH_CPU] == 11200  # 32000 - 12800 - 8000, as the page spells it out

    # ... and koord-scheduler binds the pod there, the only node with batch resources.
    node = wait_for(
        lambda: get_object(cp, "pod", name, namespace=NAMESPACE)["spec"].get("nodeName"),
        60,
        "the batch pod bound",
    )
    assert node == NODE
    shown = doc_console("kubectl get pod -n batch-demo -l app-type=batch -o wide").splitlines()
    assert shown[1].split()[6] == node
    # Watching it: the NodeSLO, the Scheduled event, no complaint about the ConfigMap.
    nodeslo = run_console(cp, "kubectl get nodeslo colo-0").splitlines()
    assert nodeslo[1].split()[0] == doc_console("kubectl get nodeslo colo-0").splitlines()[1].split()[0]
    scheduled = "kubectl get events -n batch-demo --field-selector reason=Scheduled"
    assert f"Successfully assigned {NAMESPACE}/{name} to {NODE}" in run_console(cp, scheduled)
    assert "No resources found" in doc_console(complaints)
    assert "InvalidColocationConfig" not in run_console(cp, complaints)

    # Step 7: a pod asking for batch resources itself is left as written, and bound too.
    run_doc_command(cp, commands[5], files)
    manual = wait_for(lambda: _job_pod(cp, NAMESPACE, "manual-batch-job"), 60, "the manual Job's pod")
    assert "koordinator.sh/mutated" not in manual["metadata"]["labels"]
    assert SPEC_KEY not in (manual["metadata"].get("annotations") or {})
    assert set(manual["spec"]["containers"][0]["resources"]["requests"]) == {BATCH_CPU, BATCH_MEMORY}
    manual_name = manual["metadata"]["name"]
    bound = wait_for(
        lambda: get_object(cp, "pod", manual_name, namespace=NAMESPACE)["spec"].get("nodeName"),
        60,
        "the manual pod bound",
    )
    assert bound == NODE


def _mutating_webhook(cp: ControlPlane) -> dict[str, Any]:
    configs = get_object(cp, "mutatingwebhookconfigurations")["items"]
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
    quick_start_profile: ControlPlane, colocation_enabled: ControlPlane, scheduler: Scheduler
) -> None:
    cp = quick_start_profile
    assert "here 128Gi of batch-memory, with colo-0 the only node that has any, 80Gi" in quick_start()
    big = make_pod("big-batch", NAMESPACE)
    batch = {BATCH_CPU: "1000", BATCH_MEMORY: "128Gi"}
    big["spec"]["containers"][0]["resources"] = {"requests": batch, "limits": batch}
    apply(cp, [big])
    message = wait_for(
        lambda: next((m for m in failed_scheduling(cp, NAMESPACE, "big-batch") if BATCH_MEMORY in m), None),
        60,
        "FailedScheduling naming batch-memory",
    )
    assert f"Insufficient {BATCH_MEMORY}" in message, message
    assert not get_object(cp, "pod", "big-batch", namespace=NAMESPACE)["spec"].get("nodeName")


def test_an_elastic_quota_with_a_batch_cpu_max_refuses_a_pod_over_it(
    colocation_enabled: ControlPlane, scheduler: Scheduler
) -> None:
    cp = colocation_enabled
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
    try:
        wait_for(
            lambda: get_object(cp, "pod", "first", namespace=QUOTA_NS)["spec"].get("nodeName"),
            60,
            "first bound",
        )
    except AssertionError as exc:  # say why, from the scheduler and from the node
        colo = get_object(cp, "node", NODE)["status"]["allocatable"]
        quotas = cp.kubectl("get", "eq,elasticquotaprofiles", "-A", "-o", "yaml")
        raise AssertionError(
            f"{exc}; koord-scheduler: {scheduler.explanation(QUOTA_NS, 'first')}; {NODE} allocatable: {colo}"
            f"\nquotas and profiles:\n{quotas}"
        ) from exc
    apply(cp, [batch_pod("second")])
    message = wait_for(
        lambda: next(
            (m for m in failed_scheduling(cp, QUOTA_NS, "second") if "Insufficient quotas" in m), None
        ),
        60,
        "FailedScheduling naming the quota",
    )
    assert f"Insufficient quotas: quota {QUOTA_NS} {BATCH_CPU} used 2k + request 2k > " in message, message
    assert not get_object(cp, "pod", "second", namespace=QUOTA_NS)["spec"].get("nodeName")


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
    with koord_manager_role(cp, "ccp-rbac") as user:
        calls = [
            ("list", "clustercolocationprofiles.config.koordinator.sh"),
            ("watch", "clustercolocationprofiles.config.koordinator.sh"),
            ("list", "namespaces"),
            ("watch", "namespaces"),
            ("get", "namespaces"),
            ("get", "priorityclasses.scheduling.k8s.io"),
            ("create", "events"),
        ]
        assert_can(cp, user, ((verb, resource, ()) for verb, resource in calls))
