"""The host's CPU and NUMA layout from sysfs and procfs, behind :class:`~koordlet.fs.HostFS`.

- logical CPUs: ``/sys/devices/system/cpu/online`` (every ``cpuN`` directory when it is missing);
- a CPU's socket: ``cpuN/topology/physical_package_id``; its core: the CPUs of
  ``thread_siblings_list`` are one core, and cores are numbered machine-wide in the order of their
  lowest CPU, as ``lscpu -e`` numbers them (Koordinator's koordlet reads lscpu);
- a CPU's NUMA node: the ``/sys/devices/system/node/nodeN/cpulist`` that lists it (node 0 on a
  kernel without NUMA);
- per NUMA node: ``MemTotal`` of ``nodeN/meminfo`` and its 2Mi and 1Gi hugepages
  (``nodeN/hugepages/hugepages-<size>kB/nr_hugepages``); ``/proc/meminfo`` and
  ``/sys/kernel/mm/hugepages`` without NUMA;
- ``cpu-basic-info``: ``model name`` and ``vendor_id`` of ``/proc/cpuinfo``, hyper-threading from
  ``/sys/devices/system/cpu/smt/active`` (else more than one thread per core), turbo from
  ``intel_pstate/no_turbo`` or ``cpufreq/boost``, the L3 CAT mask from resctrl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apis.cpulist import parse_cpus
from apis.extension.numa import CPUBasicInfo, CPUInfo
from koordlet.fs import HostFS

__all__ = ["HUGEPAGE_SIZES", "HostTopology", "NUMAMemory", "read_host_topology"]

_CPU = "sys/devices/system/cpu"
_NODE = "sys/devices/system/node"
_NODE_DIR = re.compile(r"node(\d+)")
_CPU_DIR = re.compile(r"cpu(\d+)")
HUGEPAGE_SIZES = {"2Mi": 2048, "1Gi": 1048576}
"""Resource suffix -> the page size in kB, as sysfs names the directories."""


@dataclass(frozen=True)
class NUMAMemory:
    total_bytes: int
    """MemTotal of the node, hugepages included."""
    hugepages_bytes: dict[str, int] = field(default_factory=dict)
    """``2Mi`` / ``1Gi`` -> bytes held in hugepages of that size."""

    @property
    def memory_bytes(self) -> int:
        """What pods can be given as ``memory``: MemTotal less the hugepages."""
        return max(self.total_bytes - sum(self.hugepages_bytes.values()), 0)


@dataclass(frozen=True)
class HostTopology:
    cpus: tuple[CPUInfo, ...]
    """Every logical CPU, sorted by id."""
    memory: dict[int, NUMAMemory]
    """NUMA id -> its memory."""
    basic_info: CPUBasicInfo = field(default_factory=CPUBasicInfo)

    @property
    def numa_nodes(self) -> list[int]:
        return sorted({cpu.node for cpu in self.cpus} | set(self.memory))

    def cpus_of(self, numa_node: int) -> list[int]:
        return [cpu.id for cpu in self.cpus if cpu.node == numa_node]


def _read(fs: HostFS, relative: str) -> str | None:
    try:
        return fs.read_text(relative)
    except OSError:
        return None


def _int(fs: HostFS, relative: str) -> int | None:
    text = _read(fs, relative)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _online_cpus(fs: HostFS) -> list[int]:
    online = _read(fs, f"{_CPU}/online")
    if online is not None and online.strip():
        return sorted(parse_cpus(online))
    return sorted(int(m.group(1)) for name in fs.subdirs(_CPU) if (m := _CPU_DIR.fullmatch(name)))


def _numa_cpus(fs: HostFS) -> dict[int, frozenset[int]]:
    nodes: dict[int, frozenset[int]] = {}
    for name in fs.subdirs(_NODE):
        match = _NODE_DIR.fullmatch(name)
        if match is None:
            continue
        text = _read(fs, f"{_NODE}/{name}/cpulist")
        if text is not None:
            nodes[int(match.group(1))] = parse_cpus(text)
    return nodes


def _cpus(fs: HostFS) -> tuple[CPUInfo, ...]:
    online = _online_cpus(fs)
    if not online:
        raise OSError(f"no CPUs found under {fs.path(_CPU)}")
    node_of = {cpu: node for node, cpus in _numa_cpus(fs).items() for cpu in cpus}
    core_key: dict[int, tuple[int, ...]] = {}
    socket_of: dict[int, int] = {}
    for cpu in online:
        topology = f"{_CPU}/cpu{cpu}/topology"
        socket_of[cpu] = _int(fs, f"{topology}/physical_package_id") or 0
        siblings = _read(fs, f"{topology}/thread_siblings_list")
        if siblings is not None and siblings.strip():
            core_key[cpu] = tuple(sorted(parse_cpus(siblings)))
        else:
            core_key[cpu] = (-1, socket_of[cpu], _int(fs, f"{topology}/core_id") or cpu)
    core_ids: dict[tuple[int, ...], int] = {}
    for cpu in online:  # ascending: a core's number is the order of its lowest CPU
        core_ids.setdefault(core_key[cpu], len(core_ids))
    return tuple(
        CPUInfo(id=cpu, core=core_ids[core_key[cpu]], socket=socket_of[cpu], node=node_of.get(cpu, 0))
        for cpu in online
    )


def _meminfo_total_kb(text: str) -> int | None:
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if "MemTotal" in parts:
            index = parts.index("MemTotal")
            if index + 1 < len(parts) and parts[index + 1].isdigit():
                return int(parts[index + 1])
    return None


def _hugepages(fs: HostFS, directory: str) -> dict[str, int]:
    result: dict[str, int] = {}
    for name, kb in HUGEPAGE_SIZES.items():
        pages = _int(fs, f"{directory}/hugepages-{kb}kB/nr_hugepages")
        if pages:
            result[name] = pages * kb * 1024
    return result


def _memory(fs: HostFS, numa_ids: list[int]) -> dict[int, NUMAMemory]:
    memory: dict[int, NUMAMemory] = {}
    for numa in numa_ids:
        text = _read(fs, f"{_NODE}/node{numa}/meminfo")
        total = _meminfo_total_kb(text) if text is not None else None
        if total is not None:
            memory[numa] = NUMAMemory(total * 1024, _hugepages(fs, f"{_NODE}/node{numa}/hugepages"))
    if not memory:  # a kernel without NUMA: the whole machine is node 0
        text = _read(fs, "proc/meminfo")
        total = _meminfo_total_kb(text) if text is not None else None
        if total is None:
            raise OSError(f"no MemTotal in {fs.path(_NODE)}/node*/meminfo nor {fs.path('proc/meminfo')}")
        memory[0] = NUMAMemory(total * 1024, _hugepages(fs, "sys/kernel/mm/hugepages"))
    return memory


def _cpuinfo_field(text: str, name: str) -> str | None:
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip() or None
    return None


def _basic_info(fs: HostFS, cpus: tuple[CPUInfo, ...]) -> CPUBasicInfo:
    cpuinfo = _read(fs, "proc/cpuinfo") or ""
    smt = _int(fs, f"{_CPU}/smt/active")
    more_threads_than_cores = len({cpu.core for cpu in cpus}) < len(cpus)
    hyper_threading = smt == 1 if smt is not None else more_threads_than_cores
    no_turbo = _int(fs, f"{_CPU}/intel_pstate/no_turbo")
    boost = _int(fs, f"{_CPU}/cpufreq/boost")
    turbo = (no_turbo == 0) if no_turbo is not None else boost == 1
    mask = _read(fs, "sys/fs/resctrl/info/L3/cbm_mask")
    return CPUBasicInfo(
        cpu_model=_cpuinfo_field(cpuinfo, "model name") or "",
        hyper_thread_enabled=hyper_threading,
        turbo_enabled=turbo,
        cat_l3_cbm_mask=(mask.strip() or None) if mask is not None else None,
        vendor_id=_cpuinfo_field(cpuinfo, "vendor_id"),
    )


def read_host_topology(fs: HostFS) -> HostTopology:
    """The host's layout; raises OSError when the CPUs or the memory cannot be read."""
    cpus = _cpus(fs)
    numa_ids = sorted({cpu.node for cpu in cpus} | set(_numa_cpus(fs)))
    return HostTopology(cpus=cpus, memory=_memory(fs, numa_ids), basic_info=_basic_info(fs, cpus))
