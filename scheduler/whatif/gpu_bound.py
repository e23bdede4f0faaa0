"""The largest per-pod GPU amount counting allows, before the largest-GPU search solves anything.

With ``per_pod`` of the GPU resource, each kind of member (alike in what ``with_gpu`` changes and
in what the pod then asks) takes ``min`` over the resources of ``free // need`` members on a node;
summed over the nodes of one MustGather domain, capped at the members of that kind. If no domain
holds every member so, the solver cannot place the job at that amount: its problem has a subset
of these nodes (Filter only removes nodes), the same free room (``probe.free_room`` sees the cache
as ``probe.build`` does) and more constraints (the plugins' rooms, spread, apart rules). So no
amount above the bound fits, and the search tries the bound first."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scheduler.cache.pod_info import PodInfo
from scheduler.solver import PlacementProblem
from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.mutate import with_gpu
from scheduler.whatif.probe import free_room
from scheduler.whatif.workload import Job

__all__ = ["gpu_bound"]


def gpu_bound(ctx: WhatIfContext, job: Job, resource: str, values: Sequence[int]) -> int:
    """The largest of ``values`` (ascending) at which counting leaves every member a place
    (0: none); the largest value when the problem cannot be posed (the probe says why)."""
    if not values:
        return 0
    room = free_room(ctx, job)
    if isinstance(room, str):
        return values[-1]
    kinds = _kinds(job.members)

    def fits(per_pod: int) -> bool:
        needs = [
            (count, with_gpu(job.with_members([first]), resource, per_pod).members[0])
            for first, count in kinds
        ]
        return _fits_by_count(room, needs, len(job.members))

    # Bisection: each container's amount only grows with the per-pod amount, so what counting
    # allows only shrinks.
    lo, hi, best = 0, len(values) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(values[mid]):
            best, lo = values[mid], mid + 1
        else:
            hi = mid - 1
    return best


def _kinds(members: Sequence[PodInfo]) -> list[tuple[PodInfo, int]]:
    """(the first member, how many) per kind of member alike in their requests and in what
    ``with_gpu`` edits (each container's resources) and what it adds to (init containers, the
    pod overhead)."""
    found: list[tuple[PodInfo, tuple[object, ...], int]] = []
    for member in members:
        spec = member.pod.spec
        key = (
            member.requests,
            [c.resources for c in spec.containers],
            [c.resources for c in spec.init_containers or ()],
            spec.overhead,
        )
        for index, (first, seen, count) in enumerate(found):
            if seen == key:
                found[index] = (first, seen, count + 1)
                break
        else:
            found.append((member, key, 1))
    return [(first, count) for first, _, count in found]


def _fits_by_count(room: PlacementProblem, needs: Sequence[tuple[int, PodInfo]], total: int) -> bool:
    resources = room.resources
    domains = room.must_gather_domains
    for nodes in domains.values():
        if not nodes:
            continue
        free = np.maximum(np.array([n.free.values for n in nodes], dtype=np.int64), 0)
        placed = 0
        for count, pod in needs:
            fits = np.full(len(nodes), count, dtype=np.int64)
            for column, name in enumerate(resources):
                need = pod.requests.get(name, 0)
                if need > 0:
                    np.minimum(fits, free[:, column] // need, out=fits)
            placed += min(count, int(fits.sum()))
        if placed >= total:
            return True
    return False
