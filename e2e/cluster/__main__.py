"""``python -m e2e.cluster up|down|status``: the local control plane behind `make cluster` / `make down`.

``up`` starts kube-apiserver, etcd, kube-controller-manager and KWOK, installs the CRDs from
``crds/`` (and Kopf's peering CRD, for koord-manager) and creates the fake nodes (and their Device
objects) of a cluster description.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import yaml

from e2e.cluster.controlplane import ControlPlane, KubectlError, repo_root
from scheduler.simulator import description as desc

DEFAULT_DESCRIPTION = repo_root() / "e2e" / "clusters" / "dev.yaml"
# Kopf's ClusterKopfPeering CRD, which koord-manager's peering needs (plain YAML in the chart).
PEERING_CRD = repo_root() / "charts" / "koordinator-py" / "templates" / "manager-peering-crd.yaml"


def install_crds(cp: ControlPlane, *, peering: bool = True) -> None:
    """Our CRDs and, unless the chart will own it (``peering=False``), Kopf's peering CRD: the
    chart renders that one as a template, which helm refuses to adopt."""
    crds = ("-f", str(repo_root() / "crds"), *(("-f", str(PEERING_CRD)) if peering else ()))
    cp.kubectl("apply", "--server-side", "--force-conflicts", *crds)
    for attempt in range(5):  # kubectl wait fails, not waits, on a CRD whose status is not written yet
        try:
            cp.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
            break
        except KubectlError:
            if attempt == 4:
                raise
            time.sleep(0.5)


def apply_description(cp: ControlPlane, cluster: desc.ClusterDescription) -> None:
    nodes = cluster.nodes()
    if nodes:
        _apply_objects(cp, nodes, "nodes")
    devices = cluster.devices()
    if devices:
        _apply_objects(cp, devices, "devices")


NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def wait_nodes_ready(cp: ControlPlane, timeout: float = 180.0) -> None:
    """Wait until kube-controller-manager has lifted the not-ready taints it puts on every new node
    (it does so once KWOK reports the node Ready, a few nodes per second)."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = cp.get_json("/api/v1/nodes")["items"]
        tainted = [
            n["metadata"]["name"]
            for n in nodes
            if any(t["key"] in NOT_READY_TAINTS for t in n.get("spec", {}).get("taints") or ())
        ]
        if not tainted:
            print(f"[cluster] {len(nodes)} nodes ready", file=sys.stderr)
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(tainted)} nodes still not ready after {timeout}s: {tainted[:5]}")
        time.sleep(1.0)


def _apply_objects(cp: ControlPlane, objects: list[dict[str, object]], what: str) -> None:
    batch = 200
    for start in range(0, len(objects), batch):
        chunk = objects[start : start + batch]
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(chunk))
        print(f"[cluster] {what}: {min(start + batch, len(objects))}/{len(objects)}", file=sys.stderr)


def up(
    name: str,
    description_path: Path,
    default_kubeconfig: bool,
    *,
    real_node: bool = False,
    for_chart: bool = False,
) -> ControlPlane:
    """Start the cluster with the CRDs and the described nodes (and their Devices); ``for_chart``
    leaves out what the chart installs as a template (Kopf's peering CRD)."""
    cluster = desc.load(description_path)
    cp = ControlPlane(name=name, real_node=real_node)
    cp.start()
    install_crds(cp, peering=not for_chart)
    apply_description(cp, cluster)
    wait_nodes_ready(cp)
    cp.wait_service_account("default")
    if default_kubeconfig:
        shutil.copyfile(cp.kubeconfig, repo_root() / ".cluster" / "kubeconfig")
    return cp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the cluster, install CRDs, create the described nodes")
    p_up.add_argument("--name", default="koord-py")
    p_up.add_argument("-f", "--description", type=Path, default=DEFAULT_DESCRIPTION)
    p_up.add_argument(
        "--real-node",
        action="store_true",
        help="the flavour a real node can join (python -m e2e.realnode up)",
    )
    p_down = sub.add_parser("down", help="stop the cluster and every process it started")
    p_down.add_argument("--name", default="koord-py")
    p_down.add_argument("--all", action="store_true", help="every cluster under .cluster/")
    p_status = sub.add_parser("status", help="say whether the cluster answers")
    p_status.add_argument("--name", default="koord-py")
    args = parser.parse_args(argv)

    if args.command == "up":
        cp = up(
            args.name, args.description, default_kubeconfig=args.name == "koord-py", real_node=args.real_node
        )
        print(f"[cluster] kubeconfig: {cp.kubeconfig}", file=sys.stderr)
        return 0
    if args.command == "down":
        names = [args.name]
        if args.all:
            state = repo_root() / ".cluster"
            # A cluster's directory holds its kwokctl.yaml; reports/ and images/ are no clusters.
            found = state.iterdir() if state.exists() else iter(())
            names = sorted(p.name for p in found if (p / "kwokctl.yaml").exists())
        for name in names:
            ControlPlane(name=name).stop()
        if "koord-py" in names:  # only `make cluster`'s cluster writes the default kubeconfig
            (repo_root() / ".cluster" / "kubeconfig").unlink(missing_ok=True)
        return 0
    cp = ControlPlane(name=args.name)
    running = cp.is_running()
    print(f"cluster {args.name}: {'running' if running else 'not running'}")
    return 0 if running else 1


if __name__ == "__main__":
    sys.exit(main())
