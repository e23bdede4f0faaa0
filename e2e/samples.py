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
import subprocess
import sys
import time
from pathlib import Path

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


def priority_classes(cp: ControlPlane) -> str:
    """The chart's koord-prod/mid/batch/free PriorityClasses (quick start step 1)."""
    return subprocess.run(
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


def profile_in_force(cp: ControlPlane, namespace: str = "batch-demo") -> bool:
    """koord-manager's profile index has a profile selecting ``app-type: batch`` pods of the
    namespace: a server-side dry run of such a pod comes back mutated."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "probe-", "namespace": namespace, "labels": {"app-type": "batch"}},
        "spec": {"containers": [{"name": "probe", "image": "busybox"}]},
    }
    result = cp.run_kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe))
    return (
        result.returncode == 0
        and "koordinator.sh/qosClass" in json.loads(result.stdout)["metadata"]["labels"]
    )


def apply_colocation(cp: ControlPlane, timeout: float = 60.0) -> None:
    cp.kubectl("apply", "-f", "-", input=priority_classes(cp))
    if cp.run_kubectl("get", "namespace", "koordinator-system").returncode != 0:
        cp.create_namespace("koordinator-system")
    *objects, job = COLOCATION_FILES
    for path in objects:
        cp.apply_file(path)
    cp.wait_service_account("batch-demo")
    deadline = time.monotonic() + timeout
    while not profile_in_force(cp):
        if time.monotonic() > deadline:
            raise TimeoutError(f"koord-manager did not apply the ClusterColocationProfile in {timeout}s")
        time.sleep(0.5)
    cp.apply_file(job)


def apply(cp: ControlPlane) -> None:
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

The examples from the release notes (docs/examples/) are applied too; the features they use that
are not built yet are listed in docs/features.md. Logs: .cluster/koord-py/*.log.
`make down` stops everything.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.samples", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="next-steps", choices=["apply", "next-steps"])
    parser.add_argument("--cluster", default="koord-py")
    args = parser.parse_args(argv)
    if args.command == "apply":
        apply(ControlPlane(name=args.cluster))
        return 0
    print(NEXT_STEPS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
