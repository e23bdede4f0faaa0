"""NodeNUMAResource's informed state: each node's topology options and allocation ledger.

The records (pod -> node, cpuset, per-NUMA resources, exclusive policy) are the truth; a node's
ledger is rebuilt from them whenever its NodeResourceTopology changes, so a pod read back before its
node's NRT arrived is counted once the NRT is there (Koordinator drops it until the pod's next
event, algorithms 11.7 item 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["NUMAStore", "Record"]


@dataclass(frozen=True, slots=True)
class Record:
    node: str
    cpus: frozenset[int]
    numa_resources: Mapping[int, Mapping[str, int]]
    exclusive_policy: str
    assumed: bool
    reservation: bool = False
    """Held by a Reservation (its uid) for its owners, from its ``resource-status``."""


_NOWHERE = Record("", frozenset(), {}, "None", assumed=False)


class NUMAStore:
    def __init__(self) -> None:
        self.options: dict[str, TopologyOptions] = {}
        self._ledgers: dict[str, NodeCPUAllocation] = {}
        self.records: dict[str, Record] = {}

    def set_options(self, node: str, options: TopologyOptions) -> None:
        self.options[node] = options
        self._rebuild(node)

    def remove_options(self, node: str) -> None:
        self.options.pop(node, None)
        self._ledgers.pop(node, None)

    def _rebuild(self, node: str) -> None:
        options = self.options.get(node)
        ledger = NodeCPUAllocation(options.cpu_topology if options else CPUTopology.build(()))
        for uid, record in self.records.items():
            if record.node == node:
                ledger.add(uid, record.cpus, record.numa_resources, record.exclusive_policy)
        self._ledgers[node] = ledger

    def ledger(self, node: str) -> NodeCPUAllocation:
        ledger = self._ledgers.get(node)
        if ledger is None:
            self._rebuild(node)
            ledger = self._ledgers[node]
        return ledger

    def ledger_without(self, node: str, uids: frozenset[str]) -> NodeCPUAllocation:
        """The node's ledger with ``uids`` gone (a preemption's what-if); the ledger itself when
        none of them holds anything here."""
        if not any(self.records.get(uid, _NOWHERE).node == node for uid in uids):
            return self.ledger(node)
        return self.ledger_copy(node, uids)

    def ledger_copy(self, node: str, uids: frozenset[str]) -> NodeCPUAllocation:
        """A new ledger of the node with ``uids`` gone, to place trial pods on."""
        options = self.options.get(node)
        ledger = NodeCPUAllocation(options.cpu_topology if options else CPUTopology.build(()))
        for uid, record in self.records.items():
            if record.node == node and uid not in uids:
                ledger.add(uid, record.cpus, record.numa_resources, record.exclusive_policy)
        return ledger

    def hold(self, uid: str, record: Record) -> None:
        self.release(uid)
        self.records[uid] = record
        self.ledger(record.node).add(uid, record.cpus, record.numa_resources, record.exclusive_policy)

    def release(self, uid: str) -> Record | None:
        record = self.records.pop(uid, None)
        if record is not None:
            self.ledger(record.node).release(uid)
        return record
