"""Write each pod's cpuset (:mod:`koordlet.topology.cpuset_rule`) into its cgroups.

The pod's cgroup and every cgroup below it (its containers and its sandbox) get ``cpuset.cpus``.
On cgroups v1 a child's CPUs must stay within its parent's, so the pod's cgroup is first widened to
hold both the old and the new CPUs, then the children are written, then the pod's cgroup is
narrowed; every step is valid whatever the old value was. ``""`` (leave it to the parent) is written
on v2, where an empty ``cpuset.cpus`` means the parent's CPUs, and skipped on v1, which refuses an
empty cpuset for a cgroup with tasks. A pod bound to CPUs by the scheduler also gets an unlimited
CFS quota (``-1``, ``max`` on v2), pod first, so that its own CPUs are never throttled, as
Koordinator does unless ``-disable-unset-cpu-quota`` is set.

An LS host application's cgroup (NodeSLO ``hostApplications``) gets the LS pools the same way;
its cgroup is the application's to create, and one that is not there is skipped.

Each write goes through :class:`~koordlet.qos.writer.CgroupWriter`: a failed one is logged once and
skipped, and the next round tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from apis.core import Pod
from apis.cpulist import format_cpus, parse_cpus
from apis.errors import InvalidAnnotation
from apis.extension.numa import get_resource_status
from koordlet.qos.host_apps import HostApp
from koordlet.qos.layout import CgroupLayout, kube_qos_of
from koordlet.qos.resources import CgroupResource
from koordlet.qos.writer import CgroupWriter
from koordlet.topology.cpuset_rule import CPUSetRule, host_app_cpuset, pod_cpuset

__all__ = ["AppliedCPUSet", "CPUSetApplier"]

log = logging.getLogger("koordlet.topology")


@dataclass(frozen=True)
class AppliedCPUSet:
    uid: str
    cpuset: str
    cgroups: tuple[str, ...]
    """The pod's cgroup and its children that hold the cpuset now."""


class CPUSetApplier:
    def __init__(
        self,
        writer: CgroupWriter,
        layout: CgroupLayout,
        *,
        be_cpu_manager: bool = False,
        unset_cpu_quota: bool = True,
    ) -> None:
        self.writer = writer
        self.layout = layout
        self.be_cpu_manager = be_cpu_manager
        self.unset_cpu_quota = unset_cpu_quota
        self._warned: set[tuple[str, str]] = set()

    def _warn_once(self, key: str, who: str, problem: str) -> None:
        if (key, problem) not in self._warned:
            self._warned.add((key, problem))
            log.warning("%s: cpuset not applied: %s", who, problem)

    def _children(self, pod_dir: str) -> list[str]:
        root = self.writer.subsystem_root("cpuset")
        return [f"{pod_dir}/{name}" for name in self.writer.fs.subdirs(f"{root}/{pod_dir}")]

    def _current(self, path: str) -> frozenset[int]:
        try:
            return parse_cpus(self.writer.read(path, CgroupResource.CPUSET_CPUS) or "")
        except ValueError:
            return frozenset()

    def apply_pod(self, pod: Pod, rule: CPUSetRule) -> AppliedCPUSet | None:
        """Write one pod's cpuset; None when the rule leaves it alone or its cgroup is not there."""
        try:
            cpuset = pod_cpuset(pod, rule, be_cpu_manager=self.be_cpu_manager)
            bound = bool(get_resource_status(pod.metadata.annotations).cpuset)
        except (InvalidAnnotation, ValueError) as exc:
            who = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
            self._warn_once(pod.metadata.uid or "", who, str(exc))
            return None
        uid = pod.metadata.uid or ""
        pod_dir = self.layout.pod_dir(kube_qos_of(pod.status.qos_class), uid)
        if cpuset is None or not self.writer.supported(pod_dir, CgroupResource.CPUSET_CPUS):
            return None
        if cpuset == "" and self.writer.version == 1:
            return None
        written = self._write_tree(pod_dir, cpuset)
        if bound and self.unset_cpu_quota:
            for path in (pod_dir, *self._children(pod_dir)):
                if self.writer.supported(path, CgroupResource.CPU_CFS_QUOTA):
                    self.writer.write(path, CgroupResource.CPU_CFS_QUOTA, -1)
        return AppliedCPUSet(uid=uid, cpuset=cpuset, cgroups=written)

    def _write_tree(self, top: str, cpuset: str) -> tuple[str, ...]:
        """``cpuset`` into ``top`` and its children, widened first on v1; the cgroups written."""
        children = self._children(top)
        if self.writer.version == 1 and cpuset:
            wider = format_cpus(self._current(top) | parse_cpus(cpuset))
            self.writer.write(top, CgroupResource.CPUSET_CPUS, wider)
        written = tuple(
            path for path in children if self.writer.write(path, CgroupResource.CPUSET_CPUS, cpuset)
        )
        if self.writer.write(top, CgroupResource.CPUSET_CPUS, cpuset):
            written = (top, *written)
        return written

    def apply_host_apps(self, apps: Sequence[HostApp], rule: CPUSetRule) -> dict[str, str]:
        """Write the LS pools into each LS host application's cgroup; what was written, by name."""
        applied: dict[str, str] = {}
        for app in apps:
            try:
                cpuset = host_app_cpuset(app.name, app.qos, rule)
            except ValueError as exc:
                self._warn_once(f"hostapp:{app.name}", f"host application {app.name}", str(exc))
                continue
            if not cpuset or not self.writer.supported(app.path, CgroupResource.CPUSET_CPUS):
                continue
            if self._write_tree(app.path, cpuset):
                applied[app.name] = cpuset
        return applied

    def apply(self, pods: Sequence[Pod], rule: CPUSetRule) -> list[AppliedCPUSet]:
        applied = []
        for pod in pods:
            if pod.status.phase in ("Succeeded", "Failed") or not pod.metadata.uid:
                continue
            result = self.apply_pod(pod, rule)
            if result is not None:
                applied.append(result)
        return applied
