"""The host's CPU and NUMA layout read from fake sysfs trees of whole machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from apis.cpulist import format_cpus, parse_cpus
from apis.extension.numa import CPUBasicInfo, CPUInfo
from koordlet.fs import HostFS
from koordlet.topology.host import NUMAMemory, read_host_topology
from tests.koordlet.topology.fake_sysfs import FakeCPU, FakeMachine, linux_numbering

GiB_KB = 1024 * 1024


def test_two_sockets_two_numa_nodes_eight_cores_two_threads(tmp_path: Path) -> None:
    FakeMachine(tmp_path).build(
        linux_numbering(2, 2, 8, 2),
        dict.fromkeys(range(4), 64 * GiB_KB),
        hugepages={0: {2048: 512}, 1: {1048576: 2}},
        smt_active=1,
        no_turbo=0,
    )
    host = read_host_topology(HostFS(tmp_path))
    assert len(host.cpus) == 64
    # Linux numbering: CPU i and i+32 are the two threads of one core; 8 cores per NUMA node
    assert host.cpus[0] == CPUInfo(id=0, core=0, socket=0, node=0)
    assert host.cpus[32] == CPUInfo(id=32, core=0, socket=0, node=0)
    assert host.cpus[9] == CPUInfo(id=9, core=9, socket=0, node=1)
    assert host.cpus[16] == CPUInfo(id=16, core=16, socket=1, node=2)
    assert host.cpus[63] == CPUInfo(id=63, core=31, socket=1, node=3)
    assert [format_cpus(host.cpus_of(n)) for n in host.numa_nodes] == [
        "0-7,32-39",
        "8-15,40-47",
        "16-23,48-55",
        "24-31,56-63",
    ]
    assert host.memory[0] == NUMAMemory(64 * GiB_KB * 1024, {"2Mi": 512 * 2 * 1024 * 1024})
    assert host.memory[0].memory_bytes == (64 - 1) * 1024**3
    assert host.memory[1].memory_bytes == (64 - 2) * 1024**3
    assert host.memory[3] == NUMAMemory(64 * 1024**3)
    assert host.basic_info == CPUBasicInfo(
        cpu_model="Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
        hyper_thread_enabled=True,
        turbo_enabled=True,
        vendor_id="GenuineIntel",
    )


def test_one_numa_node_machine_without_node_directories(tmp_path: Path) -> None:
    """A kernel without NUMA: every CPU on node 0, memory from /proc/meminfo."""
    FakeMachine(tmp_path).build(
        linux_numbering(1, 1, 4, 2),
        {0: 16 * GiB_KB},
        numa_dirs=False,
        model="AMD EPYC",
        vendor="AuthenticAMD",
    )
    host = read_host_topology(HostFS(tmp_path))
    assert host.numa_nodes == [0]
    assert [(c.id, c.core, c.socket, c.node) for c in host.cpus] == [
        (0, 0, 0, 0), (1, 1, 0, 0), (2, 2, 0, 0), (3, 3, 0, 0),
        (4, 0, 0, 0), (5, 1, 0, 0), (6, 2, 0, 0), (7, 3, 0, 0),
    ]  # fmt: skip
    assert host.memory == {0: NUMAMemory(16 * 1024**3)}
    # no smt/active: hyper-threading from the siblings; no turbo knob: left out
    assert host.basic_info == CPUBasicInfo(
        cpu_model="AMD EPYC", hyper_thread_enabled=True, vendor_id="AuthenticAMD"
    )


def test_non_contiguous_cpu_ids_keep_their_ids_and_number_cores_in_order(tmp_path: Path) -> None:
    """CPUs 2-3 offline and ids up to 13: cores are numbered by their lowest CPU, machine-wide."""
    cpus = [
        FakeCPU(0, 0, 0, 0), FakeCPU(1, 4, 0, 0), FakeCPU(4, 8, 0, 1), FakeCPU(5, 9, 0, 1),
        FakeCPU(10, 0, 0, 0), FakeCPU(11, 4, 0, 0), FakeCPU(12, 8, 0, 1), FakeCPU(13, 9, 0, 1),
    ]  # fmt: skip
    FakeMachine(tmp_path).build(cpus, {0: 8 * GiB_KB, 1: 8 * GiB_KB}, smt_active=0)
    host = read_host_topology(HostFS(tmp_path))
    assert [(c.id, c.core, c.node) for c in host.cpus] == [
        (0, 0, 0), (1, 1, 0), (4, 2, 1), (5, 3, 1), (10, 0, 0), (11, 1, 0), (12, 2, 1), (13, 3, 1),
    ]  # fmt: skip
    assert host.cpus_of(1) == [4, 5, 12, 13]
    assert host.basic_info.hyper_thread_enabled is False  # smt/active says off


def test_a_machine_without_cpus_is_an_error_not_an_empty_topology(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no CPUs"):
        read_host_topology(HostFS(tmp_path))


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("", set()), ("0", {0}), ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), (" 2-3 ,\n", {2, 3})],
)
def test_cpu_lists_parse_and_format_back(text: str, cpus: set[int]) -> None:
    assert parse_cpus(text) == cpus
    assert parse_cpus(format_cpus(cpus)) == cpus


@pytest.mark.parametrize("bad", ["a", "3-1", "1-", "0-99999999", "1,,x"])
def test_a_bad_cpu_list_names_the_part(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid CPU list"):
        parse_cpus(bad)
