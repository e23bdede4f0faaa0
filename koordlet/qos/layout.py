"""Where kubelet's QoS and pod cgroups are, for the cgroupfs and systemd drivers.

The driver is the one whose ``kubepods`` directory exists under the hierarchy (cgroupfs when
neither does). Paths are relative to a hierarchy root, as :class:`CgroupWriter` takes them.
A container's cgroup is named after its runtime ID: ``<pod>/<id>`` with cgroupfs,
``<pod>/cri-containerd-<id>.scope`` with systemd (``docker-``, ``crio-`` for those runtimes).
"""

from __future__ import annotations

from typing import Literal

from koordlet.fs import HostFS

__all__ = ["CgroupLayout", "KubeQOS", "kube_qos_of"]

_SYSTEMD_SCOPE_PREFIX = {"containerd": "cri-containerd", "docker": "docker", "cri-o": "crio"}

KubeQOS = Literal["Guaranteed", "Burstable", "BestEffort"]
Driver = Literal["cgroupfs", "systemd"]

_QOS_DIRS: dict[Driver, dict[KubeQOS, str]] = {
    "cgroupfs": {
        "Guaranteed": "kubepods",
        "Burstable": "kubepods/burstable",
        "BestEffort": "kubepods/besteffort",
    },
    "systemd": {
        "Guaranteed": "kubepods.slice",
        "Burstable": "kubepods.slice/kubepods-burstable.slice",
        "BestEffort": "kubepods.slice/kubepods-besteffort.slice",
    },
}


def kube_qos_of(status_qos: str | None) -> KubeQOS:
    """``status.qosClass`` as kubelet reports it (Burstable when missing or unknown)."""
    if status_qos in ("Guaranteed", "BestEffort"):
        return status_qos  # type: ignore[return-value]
    return "Burstable"


class CgroupLayout:
    def __init__(self, driver: Driver, cgroup_root: str = "/") -> None:
        self.driver = driver
        self.base = cgroup_root.strip("/")

    @classmethod
    def detect(cls, fs: HostFS, hierarchy: str, cgroup_root: str = "/") -> CgroupLayout:
        """The driver whose kubepods dir exists under ``hierarchy`` (a path under the host root)."""
        base = cgroup_root.strip("/")
        systemd = "/".join(part for part in (hierarchy.strip("/"), base, "kubepods.slice") if part)
        return cls("systemd" if fs.is_dir(systemd) else "cgroupfs", cgroup_root)

    def _join(self, *parts: str) -> str:
        return "/".join(part for part in (self.base, *parts) if part)

    def qos_dir(self, qos: KubeQOS) -> str:
        return self._join(_QOS_DIRS[self.driver][qos])

    def pod_dir(self, qos: KubeQOS, uid: str) -> str:
        if self.driver == "cgroupfs":
            return f"{self.qos_dir(qos)}/pod{uid}"
        prefix = {
            "Guaranteed": "kubepods",
            "Burstable": "kubepods-burstable",
            "BestEffort": "kubepods-besteffort",
        }[qos]
        return f"{self.qos_dir(qos)}/{prefix}-pod{uid.replace('-', '_')}.slice"

    def container_dir(self, pod_dir: str, container_id: str) -> str | None:
        """The cgroup of the container whose status says ``<runtime>://<id>``; None for an ID of
        another form or, with systemd, of a runtime whose scope name is not known."""
        runtime, sep, bare = container_id.partition("://")
        if not sep or not bare:
            return None
        if self.driver == "cgroupfs":
            return f"{pod_dir}/{bare}"
        prefix = _SYSTEMD_SCOPE_PREFIX.get(runtime)
        return f"{pod_dir}/{prefix}-{bare}.scope" if prefix else None
