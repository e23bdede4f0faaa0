"""What NRI cannot adjust, written by koordlet itself when the runtime announces a pod
(RunPodSandbox, before its first container): the pod cgroup's CPU QoS and batch-resource values and
the pod's resctrl group, as Koordinator's ``PodContext.NriDone`` writes them.

kubelet makes the pod cgroup before it asks the runtime for the sandbox, so it is there. A knob the
kernel lacks (``cpu.bvt_warp_ns`` upstream) is skipped without a word: the reconcile reports it.
"""

from __future__ import annotations

from apis.core import Pod
from koordlet.nri.adjust import PodSettings
from koordlet.qos.layout import CgroupLayout, kube_qos_of
from koordlet.qos.resctrl import ResctrlInfo, ResctrlWriter
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.writer import CgroupWriter

__all__ = ["HostPodCgroups"]

_CPU_QOS = {"bvt": R.CPU_BVT_WARP_NS, "idle": R.CPU_IDLE}


class HostPodCgroups:
    def __init__(self, writer: CgroupWriter, layout: CgroupLayout, resctrl: ResctrlWriter) -> None:
        self.writer = writer
        self.layout = layout
        self.resctrl = resctrl

    def resctrl_info(self) -> ResctrlInfo | None:
        """The node's resctrl, None when it is not mounted."""
        return self.resctrl.info() if self.resctrl.available() else None

    def apply(self, pod: Pod, settings: PodSettings) -> list[str]:
        """Write ``settings``; what was written, for the log."""
        path = self.layout.pod_dir(kube_qos_of(pod.status.qos_class), pod.metadata.uid or "")
        written: list[str] = []
        wanted: list[tuple[R, int]] = []
        if settings.batch is not None:
            wanted += [
                (R.CPU_SHARES, settings.batch.cpu_shares),
                (R.CPU_CFS_QUOTA, settings.batch.cfs_quota),
                (R.MEMORY_LIMIT, settings.batch.memory_limit),
            ]
        # after cpu.shares: the kernel refuses (EINVAL) the shares of a group already idle
        if settings.cpu_qos is not None:
            resource = _CPU_QOS[settings.cpu_qos[0]]
            if self.writer.supported(path, resource):
                wanted.append((resource, settings.cpu_qos[1]))
        for resource, value in wanted:
            if self.writer.write(path, resource, value):
                written.append(f"{resource.value}={value}")
        group, schemata = settings.resctrl_group, settings.resctrl_schemata
        if group is not None and schemata and self.resctrl.write_schemata(group, schemata):
            written.append(f"resctrl group {group}")
        return written

    def has_resctrl_group(self, group: str) -> bool:
        return self.resctrl.available() and group in self.resctrl.groups()

    def remove_resctrl_group(self, group: str) -> None:
        if self.has_resctrl_group(group):
            self.resctrl.remove_group(group)
