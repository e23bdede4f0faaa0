"""``python -m e2e.realnode up [--chart]|down|status [--cluster NAME]``: the real node of a local cluster.

``up`` checks the host (and stops at once with what is missing), starts the cluster in its
real-node flavour when it is not running (``python -m e2e.cluster up --real-node``), then
containerd, kubelet and kube-proxy. ``down`` stops the node and takes back what it created on the
host; ``status`` says whether the node is Ready and lists what of it is on the host. ``up --chart``
(``make up-real``) also builds our image, imports it into the node and ``helm install``s the chart
with every component on the real node.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from e2e.cluster.__main__ import DEFAULT_DESCRIPTION
from e2e.cluster.__main__ import up as cluster_up
from e2e.cluster.controlplane import ControlPlane
from e2e.realnode import preflight
from e2e.realnode.chart import install_chart
from e2e.realnode.config import config_for
from e2e.realnode.node import node_ready, progress, start
from e2e.realnode.teardown import leftovers, stop

NEXT_STEPS = """
koordinator-py runs on the real node {node}, from our image (docs/real-node.md).

  export KUBECONFIG={kubeconfig}
  kubectl get pods -n koordinator-system -o wide        # every component, Running on {node}
  kubectl get nodemetric {node} -o yaml                 # koordlet's report of the real node and its pods
  kubectl apply -f docs/examples/real-node/burn.yaml    # a koord-scheduler Deployment that burns half a CPU
  kubectl get nodemetric {node} -o jsonpath='{{.status.podsMetric}}'   # ... about half a CPU within a minute
  make down                                             # stops it all and takes back what it put on the host
"""


def _is_real_node_flavour(cp: ControlPlane) -> bool:
    config = cp.state_dir / "kwokctl.yaml"
    return config.exists() and "advertise-address" in config.read_text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.realnode", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--cluster", default="koord-py")
    parser.add_argument("--chart", action="store_true", help="up: also install the chart from our image")
    parser.add_argument(
        "-f",
        "--description",
        type=Path,
        default=DEFAULT_DESCRIPTION,
        help="up: the cluster description of the KWOK nodes beside the real one",
    )
    args = parser.parse_args(argv)
    cp = ControlPlane(name=args.cluster, real_node=True)
    c = config_for(cp)

    if args.command == "up":
        try:
            preflight.check(c)
        except preflight.PreflightError as err:
            print(f"[realnode] {err}", file=sys.stderr)
            return 2
        if not cp.is_running():
            cluster_up(
                cp.name,
                args.description,
                default_kubeconfig=cp.name == "koord-py",
                real_node=True,
                for_chart=args.chart,
            )
        elif not _is_real_node_flavour(cp):
            print(
                f"[realnode] cluster {cp.name} runs without the real-node flavour (its API server is not "
                "reachable from pods): `make down`, then `python -m e2e.realnode up`",
                file=sys.stderr,
            )
            return 2
        start(cp, c)
        progress(f"pod-resources socket: {c.pod_resources_socket}; NRI socket: {c.nri_socket}")
        if args.chart:
            install_chart(cp, c)
            print(NEXT_STEPS.format(kubeconfig=cp.kubeconfig, node=c.node_name, label=c.node_label))
        return 0
    if args.command == "down":
        for line in stop(c):
            progress(line)
        left = leftovers(c)
        for line in left:
            progress(f"left over: {line}")
        progress(f"real node of {cp.name} stopped" if not left else f"{len(left)} things left over")
        return 0 if not left else 1
    ready = cp.is_running() and node_ready(cp, c.node_name)
    print(f"node {c.node_name} of cluster {cp.name}: {'Ready' if ready else 'not ready'}")
    kinds: dict[str, int] = {}
    for line in leftovers(c):
        kind = line.split(" ", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    if kinds:
        print("  on the host: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())))
    print(f"  pod-resources socket: {c.pod_resources_socket}\n  NRI socket: {c.nri_socket}")
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
