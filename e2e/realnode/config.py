"""Where the real node of one cluster keeps its state, and the names it uses on the host.

Everything the node writes lives under ``.cluster/<cluster>/realnode/``; what cannot (the bridge,
the cgroup subtree, iptables chains) carries a name derived from fixed prefixes that ``leftovers``
looks for. One real node runs on a host at a time: the bridge, the pod subnet and kubelet's ports
are host-wide (``preflight`` refuses a second one).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from e2e.cluster.controlplane import ControlPlane

__all__ = ["HOST_OWNER", "PAUSE_IMAGE", "RealNodeConfig", "config_for"]

HOST_OWNER = Path("/run/koordinator-py-real-node.owner")
"""The state dir of the real node that holds this host's shared pieces (the bridge, kube-proxy's
and kubelet's iptables chains): written by ``start``, removed by that node's ``stop``."""

PAUSE_IMAGE = "localhost/pause:3.10"
"""The sandbox image containerd's CRI uses (built and imported locally: nothing is pulled)."""


class RealNodeConfig(BaseModel):
    """The paths and host-wide names of one cluster's real node."""

    model_config = ConfigDict(frozen=True)

    cluster: str
    repo: Path
    node_name: str = "real-node-0"
    node_label: str = "koordinator-py/real-node"
    bridge: str = "cni-koord0"
    pod_subnet: str = "10.244.0.0/24"
    pod_gateway: str = "10.244.0.1"
    cni_network: str = "koord-real-node"
    kubelet_port: int = 10250
    kubelet_healthz_port: int = 10248

    @property
    def state_dir(self) -> Path:
        return self.repo / ".cluster" / self.cluster / "realnode"

    @property
    def bin_dir(self) -> Path:
        return self.repo / ".bin"

    @property
    def kubeconfig(self) -> Path:
        """The cluster's admin kubeconfig (kwokctl writes it); kubelet and kube-proxy use it."""
        return self.repo / ".cluster" / self.cluster / "kubeconfig"

    # containerd
    @property
    def containerd_dir(self) -> Path:
        return self.state_dir / "containerd"

    @property
    def containerd_config(self) -> Path:
        return self.state_dir / "containerd.toml"

    @property
    def containerd_socket(self) -> Path:
        return self.state_dir / "containerd.sock"

    @property
    def nri_socket(self) -> Path:
        """NRI plugins (koordlet's) connect here; in a directory of its own, which the chart mounts
        into koordlet's container."""
        return self.state_dir / "nri" / "nri.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.state_dir / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.state_dir / "cni" / "ipam"

    # kubelet
    @property
    def kubelet_root(self) -> Path:
        """kubelet's ``--root-dir``: pods, plugins, checkpoints, ``pod-resources/kubelet.sock``."""
        return self.state_dir / "kubelet"

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    @property
    def pod_resources_proxy_dir(self) -> Path:
        """Where the chart's koordlet serves its PodResources proxy, ``kubelet.sock``."""
        return self.state_dir / "koordlet" / "pod-resources"

    @property
    def pod_logs_dir(self) -> Path:
        return self.state_dir / "pod-logs"

    @property
    def kubelet_config(self) -> Path:
        """The KubeletConfiguration, in kubelet's root dir as kubeadm writes it
        (``/var/lib/kubelet/config.yaml``): where the chart's koordlet reads it."""
        return self.kubelet_root / "config.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.state_dir / "kube-proxy.yaml"

    @property
    def images_dir(self) -> Path:
        return self.state_dir / "images"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def cgroup_root(self) -> str:
        """kubelet's ``cgroupRoot``: kubepods and every pod cgroup live below it, in each hierarchy
        (one per cluster, so that stopping one cluster's node never touches another's pods)."""
        return f"/koordpy-{self.cluster}"

    def pid_file(self, component: str) -> Path:
        return self.state_dir / f"{component}.pid"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name


def config_for(cp: ControlPlane) -> RealNodeConfig:
    return RealNodeConfig(cluster=cp.name, repo=cp.root)
