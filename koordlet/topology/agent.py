"""The host topology reporter as the real koordlet runs it, with its cpuset applier when cgroups are
there and ``apply_cpusets`` is on."""

from __future__ import annotations

import logging

from koordlet.cgroups import CGROUP_MOUNT, detect_version
from koordlet.config import KoordletConfig
from koordlet.qos.layout import CgroupLayout
from koordlet.qos.writer import CgroupWriter
from koordlet.topology.cpuset_apply import CPUSetApplier
from koordlet.topology.reporter import HostTopologyReporter

__all__ = ["host_topology_reporter"]

log = logging.getLogger("koordlet.topology")


def host_topology_reporter(config: KoordletConfig) -> HostTopologyReporter:
    fs = config.host_fs()
    applier = None
    version = config.cgroup_version or detect_version(fs)
    if config.apply_cpusets and version is not None:
        writer = CgroupWriter(fs, version)
        layout = CgroupLayout.detect(fs, writer.subsystem_root("cpuset"), config.cgroup_root)
        applier = CPUSetApplier(
            writer,
            layout,
            be_cpu_manager=config.gates.be_cpu_manager,
            unset_cpu_quota=not config.disable_unset_cpu_quota,
        )
    elif config.apply_cpusets:
        log.warning("no cgroup mount under %s: cpusets are not applied", fs.path(CGROUP_MOUNT))
    return HostTopologyReporter(
        config.node_name or "",
        fs,
        config.kubelet_config,
        interval_seconds=config.topology_interval_seconds,
        applier=applier,
    )
