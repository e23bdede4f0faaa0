"""Lower bounds of job-level preemption by counting, per MustGather domain.

With MustGather every member lands in one domain of its layer, so what a domain can offer bounds
every selection placed there. Counting relaxes the rest (each pod group alone, summed over the
domain's nodes; budgets, releases and packing ignored), so each bound holds for every selection:

* `fits_by_counting`: with every victim of priority rank <= r gone, some domain has room for
  each pod group: the least such r bounds the highest victim rank (`rank_lower_bound`).
* `domain_floors`: per domain, a tuple no selection in it can beat term by term, hence not
  lexicographically either (`preemption_problem.objective`): the least rank above; no PDB
  violation; the fewest victim jobs, and the fewest victims, whose requests cover what the
  members lack beyond the domain's free room (each resource alone). A domain whose floor is
  above a selection already in hand cannot hold a better one (`victim_greedy`, `victim_cpsat`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scheduler.solver.preemption_problem import PreemptionProblem
from scheduler.solver.problem import NodeSpec

__all__ = [
    "Domain",
    "Floor",
    "domain_floors",
    "domains_of",
    "fewest",
    "fits_by_counting",
    "least_ranks",
    "rank_lower_bound",
]

IntArray = npt.NDArray[np.int64]
Domain = tuple[str, ...]
Floor = tuple[int, int, int, int, int]
"""At least (highest victim rank, PDB violations, victim jobs, pods of those jobs, evictions)."""


def domains_of(problem: PreemptionProblem) -> Mapping[Domain, Sequence[NodeSpec]]:
    """The nodes of each domain of the deepest MustGather layer, domains sorted (one domain
    ``()`` of every node without MustGather)."""
    return problem.placement.must_gather_domains


def fewest(amounts: Sequence[Sequence[int]], lack: Sequence[int]) -> int:
    """The fewest of ``amounts`` whose sum covers ``lack`` in every resource, by counting each
    resource alone (a lower bound)."""
    most = 0
    for r, need in enumerate(lack):
        if need <= 0:
            continue
        got, k = 0, 0
        for a in sorted((a[r] for a in amounts), reverse=True):
            if got >= need:
                break
            got, k = got + a, k + 1
        most = max(most, k)
    return most


def _fewest_rows(amounts: IntArray, lack: IntArray) -> int:
    """`fewest` over the rows of ``amounts`` (one row per victim or job), vectorised."""
    most = 0
    for r in np.flatnonzero(lack > 0):
        running = np.cumsum(np.sort(amounts[:, r])[::-1])
        at = int(np.searchsorted(running, lack[r]))  # the first prefix that covers the lack
        most = max(most, at + 1 if at < running.size else running.size)
    return most


@dataclass(frozen=True)
class _Arrays:
    """The problem as arrays over its nodes, grouped by domain (``domain[i]``: node i's domain)."""

    keys: list[Domain]
    domain: IntArray
    free: IntArray
    victim_node: IntArray
    victim_rank: IntArray
    victim_request: IntArray
    usable_from: list[IntArray]
    """Per pod group and node: the least rank whose victims' going lets the group use the node
    (0: no blocker; a node failing the group's Filters: past the top rank)."""

    @staticmethod
    def of(problem: PreemptionProblem) -> _Arrays:
        placement = problem.placement
        domains = domains_of(problem)
        nodes = [node for members in domains.values() for node in members]
        index = {node.name: i for i, node in enumerate(nodes)}
        width = len(placement.resources)
        ranks = problem.priority_ranks
        never = max(ranks.values(), default=0) + 1
        usable_from = []
        for group in placement.pod_groups:
            allowed = placement.feasible_nodes.get(group.name)
            start = np.array(
                [0 if allowed is None or node.name in allowed else never for node in nodes], dtype=np.int64
            )
            for (name, node_name), uids in problem.blockers.items():
                at = index.get(node_name)
                if name == group.name and at is not None and start[at] < never:
                    start[at] = max(ranks[problem.victim_by_uid[uid].priority] for uid in uids)
            usable_from.append(start)
        victims = problem.victims
        return _Arrays(
            keys=list(domains),
            domain=np.repeat(
                np.arange(len(domains), dtype=np.int64), [len(members) for members in domains.values()]
            ),
            free=np.array([node.free.values for node in nodes], dtype=np.int64).reshape(len(nodes), width),
            victim_node=np.array([index[v.node] for v in victims], dtype=np.int64),
            victim_rank=np.array([ranks[v.priority] for v in victims], dtype=np.int64),
            victim_request=np.array([v.request.values for v in victims], dtype=np.int64).reshape(
                len(victims), width
            ),
            usable_from=usable_from,
        )


def least_ranks(problem: PreemptionProblem) -> dict[Domain, int | None]:
    """Each domain's least rank r such that, once every victim of rank <= r is gone, every pod
    group finds room for its members summed over the domain's nodes (a (group, node) whose
    blockers do not all go is no room); None when not even every victim gone makes room. The
    victims go rank by rank onto one running room, every domain at once."""
    return _least_ranks(problem, _Arrays.of(problem))


def _least_ranks(problem: PreemptionProblem, arrays: _Arrays) -> dict[Domain, int | None]:
    groups = problem.placement.pod_groups
    room = arrays.free.copy()
    found: dict[Domain, int | None] = dict.fromkeys(arrays.keys)
    open_ = np.ones(len(arrays.keys), dtype=np.bool_)
    for rank in range(max(problem.priority_ranks.values(), default=0) + 1):
        going = arrays.victim_rank == rank
        np.add.at(room, arrays.victim_node[going], arrays.victim_request[going])
        fits = open_.copy()
        for group, usable_from in zip(groups, arrays.usable_from, strict=True):
            need = np.asarray(group.request.values, dtype=np.int64)
            asked = need > 0
            cap = np.full(room.shape[0], group.count, dtype=np.int64)
            if asked.any():
                cap = np.minimum(cap, (np.maximum(room[:, asked], 0) // need[asked]).min(axis=1))
            cap[usable_from > rank] = 0
            total = np.zeros(len(arrays.keys), dtype=np.int64)
            np.add.at(total, arrays.domain, cap)
            fits &= total >= group.count
        for d in np.flatnonzero(fits):
            found[arrays.keys[int(d)]] = rank
        open_ &= ~fits
        if not open_.any():
            break
    return found


def fits_by_counting(problem: PreemptionProblem, rank: int) -> bool:
    """Whether, once every victim of priority rank <= ``rank`` is gone, some MustGather domain
    (the whole cluster without MustGather) has room for every pod group, counted group by group
    (`rank_lower_bound`'s test)."""
    return any(r is not None and r <= rank for r in least_ranks(problem).values())


def rank_lower_bound(problem: PreemptionProblem) -> int:
    """The least highest-victim rank by counting: the smallest rank r such that `fits_by_counting`,
    so no selection can do with a lower one. Returns one above the top rank when even that does
    not suffice."""
    found = [r for r in least_ranks(problem).values() if r is not None]
    return min(found) if found else max(problem.priority_ranks.values(), default=0) + 1


def domain_floors(problem: PreemptionProblem) -> dict[Domain, Floor | None]:
    """Each domain's floor (None: no selection fits there, even with every victim gone)."""
    placement = problem.placement
    arrays = _Arrays.of(problem)
    ranks = _least_ranks(problem, arrays)
    demand = np.zeros(len(placement.resources), dtype=np.int64)
    for group in placement.pod_groups:
        demand += group.count * np.asarray(group.request.values, dtype=np.int64)
    room = np.zeros((len(arrays.keys), len(placement.resources)), dtype=np.int64)
    np.add.at(room, arrays.domain, np.maximum(arrays.free, 0))
    victim_domain = arrays.domain[arrays.victim_node]
    jobs = {job: i for i, job in enumerate(dict.fromkeys(v.job for v in problem.victims))}
    victim_job = np.array([jobs[v.job] for v in problem.victims], dtype=np.int64)
    out: dict[Domain, Floor | None] = {}
    for d, domain in enumerate(arrays.keys):
        rank = ranks[domain]
        if rank is None:
            out[domain] = None
            continue
        lack = np.maximum(demand - room[d], 0)
        here = victim_domain == d
        requests = arrays.victim_request[here]
        _, job_of = np.unique(victim_job[here], return_inverse=True)
        per_job = np.zeros((int(job_of.max()) + 1 if job_of.size else 0, requests.shape[1]), dtype=np.int64)
        np.add.at(per_job, job_of, requests)
        fewest_jobs = _fewest_rows(per_job, lack)
        out[domain] = (rank, 0, fewest_jobs, fewest_jobs, _fewest_rows(requests, lack))
    return out
