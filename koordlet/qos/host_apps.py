"""Host applications (NodeSLO ``hostApplications``): processes outside pods whose cgroup koordlet
manages like a pod of the application's QoS class.

The cgroup is ``<base>/<parentDir>/<relativePath>``; ``base`` is ``CgroupRoot`` (kubelet's cgroup
root, the default), ``Kubepods``, ``KubepodsBurstable`` or ``KubepodsBesteffort``. Without a
``cgroupPath`` the parent is ``host-latency-sensitive`` for LS applications and ``host-best-effort``
for BE ones, and the relative path the application's name (Koordinator's ``GetHostAppCgroupPath``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.slo.nodeslo import HostApplicationSpec, NodeSLOSpec
from koordlet.qos.layout import CgroupLayout

__all__ = ["HostApp", "host_app", "host_apps_of"]

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


def host_apps_of(spec: NodeSLOSpec | None, layout: CgroupLayout) -> tuple[list[HostApp], list[str]]:
    """The NodeSLO's host applications that can be placed, and why each of the others cannot."""
    apps: list[HostApp] = []
    problems: list[str] = []
    entries: Sequence[HostApplicationSpec] = (spec.host_applications or []) if spec else []
    for entry in entries:
        try:
            apps.append(host_app(entry, layout))
        except ValueError as exc:
            problems.append(str(exc))
    return apps, problems
