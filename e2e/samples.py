"""``python -m e2e.samples apply|next-steps [--cluster NAME]``: what `make up` puts on the local cluster
and prints.

``apply`` applies every example in ``docs/examples/`` (the release notes' YAML) except the
scheduler configuration snippets under ``config/``, which are not API objects, the sample workload,
and the co-location quick start's objects (``docs/examples/colocation/``, the same YAML as
docs/colocation.md "Quick start"): Koordinator's PriorityClasses from the chart, the ``batch-demo``
namespace, the ClusterColocationProfile, the ``slo-controller-config`` ConfigMap that enables
co-location and the batch Job the profile turns into a batch pod.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e import example_report
from e2e.cluster.controlplane import ControlPlane, repo_root

EXAMPLES = repo_root() / "docs" / "examples"
CHART = repo_root() / "charts" / "koordinator-py"
COLOCATION = EXAMPLES / "colocation"
# In the order of the quick start: the Job last, once koord-manager applies the profile.
COLOCATION_FILES = tuple(
    COLOCATION / name
    for name in (
        "namespace.yaml",
        "batch-colocation-profile.yaml",
        "slo-controller-config.yaml",
        "batch-job.yaml",
    )
)


def example_files() -> list[Path]:
    """Every example of the release notes (docs/examples/v*/; not config/ or simulate/), in order."""
    return sorted(EXAMPLES.glob("v*/*.yaml"))


SAMPLE_WORKLOAD = EXAMPLES / "simulate" / "workload.yaml"
DEMO_PROFILE = EXAMPLES / "demo" / "koord-scheduler-profile.yaml"
"""Sends the pods of ``default`` that name no scheduler to koord-scheduler, as Koordinator users do
with a ClusterColocationProfile: most release-note examples leave ``schedulerName`` unset."""


def priority_classes(cp: ControlPlane) -> str:
    """The chart's koord-prod/mid/batch/free PriorityClasses (quick start step 1)."""
    return cp.helm("template", "koordinator-py", str(CHART), "--show-only", "templates/priorityclasses.yaml")


def admitted_as(cp: ControlPlane, namespace: str, labels: dict[str, str]) -> dict[str, Any] | None:
    """A pod with ``labels`` in ``namespace`` as admission would store it (a server-side dry run:
    koord-manager's profiles applied), or None if the API server refused it."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "probe-", "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "probe", "image": "busybox"}]},
    }
    result = cp.run_kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe))
    if result.returncode != 0:
        return None
    pod: dict[str, Any] = json.loads(result.stdout)
    return pod


def profile_in_force(cp: ControlPlane, namespace: str = "batch-demo") -> bool:
    """koord-manager's profile index has a profile selecting ``app-type: batch`` pods of the
    namespace: a server-side dry run of such a pod comes back mutated."""
    pod = admitted_as(cp, namespace, {"app-type": "batch"})
    return pod is not None and "koordinator.sh/qosClass" in pod["metadata"]["labels"]


def demo_profile_in_force(cp: ControlPlane) -> bool:
    """A pod of ``default`` with no schedulerName is admitted with koord-scheduler's."""
    pod = admitted_as(cp, "default", {})
    return pod is not None and pod["spec"].get("schedulerName") == "koord-scheduler"


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} in {timeout}s")
        time.sleep(0.5)


def apply_colocation(cp: ControlPlane, timeout: float = 60.0) -> None:
    cp.kubectl("apply", "-f", "-", input=priority_classes(cp))
    if cp.read("namespace", "koordinator-system") is None:
        cp.create_namespace("koordinator-system")
    *objects, job = COLOCATION_FILES
    for path in objects:
        cp.apply_file(path)
    cp.wait_service_account("batch-demo")
    wait_until(
        lambda: profile_in_force(cp), timeout, "koord-manager did not apply the ClusterColocationProfile"
    )
    cp.apply_file(job)


def apply(cp: ControlPlane, timeout: float = 60.0) -> None:
    cp.apply_file(DEMO_PROFILE)
    wait_until(
        lambda: demo_profile_in_force(cp),
        timeout,
        f"koord-manager did not apply {DEMO_PROFILE.relative_to(repo_root())}",
    )
    print(f"[samples] applied {DEMO_PROFILE.relative_to(repo_root())}", file=sys.stderr)
    files = [*example_files(), SAMPLE_WORKLOAD]
    for i, path in enumerate(files, 1):
        cp.apply_file(path)
        print(f"[samples] {i}/{len(files)} applied {path.relative_to(repo_root())}", file=sys.stderr)
    apply_colocation(cp)
    print(
        f"[samples] applied the co-location quick start ({COLOCATION.relative_to(repo_root())}/)",
        file=sys.stderr,
    )


NEXT_STEPS = """
koordinator-py's local cluster is up: kube-apiserver, etcd, KWOK nodes, koord-manager (admission
webhooks, quota trees, batch and mid node resources, NodeSLOs), koord-scheduler (binding pods whose
schedulerName is koord-scheduler, with network-topology-aware gangs, job-level preemption and
elastic quota on) and koordlet in simulation mode (node usage from e2e/clusters/dev-load.yaml).

  export KUBECONFIG=$PWD/.cluster/kubeconfig PATH=$PWD/.bin:$PWD/.venv/bin:$PATH
  kubectl get nodes -L network.topology.nvidia.com/spine,network.topology.nvidia.com/block
  kubectl get pods -o wide                       # the sample Deployment `web` and Job `train`, bound
  kubectl get events --field-selector reason=FailedScheduling
  koordctl explain pod hp-worker-1               # why a pod is where it is
  kubectl get pg,eq,reservations,devices -A      # eq: MIN, MAX, USED, RUNTIME of every quota
  kubectl get events -A --field-selector reason=Preempted   # job-level preemption's victims
  curl -s localhost:10251/metrics | grep scheduler_schedule_attempts_total

Co-location (docs/colocation.md, "Quick start"):

  kubectl get node colo-0 -o jsonpath='{.status.allocatable}'   # batch-* and mid-* from koord-manager
  kubectl get nodemetric colo-0 -o jsonpath='{.status.nodeMetric.nodeUsage}'   # what koordlet reports
  kubectl get nodeslo                            # one per node, rendered from slo-controller-config
  kubectl get pod -n batch-demo -o wide --show-labels   # the Job's pod: a koord-batch BE pod on colo-0

The release notes' examples (docs/examples/v*/) are applied too; the pods of `default` that name
no scheduler reach koord-scheduler through docs/examples/demo/koord-scheduler-profile.yaml, as
Koordinator users do it. Logs: .cluster/koord-py/*.log. `make down` stops everything.
"""

SCHEDULER_URL = "http://127.0.0.1:10251"
"""koord-scheduler as `make up` runs it (e2e.components): its /debug explanations."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.samples", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="next-steps", choices=["apply", "next-steps"])
    parser.add_argument("--cluster", default="koord-py")
    args = parser.parse_args(argv)
    if args.command == "apply":
        apply(ControlPlane(name=args.cluster))
        return 0
    print(NEXT_STEPS)
    cp = ControlPlane(name=args.cluster)
    print("What each example shows (docs/examples/, pods as they stand now):\n")
    print(example_report.render(example_report.example_states(cp, example_files(), SCHEDULER_URL)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
