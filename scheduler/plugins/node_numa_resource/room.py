"""How many pods like a gang's member a node can still hold under its NUMA policy and cpusets.

The node table counts CPUs by node totals; a gang of SingleNUMANode members of 12 CPUs each fits a
node of 2 NUMA nodes x 16 CPUs twice by count but once by NUMA node. The room is counted per NUMA
node, greedily, where each member lands in one NUMA node and takes from nothing else there:

* SingleNUMANode: a member takes its whole request from one NUMA node, so the room is the sum over
  the NUMA nodes of how many members each holds by itself: the fewest of, per zone resource, the
  free amount over the request, and, for a cpuset, the CPUs the bind policy may use there over the
  member's CPUs (FullPCPUs: the CPUs of wholly free cores, taken a core at a time, so one member
  never breaks a core another could use). A Required ``singleNUMANodeExclusive`` skips NUMA nodes
  shared with a pod spanning several.
* No NUMA policy, a cpuset: the node's usable CPUs over the member's CPUs.
* BestEffort without a cpuset: the pod is always admitted, on all NUMA nodes when no narrower set
  holds it, so it fits while the NUMA nodes together have its request.

Anything else (Restricted, a BestEffort cpuset, a required SpreadByPCPUs, an exclusive CPU
policy, a 1-NUMA machine) is counted by trial: the plugin's own placement, one member after the
other, each holding what it was given (``Trial``). That costs a topology-manager admission (every
set of NUMA nodes) per member, about a millisecond on 4 NUMA nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from apis.resources import from_int_units
from scheduler.plugins.node_numa_resource.allocation import PodNUMARequest, numa_free, zone_request
from scheduler.plugins.node_numa_resource.cpu_accumulator import FULL_PCPUS, filter_for_required_policy
from scheduler.plugins.node_numa_resource.ledger import EXCLUSIVE_NONE, NodeCPUAllocation
from scheduler.plugins.node_numa_resource.policy import CPURequest
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["BEST_EFFORT", "SINGLE_NUMA_NODE", "Trial", "describe_shape", "greedy_room", "trial_room"]

SINGLE_NUMA_NODE = "SingleNUMANode"
BEST_EFFORT = "BestEffort"

Trial = Callable[[NodeCPUAllocation], bool]
"""Places one more member on the scratch ledger (adding what it got); False: it does not fit."""


def greedy_room(
    options: TopologyOptions,
    ledger: NodeCPUAllocation,
    request: PodNUMARequest,
    policy: str,
    exclusive_required: bool,
    limit: int,
) -> int | None:
    """The members the node holds (at most ``limit``), or None where the greedy count does not
    apply and ``trial_room`` must count."""
    bind = request.bind
    if request.exclusive_policy not in ("", EXCLUSIVE_NONE):
        return None
    if bind.bind and (request.num_cpus <= 0 or (bind.required and bind.policy != FULL_PCPUS)):
        return None
    topology = options.cpu_topology
    usable = frozenset[int]()
    if bind.bind:
        available = ledger.available_cpus(topology, options.reserved_cpus)
        usable = filter_for_required_policy(topology, available, bind.policy if bind.required else "")
    if policy == "":
        return min(limit, len(usable) // request.num_cpus) if bind.bind else None
    ids = options.numa_ids
    free = numa_free(options, ledger, bind)
    wanted = zone_request(options, request.resources)
    if policy == BEST_EFFORT and not bind.bind and ids:
        # Always admitted, on all NUMA nodes when no narrower set holds the pod: it fits while
        # the NUMA nodes together have its request.
        return min(
            [limit, *(sum(free[n].get(name, 0) for n in ids) // amount for name, amount in wanted.items())]
        )
    if policy != SINGLE_NUMA_NODE or len(ids) < 2:
        return None
    total = 0
    for numa in ids:
        if exclusive_required and ledger.numa_status(numa) == "shared":
            continue
        there = free.get(numa, {})
        count = limit
        for name, amount in wanted.items():
            if name == "cpu" and bind.bind:
                count = min(count, there.get(name, 0) // 1000 // request.num_cpus)
            else:
                count = min(count, there.get(name, 0) // amount)
        if bind.bind:
            count = min(count, len(usable & topology.cpus_in_nodes((numa,))) // request.num_cpus)
        total += count
        if total >= limit:
            return limit
    return total


def trial_room(trial: Trial, scratch: NodeCPUAllocation, limit: int) -> int:
    """Members placed one after the other on ``scratch`` (a copy the caller gives up), at most ``limit``."""
    count = 0
    while count < limit and trial(scratch):
        count += 1
    return count


def describe_shape(requests: Mapping[str, int], cpu: CPURequest) -> str:
    """The shape in words (also the key pods share room under): ``pods of cpu 12 + memory 1Gi by
    NUMA node``."""
    amounts = " + ".join(
        f"{name} {from_int_units(name, amount)}"
        for name, amount in sorted(requests.items())
        if amount > 0 and name != "pods"
    )
    cpuset = f" with {cpu.bind_policy or 'a'} cpuset" if cpu.bind else ""
    return f"pods of {amounts}{cpuset} by NUMA node"
