"""A node's CPUs as Koordinator's scheduler sees them (``nnr/cpu_topology.go``).

Built from the NodeResourceTopology annotation ``node.koordinator.sh/cpu-topology``: one entry per
logical CPU with its core, socket and NUMA node. Core ids are made unique across sockets as
Koordinator does (``socket << 16 | core``); NUMA node ids are kept as reported, because Linux numbers
NUMA nodes machine-wide and the NodeResourceTopology zones (``node-<id>``) use those same ids
(Koordinator also shifts the node id by the socket, so on socket 1 its CPUs match no zone).

:class:`CPUSet` reads and writes the Linux CPU list format (``"0-3,8-11"``) used by every cpuset
annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apis.cpulist import format_cpus, parse_cpus
from apis.extension import numa

__all__ = ["CPUDetail", "CPUSet", "CPUTopology"]


class CPUSet(frozenset[int]):
    """A set of logical CPU ids that prints in the Linux list format."""

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse ``"0-3,8,10-11"``; an empty or blank string is the empty set.

        Raises ValueError naming the bad part (``"3-1"``, ``"a"``, a negative or huge id).
        """
        try:
            return cls(parse_cpus(text))
        except ValueError as exc:
            raise ValueError(f"invalid cpuset: {exc}") from None

    def format(self) -> str:
        """The Linux list format, ranges collapsed and ascending: ``{0,1,2,3,8}`` -> ``"0-3,8"``."""
        return format_cpus(self)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"CPUSet({self.format()!r})"


@dataclass(frozen=True, slots=True)
class CPUDetail:
    cpu_id: int
    core_id: int
    """``socket << 16 | core``: unique on the node even when cores are numbered per socket."""
    socket_id: int
    node_id: int
    """The NUMA node id as reported (the ``node-<id>`` zone)."""


def _group(details: Iterable[CPUDetail], key: str) -> dict[int, frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for d in details:
        groups.setdefault(getattr(d, key), set()).add(d.cpu_id)
    return {k: frozenset(v) for k, v in groups.items()}


@dataclass(frozen=True, eq=False)
class CPUTopology:
    """The CPUs of one node; counts follow Koordinator's CPUTopologyBuilder."""

    details: Mapping[int, CPUDetail]
    num_cpus: int = field(init=False)
    num_cores: int = field(init=False)
    """Distinct (socket, node, core) triples."""
    num_sockets: int = field(init=False)
    num_nodes: int = field(init=False)
    """Distinct (socket, node) pairs."""
    _by_node: Mapping[int, frozenset[int]] = field(init=False, repr=False, compare=False)
    _by_socket: Mapping[int, frozenset[int]] = field(init=False, repr=False, compare=False)
    _by_core: Mapping[int, frozenset[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        details = MappingProxyType(dict(self.details))
        values = list(details.values())
        set_ = object.__setattr__
        set_(self, "details", details)
        set_(self, "num_cpus", len(details))
        set_(self, "num_cores", len({(d.socket_id, d.node_id, d.core_id) for d in values}))
        set_(self, "num_sockets", len({d.socket_id for d in values}))
        set_(self, "num_nodes", len({(d.socket_id, d.node_id) for d in values}))
        set_(self, "_by_node", MappingProxyType(_group(values, "node_id")))
        set_(self, "_by_socket", MappingProxyType(_group(values, "socket_id")))
        set_(self, "_by_core", MappingProxyType(_group(values, "core_id")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUTopology) and dict(self.details) == dict(other.details)

    def __hash__(self) -> int:
        return hash(frozenset(self.details.values()))

    @classmethod
    def build(cls, cpus: Iterable[tuple[int, int, int, int]]) -> CPUTopology:
        """From ``(cpu, core, socket, node)`` tuples as lscpu reports them (core numbered per socket
        or machine-wide); a repeated CPU id keeps its last entry, as Koordinator's map does."""
        details: dict[int, CPUDetail] = {}
        for cpu, core, socket, node in cpus:
            details[cpu] = CPUDetail(cpu_id=cpu, core_id=socket << 16 | core, socket_id=socket, node_id=node)
        return cls(details)

    @classmethod
    def from_annotation(cls, topology: numa.CPUTopology) -> CPUTopology:
        """From the parsed ``node.koordinator.sh/cpu-topology`` annotation."""
        return cls.build((c.id, c.core, c.socket, c.node) for c in topology.detail or ())

    @property
    def is_valid(self) -> bool:
        return self.num_sockets > 0 and self.num_nodes > 0 and self.num_cores > 0 and self.num_cpus > 0

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def all_cpus(self) -> CPUSet:
        return CPUSet(self.details)

    def node_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._by_node))

    def socket_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._by_socket))

    def cpus_in_nodes(self, nodes: Iterable[int]) -> CPUSet:
        return CPUSet(frozenset[int]().union(*(self._by_node.get(n, ()) for n in nodes)))

    def cpus_in_sockets(self, sockets: Iterable[int]) -> CPUSet:
        return CPUSet(frozenset[int]().union(*(self._by_socket.get(s, ()) for s in sockets)))

    def cpus_in_cores(self, cores: Iterable[int]) -> CPUSet:
        return CPUSet(frozenset[int]().union(*(self._by_core.get(c, ()) for c in cores)))

    def cores_of(self, cpus: Iterable[int]) -> frozenset[int]:
        """The core ids of the given CPUs (ids not on this node are ignored)."""
        return frozenset(self.details[c].core_id for c in cpus if c in self.details)

    def nodes_of(self, cpus: Iterable[int]) -> frozenset[int]:
        """The NUMA node ids of the given CPUs (ids not on this node are ignored)."""
        return frozenset(self.details[c].node_id for c in cpus if c in self.details)
