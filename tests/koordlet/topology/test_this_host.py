"""koordlet's topology of this very machine, no cluster: the CPUs, NUMA nodes and memory it reports
agree with the kernel as os, psutil and sysfs see it, read independently here."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import psutil
import pytest

from koordlet.fs import HostFS
from koordlet.topology.host import HostTopology, read_host_topology
from koordlet.topology.kubelet import KubeletConfig
from koordlet.topology.nrt import desired_topology, merge_topology, new_topology
from tests.koordlet.topology.builders import node

NODE = Path("/sys/devices/system/node")


@pytest.fixture(scope="module")
def host() -> HostTopology:
    return read_host_topology(HostFS("/"))


def _numa_dirs() -> dict[int, Path]:
    if not NODE.is_dir():
        return {}
    return {int(m.group(1)): p for p in NODE.iterdir() if (m := re.fullmatch(r"node(\d+)", p.name))}


def test_every_online_cpu_is_reported_once(host: HostTopology) -> None:
    ids = [cpu.id for cpu in host.cpus]
    assert len(ids) == len(set(ids))
    assert len(ids) == os.cpu_count()
    assert set(os.sched_getaffinity(0)) <= set(ids)


def test_cores_and_sockets_agree_with_psutil(host: HostTopology) -> None:
    physical = psutil.cpu_count(logical=False)
    if physical is None:
        pytest.skip("psutil cannot count physical cores here")
    assert len({cpu.core for cpu in host.cpus}) == physical
    smt = Path("/sys/devices/system/cpu/smt/active")
    expected = smt.read_text().strip() == "1" if smt.exists() else len(host.cpus) > physical
    assert bool(host.basic_info.hyper_thread_enabled) == expected


def test_numa_nodes_and_their_cpus_agree_with_sysfs(host: HostTopology) -> None:
    dirs = _numa_dirs()
    if not dirs:
        assert host.numa_nodes == [0]
        pytest.skip("no /sys/devices/system/node: one NUMA node assumed, nothing to compare")
    assert host.numa_nodes == sorted(dirs)
    for numa, directory in dirs.items():
        listed: set[int] = set()
        for part in directory.joinpath("cpulist").read_text().strip().split(","):
            if part:
                low, _, high = part.partition("-")
                listed.update(range(int(low), int(high or low) + 1))
        assert set(host.cpus_of(numa)) == listed


def test_memory_per_numa_node_agrees_with_sysfs_and_psutil(host: HostTopology) -> None:
    dirs = _numa_dirs()
    total = psutil.virtual_memory().total
    reported = sum(m.total_bytes for m in host.memory.values())
    assert 0 < reported <= total * 1.01
    if not dirs:
        assert reported == total
        return
    for numa, directory in dirs.items():
        text = directory.joinpath("meminfo").read_text()
        kb = int(re.search(r"MemTotal:\s+(\d+) kB", text).group(1))  # type: ignore[union-attr]
        assert host.memory[numa].total_bytes == kb * 1024


def test_the_nrt_of_this_machine_has_a_zone_per_numa_node_with_its_cpus(host: HostTopology) -> None:
    n = node(os.uname().nodename.lower()[:63] or "this-host")
    status = desired_topology(
        host, n, [], cpu_manager=KubeletConfig().cpu_manager(host.cpus), topology_policy="None"
    )
    nrt = merge_topology(new_topology(n), status)
    assert nrt is not None
    zones = nrt.numa_zones()
    assert sorted(zones) == host.numa_nodes
    cpu = [zone.resource("cpu") for zone in zones.values()]
    assert sum(r.capacity.value() for r in cpu if r is not None) == os.cpu_count()
    pools = json.loads((nrt.metadata.annotations or {})["node.koordinator.sh/cpu-shared-pools"])
    assert sorted(p["node"] for p in pools) == host.numa_nodes
