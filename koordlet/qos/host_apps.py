"""Host applications (NodeSLO ``hostApplications``): processes outside pods whose cgroup koordlet
manages like a pod of the application's QoS class.

The cgroup is ``<base>/<parentDir>/<relativePath>``; ``base`` is ``CgroupRoot`` (kubelet's cgroup
root, the default), ``Kubepods``, ``KubepodsBurstable`` or ``KubepodsBesteffort``. Without a
``cgroupPath`` the parent is ``host-latency-sensitive`` for LS applications and ``host-best-effort``
for BE ones, and the relative path the application's name (Koordinator's ``GetHostAppCgroupPath``).
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.slo.nodeslo import HostApplicationSpec
from koordlet.qos.layout import CgroupLayout

__all__ = ["HostApp", "host_app"]

_PARENT_BY_QOS = {"LS": "host-latency-sensitive", "BE": "host-best-effort"}


@dataclass(frozen=True)
class HostApp:
    name: str
    qos: str
    path: str
    in_besteffort: bool
    """Its cgroup lies under the kube besteffort dir (only then does it count as BE for suppression)."""


def host_app(spec: HostApplicationSpec, layout: CgroupLayout) -> HostApp:
    """Raises ValueError naming the field when the application cannot be placed."""
    name = spec.name or ""
    if not name:
        raise ValueError("hostApplications[].name is required")
    qos = spec.qos or "LS"
    cgroup = spec.cgroup_path
    base_name = (cgroup.base if cgroup else None) or "CgroupRoot"
    bases = {
        "CgroupRoot": layout.base,
        "Kubepods": layout.qos_dir("Guaranteed"),
        "KubepodsBurstable": layout.qos_dir("Burstable"),
        "KubepodsBesteffort": layout.qos_dir("BestEffort"),
    }
    if base_name not in bases:
        raise ValueError(
            f"hostApplications[{name}].cgroupPath.base {base_name!r} is not one of {sorted(bases)}"
        )
    parent = (cgroup.parent_dir or "") if cgroup is not None else _PARENT_BY_QOS.get(qos, "")
    relative = (cgroup.relative_path if cgroup and cgroup.relative_path else None) or name
    path = "/".join(
        part.strip("/") for part in (bases[base_name], parent, relative) if part and part.strip("/")
    )
    return HostApp(name, qos, path, base_name == "KubepodsBesteffort")
