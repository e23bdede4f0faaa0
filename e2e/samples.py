"""``python -m e2e.samples apply|next-steps``: what `make up` puts on the local cluster and prints.

``apply`` applies every example in ``docs/examples/`` (the release notes' YAML) except the
scheduler configuration snippets under ``config/``, which are not API objects.
"""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.cluster.controlplane import ControlPlane, repo_root

EXAMPLES = repo_root() / "docs" / "examples"


def example_files() -> list[Path]:
    """Every example of the release notes (docs/examples/v*/; not config/ or simulate/), in order."""
    return sorted(EXAMPLES.glob("v*/*.yaml"))


SAMPLE_WORKLOAD = EXAMPLES / "simulate" / "workload.yaml"


def apply(cp: ControlPlane) -> None:
    files = [*example_files(), SAMPLE_WORKLOAD]
    for i, path in enumerate(files, 1):
        cp.apply_file(path)
        print(f"[samples] {i}/{len(files)} applied {path.relative_to(repo_root())}", file=sys.stderr)


NEXT_STEPS = """
koordinator-py's local cluster is up: kube-apiserver, etcd, KWOK nodes, koord-manager (admission
webhooks, quota trees) and koord-scheduler (binding pods whose schedulerName is koord-scheduler,
with network-topology-aware gangs, job-level preemption and elastic quota on).

  export KUBECONFIG=$PWD/.cluster/kubeconfig PATH=$PWD/.bin:$PWD/.venv/bin:$PATH
  kubectl get nodes -L network.topology.nvidia.com/spine,network.topology.nvidia.com/block
  kubectl get pods -o wide                       # the sample Deployment `web` and Job `train`, bound
  kubectl get events --field-selector reason=FailedScheduling
  koordctl explain pod hp-worker-1               # why a pod is where it is
  kubectl get pg,eq,reservations,devices -A      # eq: MIN, MAX, USED, RUNTIME of every quota
  kubectl get events -A --field-selector reason=Preempted   # job-level preemption's victims
  curl -s localhost:10251/metrics | grep scheduler_schedule_attempts_total

The examples from the release notes (docs/examples/) are applied too; the features they use that
are not built yet are listed in docs/features.md. Logs: .cluster/koord-py/*.log.
`make down` stops everything.
"""


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    command = args[0] if args else "next-steps"
    if command == "apply":
        apply(ControlPlane())
        return 0
    if command == "next-steps":
        print(NEXT_STEPS)
        return 0
    print(f"unknown command {command!r}: use apply or next-steps", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
