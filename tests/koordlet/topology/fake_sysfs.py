"""Fake sysfs/procfs trees of whole machines: CPUs, their cores, sockets and NUMA nodes, memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apis.cpulist import format_cpus


@dataclass(frozen=True)
class FakeCPU:
    id: int
    core_id: int
    """Per-socket core id, as sysfs has it."""
    socket: int
    node: int


def linux_numbering(sockets: int, numa_per_socket: int, cores_per_numa: int, threads: int) -> list[FakeCPU]:
    """First threads of all cores, then second threads: 2x2x8x2 puts CPUs 0-7 and 32-39 on node 0."""
    cores = sockets * numa_per_socket * cores_per_numa
    cpus = []
    for thread in range(threads):
        for core in range(cores):
            numa = core // cores_per_numa
            socket = numa // numa_per_socket
            cpus.append(
                FakeCPU(thread * cores + core, core % (numa_per_socket * cores_per_numa), socket, numa)
            )
    return sorted(cpus, key=lambda c: c.id)


class FakeMachine:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def build(
        self,
        cpus: list[FakeCPU],
        memory_kb: dict[int, int],
        *,
        numa_dirs: bool = True,
        hugepages: dict[int, dict[int, int]] | None = None,
        model: str = "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz",
        vendor: str = "GenuineIntel",
        smt_active: int | None = None,
        no_turbo: int | None = None,
    ) -> FakeMachine:
        """``hugepages``: NUMA id -> page size in kB -> pages."""
        self.write("sys/devices/system/cpu/online", format_cpus(c.id for c in cpus) + "\n")
        for cpu in cpus:
            siblings = [c.id for c in cpus if (c.socket, c.core_id) == (cpu.socket, cpu.core_id)]
            topology = f"sys/devices/system/cpu/cpu{cpu.id}/topology"
            self.write(f"{topology}/core_id", f"{cpu.core_id}\n")
            self.write(f"{topology}/physical_package_id", f"{cpu.socket}\n")
            self.write(f"{topology}/thread_siblings_list", format_cpus(siblings) + "\n")
        if numa_dirs:
            for node, kb in memory_kb.items():
                members = [c.id for c in cpus if c.node == node]
                self.write(f"sys/devices/system/node/node{node}/cpulist", format_cpus(members) + "\n")
                self.write(
                    f"sys/devices/system/node/node{node}/meminfo",
                    f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        {kb // 2} kB\n",
                )
                for size, pages in (hugepages or {}).get(node, {}).items():
                    directory = f"sys/devices/system/node/node{node}/hugepages/hugepages-{size}kB"
                    self.write(f"{directory}/nr_hugepages", f"{pages}\n")
        else:
            total = sum(memory_kb.values())
            self.write("proc/meminfo", f"MemTotal:       {total} kB\nMemFree:        {total // 2} kB\n")
        processors = "".join(
            f"processor\t: {c.id}\nvendor_id\t: {vendor}\nmodel name\t: {model}\n\n" for c in cpus
        )
        self.write("proc/cpuinfo", processors)
        if smt_active is not None:
            self.write("sys/devices/system/cpu/smt/active", f"{smt_active}\n")
        if no_turbo is not None:
            self.write("sys/devices/system/cpu/intel_pstate/no_turbo", f"{no_turbo}\n")
        return self
