"""The QoS behaviours that write this node's cgroups and resctrl groups, one round at a time.

Every write goes through :class:`CgroupWriter` / :class:`ResctrlWriter`, so a knob the kernel lacks
is reported once and skipped; nothing here raises for a missing file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from apis.cpulist import format_cpus, parse_cpus
from apis.errors import InvalidAnnotation
from apis.extension.numa import get_resource_status
from apis.extension.qosannotations import get_resctrl
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.cgroups import CgroupVersion
from koordlet.collectors import series
from koordlet.fs import HostFS
from koordlet.metric_cache import MetricSource
from koordlet.qos import cpu_suppress as sup
from koordlet.qos.blkio import BlkIOQoS
from koordlet.qos.cpu_qos import PodCgroups, plan_cpu_qos
from koordlet.qos.eviction import latest
from koordlet.qos.host_apps import HostApp, host_apps_of
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.pods import QoSPod
from koordlet.qos.resctrl import ResctrlWriter
from koordlet.qos.resctrl_qos import (
    CLASS_GROUPS,
    POD_GROUP_PREFIX,
    class_group_of,
    class_schemata,
    pod_schemata,
)
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.slo import class_qos
from koordlet.qos.writer import CgroupWriter

__all__ = ["NodeQoS", "RoundReport", "read_topology"]

log = logging.getLogger("koordlet.qos")

_SYSCTL_GROUP_IDENTITY = "proc/sys/kernel/sched_group_identity_enabled"
_SYSCTL_SCHED_CORE = "proc/sys/kernel/sched_core"


def read_topology(fs: HostFS) -> list[sup.CPUInfo]:
    """Logical CPUs with core, socket and NUMA node from sysfs; each CPU its own core where unknown."""
    base = "sys/devices/system/cpu"
    numa_of: dict[int, int] = {}
    for node in fs.subdirs("sys/devices/system/node"):
        if node.startswith("node") and node[4:].isdigit():
            try:
                for cpu in parse_cpus(fs.read_text(f"sys/devices/system/node/{node}/cpulist")):
                    numa_of[cpu] = int(node[4:])
            except (OSError, ValueError):
                continue
    infos = []
    for name in fs.subdirs(base):
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        cpu = int(name[3:])
        try:
            core = int(fs.read_text(f"{base}/{name}/topology/core_id"))
            socket = int(fs.read_text(f"{base}/{name}/topology/physical_package_id"))
        except (OSError, ValueError):
            core, socket = cpu, 0
        infos.append(sup.CPUInfo(cpu, core + socket * 100_000, socket, numa_of.get(cpu, 0)))
    return sorted(infos, key=lambda c: c.cpu)


@dataclass
class RoundReport:
    annotation_errors: list[tuple[QoSPod, str]] = field(default_factory=list)
    be_quota: int | None = None
    be_cpuset: str | None = None


class NodeQoS:
    def __init__(
        self,
        fs: HostFS,
        version: CgroupVersion,
        gates: KoordletFeatureGates,
        cgroup_root: str = "/",
        capacity_milli: int | None = None,
        *,
        apply_cpu_qos: bool = True,
    ) -> None:
        self.fs = fs
        self.apply_cpu_qos_enabled = apply_cpu_qos
        self.gates = gates
        self.writer = CgroupWriter(fs, version)
        self.resctrl = ResctrlWriter(fs)
        self.layout = CgroupLayout.detect(fs, self.writer.subsystem_root("cpu"), cgroup_root)
        self.topology = read_topology(fs)
        self.capacity_milli = capacity_milli
        self._logged: set[str] = set()
        self.blkio = BlkIOQoS(fs, self.writer, self.layout, self._once)

    def _once(self, key: str, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(message, *args)

    def pod_cgroups(self, pods: Sequence[QoSPod]) -> list[PodCgroups]:
        root = self.writer.subsystem_root("cpu")
        found = []
        for pod in pods:
            path = self.layout.pod_dir(pod.kube_qos, pod.uid)
            containers = tuple(f"{path}/{child}" for child in self.fs.subdirs(f"{root}/{path}"))
            found.append(PodCgroups(pod, path, containers))
        return found

    def host_apps(self, spec: NodeSLOSpec) -> list[HostApp]:
        apps, problems = host_apps_of(spec, self.layout)
        for problem in problems:
            self._once(f"hostapp:{problem}", "NodeSLO hostApplications skipped: %s", problem)
        return apps

    def reconcile(
        self, spec: NodeSLOSpec, pods: Sequence[QoSPod], source: MetricSource, now: float
    ) -> RoundReport:
        report = RoundReport()
        cgroups = self.pod_cgroups(pods)
        apps = self.host_apps(spec)
        if self.gates.group_identity and self.apply_cpu_qos_enabled:
            report.annotation_errors += self.apply_cpu_qos(spec, cgroups, apps)
        if self.gates.be_cpu_suppress:
            self.apply_suppress(spec, pods, apps, source, now, report)
        if self.gates.rdt_resctrl or self.gates.resctrl_hook:
            report.annotation_errors += self.apply_resctrl(spec, cgroups, apps)
        if self.gates.blkio_reconcile:
            report.annotation_errors += self.blkio.reconcile(spec, cgroups)
        return report

    # --- pod-level CPU QoS -----------------------------------------------------------------------

    def apply_cpu_qos(
        self, spec: NodeSLOSpec, cgroups: Sequence[PodCgroups], apps: Sequence[HostApp]
    ) -> list[tuple[QoSPod, str]]:
        plan = plan_cpu_qos(spec, self.layout, cgroups)
        values = dict(plan.values)
        for app in apps:
            if plan.resource == "bvt":
                values[app.path] = _app_bvt(spec, app.qos)
            else:
                be = class_qos(spec, "BE").cpu_qos
                values[app.path] = 1 if app.qos == "BE" and be and be.enable and be.sched_idle == 1 else 0
        resource = R.CPU_BVT_WARP_NS if plan.resource == "bvt" else R.CPU_IDLE
        kubepods = self.layout.qos_dir("Guaranteed")
        if not self.fs.is_dir(f"{self.writer.subsystem_root('cpu')}/{kubepods}"):
            self._once("no-kubepods", "no %s cgroup yet: pod-level CPU QoS waits for kubelet", kubepods)
            return list(plan.annotation_errors)
        if not self.writer.supported(kubepods, resource):
            self._once(
                f"unsupported:{resource}",
                "pod-level CPU QoS: the kernel has no %s (%s); use cpuPolicy %s",
                resource.value,
                "not an Anolis/Alibaba Cloud Linux kernel"
                if plan.resource == "bvt"
                else "needs Linux >= 5.15",
                "coreSched on upstream kernels" if plan.resource == "bvt" else "groupIdentity",
            )
            return list(plan.annotation_errors)
        if plan.resource == "bvt" and self.fs.exists(_SYSCTL_GROUP_IDENTITY):
            self._sysctl(_SYSCTL_SCHED_CORE, "0")
            self._sysctl(_SYSCTL_GROUP_IDENTITY, "1")
        for path, value in values.items():
            self.writer.write(path, resource, value)
        return list(plan.annotation_errors)

    def _sysctl(self, relative: str, value: str) -> None:
        if not self.fs.exists(relative):
            return
        try:
            if self.fs.read_text(relative).strip() != value:
                self.fs.path(relative).write_text(value)
        except OSError as exc:
            self._once(f"sysctl:{relative}", "cannot set %s: %s", relative, exc)

    # --- BE CPU suppression ----------------------------------------------------------------------

    def allowed_cpus(self) -> list[int]:
        raw = self.writer.read(self.layout.qos_dir("Guaranteed"), R.CPUSET_CPUS)
        if raw:
            return sorted(parse_cpus(raw))
        return [c.cpu for c in self.topology]

    def restore_suppress(self) -> None:
        be = self.layout.qos_dir("BestEffort")
        allowed = self.allowed_cpus()
        if allowed:
            self.writer.write(be, R.CPUSET_CPUS, format_cpus(allowed))
        self.writer.write(be, R.CPU_CFS_QUOTA, -1)

    def apply_suppress(
        self,
        spec: NodeSLOSpec,
        pods: Sequence[QoSPod],
        apps: Sequence[HostApp],
        source: MetricSource,
        now: float,
        report: RoundReport,
    ) -> None:
        strategy = spec.resource_used_threshold_with_be
        if self.gates.be_cpu_manager or strategy is None or not strategy.enable:
            self.restore_suppress()
            return
        node_used = latest(source, (series.NODE_CPU,), now, 1.0)
        cpus = self.allowed_cpus()
        capacity = self.capacity_milli or len(cpus) * 1000
        if node_used is None or not cpus:
            return
        usages = []
        for pod in pods:
            used = latest(source, (series.POD_CPU, pod.uid), now, 1.0)
            if used is not None:
                usages.append(sup.UsageOf(used * 1000, pod.raw_qos == "BE" or pod.kube_qos == "BestEffort"))
        app_usages = [
            sup.UsageOf(used * 1000, app.qos == "BE" and app.in_besteffort)
            for app in apps
            if (used := latest(source, (series.POD_CPU, f"hostapp/{app.name}"), now, 1.0)) is not None
        ]
        suppress = sup.suppress_milli(
            capacity,
            strategy.cpu_suppress_threshold_percent or 65,
            node_used * 1000,
            usages,
            app_usages,
            min_percent=strategy.cpu_suppress_min_percent,
        )
        be = self.layout.qos_dir("BestEffort")
        if strategy.cpu_suppress_policy == "cfsQuota":
            current = self.writer.read_int(be, R.CPU_CFS_QUOTA) or -1
            quota = sup.cfs_quota(suppress, current, len(cpus))
            if quota is not None and self.writer.write(be, R.CPU_CFS_QUOTA, quota):
                report.be_quota = quota
            self.writer.write(be, R.CPUSET_CPUS, format_cpus(cpus))
            return
        chosen = self.suppress_cpuset(suppress, pods, cpus)
        text = format_cpus(chosen)
        self.writer.write(be, R.CPU_CFS_QUOTA, -1)
        if self._write_be_cpuset(be, text, pods):
            report.be_cpuset = text

    def suppress_cpuset(self, suppress: int, pods: Sequence[QoSPod], allowed: list[int]) -> list[int]:
        lsr: set[int] = set()
        excluded: set[int] = set()
        for pod in pods:
            try:
                bound = get_resource_status(pod.annotations).cpuset
            except InvalidAnnotation:
                continue
            if not bound:
                continue
            cpus = set(parse_cpus(bound))
            if pod.raw_qos == "LSE" or pod.raw_qos == "SYSTEM":
                excluded |= cpus
            elif pod.raw_qos == "LSR":
                lsr |= cpus
        infos = [c for c in self.topology if c.cpu in allowed and c.cpu not in excluded] or [
            sup.CPUInfo(cpu, cpu) for cpu in allowed if cpu not in excluded
        ]
        old = self.writer.read(self.layout.qos_dir("BestEffort"), R.CPUSET_CPUS) or ""
        size = sup.cpuset_size(suppress, len(parse_cpus(old)), len(allowed))
        lsr_infos = [c for c in infos if c.cpu in lsr]
        rest = [c for c in infos if c.cpu not in lsr]
        from_lsr = sup.split_lsr(size, len(lsr_infos), len(rest))
        return sorted(sup.select_cpus(lsr_infos, from_lsr) + sup.select_cpus(rest, size - from_lsr))

    def _write_be_cpuset(self, be: str, text: str, pods: Sequence[QoSPod]) -> bool:
        """kubelet's none policy: the union top-down (a child may never exceed its parent), then the
        new set bottom-up."""
        old = self.writer.read(be, R.CPUSET_CPUS) or ""
        union = format_cpus(parse_cpus(old) | parse_cpus(text))
        be_pods = [c for c in self.pod_cgroups([p for p in pods if p.kube_qos == "BestEffort"])]
        paths = [be] + [p for c in be_pods for p in (c.path, *c.containers)]
        for path in paths:
            self.writer.write(path, R.CPUSET_CPUS, union)
        ok = True
        for path in reversed(paths):
            ok = self.writer.write(path, R.CPUSET_CPUS, text) and ok
        return ok

    def be_real_limit_milli(self) -> float | None:
        """min(|besteffort cpuset| x 1000, quota x 1000 / period) of the besteffort QoS cgroup."""
        be = self.layout.qos_dir("BestEffort")
        raw = self.writer.read(be, R.CPUSET_CPUS)
        limit = len(parse_cpus(raw)) * 1000.0 if raw else float(len(self.allowed_cpus()) * 1000)
        quota = self.writer.read_int(be, R.CPU_CFS_QUOTA)
        period = self.writer.read_int(be, R.CPU_CFS_PERIOD) or sup.CFS_PERIOD_US
        if quota is not None and quota > 0:
            limit = min(limit, quota * 1000 / period)
        return limit

    # --- resctrl ---------------------------------------------------------------------------------

    def _pids(self, paths: Sequence[str]) -> list[int]:
        root = self.writer.subsystem_root("cpu")
        pids: list[int] = []
        for path in paths:
            try:
                text = self.fs.read_text(f"{root}/{path}/cgroup.procs")
            except OSError:
                continue
            pids += [int(line) for line in text.split() if line.isdigit()]
        return pids

    def apply_resctrl(
        self, spec: NodeSLOSpec, cgroups: Sequence[PodCgroups], apps: Sequence[HostApp]
    ) -> list[tuple[QoSPod, str]]:
        if not self.resctrl.available():
            self._once("resctrl", "resctrl is not mounted at /sys/fs/resctrl: LLC and MBA QoS skipped")
            return []
        info = self.resctrl.info()
        if info is None:
            return []
        errors: list[tuple[QoSPod, str]] = []
        if self.gates.rdt_resctrl:
            enabled = {}
            for name in CLASS_GROUPS:
                settings = class_schemata(spec, info, name)
                enabled[name] = settings.enabled
                self.resctrl.write_schemata(name, settings.schemata)
            for entry in cgroups:
                klass = class_group_of(entry.pod.qos)
                if klass and enabled[klass] and get_resctrl_safe(entry.pod) is None:
                    self.resctrl.add_tasks(klass, self._pids([entry.path, *entry.containers]))
            for app in apps:
                klass = class_group_of(app.qos)
                if klass and enabled[klass]:
                    self.resctrl.add_tasks(klass, self._pids([app.path]))
        if self.gates.resctrl_hook:
            wanted = set()
            for entry in cgroups:
                try:
                    config = get_resctrl(entry.pod.annotations)
                    if config is None:
                        continue
                    schemata = pod_schemata(config, info)
                except (InvalidAnnotation, ValueError) as exc:
                    errors.append((entry.pod, str(exc)))
                    continue
                group = POD_GROUP_PREFIX + entry.pod.uid
                wanted.add(group)
                if self.resctrl.write_schemata(group, schemata):
                    self.resctrl.add_tasks(group, self._pids([entry.path, *entry.containers]))
            for group in self.resctrl.groups():
                if group.startswith(POD_GROUP_PREFIX) and group not in wanted:
                    self.resctrl.remove_group(group)
        return errors


def get_resctrl_safe(pod: QoSPod) -> object | None:
    try:
        return get_resctrl(pod.annotations)
    except InvalidAnnotation:
        return None


def _app_bvt(spec: NodeSLOSpec, qos: str) -> int:
    cpu = class_qos(spec, qos).cpu_qos
    return (cpu.group_identity or 0) if cpu is not None and cpu.enable else 0
