"""Small CPU topologies numbered as Linux numbers an SMT machine: CPU ``t * cores + c`` is thread
``t`` of core ``c``, so the siblings of CPU 0 on a 16-core machine are 0 and 16."""

from __future__ import annotations

from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology


def make_topology(sockets: int, nodes_per_socket: int, cores_per_node: int, threads: int) -> CPUTopology:
    cores_per_socket = nodes_per_socket * cores_per_node
    total_cores = sockets * cores_per_socket
    entries = []
    for core in range(total_cores):
        socket = core // cores_per_socket
        node = core // cores_per_node
        for thread in range(threads):
            entries.append((thread * total_cores + core, core % cores_per_socket, socket, node))
    return CPUTopology.build(entries)


def two_sockets() -> CPUTopology:
    """2 sockets x 2 NUMA nodes x 8 cores x 2 threads: 64 CPUs, NUMA node n holds cores 8n..8n+7."""
    return make_topology(2, 2, 8, 2)


def small() -> CPUTopology:
    """1 socket x 1 NUMA node x 4 cores x 2 threads: 8 CPUs, siblings (c, c + 4)."""
    return make_topology(1, 1, 4, 2)


def no_smt() -> CPUTopology:
    """2 sockets x 1 NUMA node x 4 cores x 1 thread: 8 CPUs."""
    return make_topology(2, 1, 4, 1)
