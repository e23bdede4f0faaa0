"""A simulated node's CPU and NUMA layout in the load file (``nodes[].topology``), as a host would
show it in sysfs.

CPUs are numbered as Linux numbers them on common two-thread x86 servers: the first thread of every
core of the machine, socket by socket and NUMA node by NUMA node, then the second threads in the
same order. So on 2 sockets x 2 NUMA nodes x 8 cores x 2 threads, NUMA node 0 holds CPUs 0-7 and
32-39, and CPUs 0 and 32 are one core.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from apis.extension.numa import CPUBasicInfo, CPUInfo
from apis.quantity import Quantity
from koordlet.topology.host import HostTopology, NUMAMemory
from koordlet.topology.kubelet import KubeletConfig

__all__ = ["NodeTopologySpec", "SimulatedKubelet"]


class SimulatedKubelet(KubeletConfig):
    """The node's kubelet settings, as in its KubeletConfiguration (a misspelt key is an error here)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class NodeTopologySpec(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    sockets: int = Field(default=1, ge=1, le=64)
    numa_nodes_per_socket: int = Field(default=1, ge=1, le=64, alias="numaNodesPerSocket")
    cores_per_numa_node: int = Field(ge=1, le=1024, alias="coresPerNUMANode")
    threads_per_core: int = Field(default=2, ge=1, le=8)
    memory_per_numa_node: Quantity = Field(alias="memoryPerNUMANode")
    """``memory`` of each NUMA zone."""
    cpu_model: str | None = None
    """``cpuModel`` of the ``cpu-basic-info`` annotation."""
    vendor_id: str | None = Field(default=None, alias="vendorID")
    turbo_enabled: bool = False
    kubelet: SimulatedKubelet = Field(default_factory=SimulatedKubelet)

    def host(self) -> HostTopology:
        numa_count = self.sockets * self.numa_nodes_per_socket
        cores = numa_count * self.cores_per_numa_node
        cpus = []
        for thread in range(self.threads_per_core):
            for core in range(cores):
                numa = core // self.cores_per_numa_node
                socket = numa // self.numa_nodes_per_socket
                cpus.append(CPUInfo(id=thread * cores + core, core=core, socket=socket, node=numa))
        memory = NUMAMemory(total_bytes=self.memory_per_numa_node.value())
        return HostTopology(
            cpus=tuple(sorted(cpus, key=lambda c: c.id)),
            memory=dict.fromkeys(range(numa_count), memory),
            basic_info=CPUBasicInfo(
                cpu_model=self.cpu_model or "",
                hyper_thread_enabled=self.threads_per_core > 1,
                turbo_enabled=self.turbo_enabled,
                vendor_id=self.vendor_id,
            ),
        )
