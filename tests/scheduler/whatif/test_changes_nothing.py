"""A what-if holds no room, nominates nothing, evicts nothing and writes nothing: the API server's
objects (its resourceVersion, every pod, PodGroup and quota, the events) and the scheduler's cache
(every node's accounting, the assigned pods, the nominations, the withdrawn pods) are the same
before and after many what-ifs of every kind, on a cluster with pending, nominated and
preemptible work."""

from __future__ import annotations

import asyncio
from typing import Any

from apis.client.backend import ELASTICQUOTAS, PODGROUPS, PODS, ResourceType
from scheduler.app import SchedulerApp
from scheduler.backend.memory import MemoryBackend
from tests.scheduler.whatif.cluster import (
    HIGH,
    LOW,
    apply,
    elastic_quota,
    gang,
    pod,
    running,
    topology_backend,
    until,
    what_if,
)

WATCHED: tuple[ResourceType[Any], ...] = (PODS, PODGROUPS, ELASTICQUOTAS)


def api_state(backend: MemoryBackend) -> dict[str, Any]:
    return {
        "resource_version": backend.resource_version,
        "objects": {
            resource.kind: sorted(
                (o.model_dump_json(exclude_none=True) for o in backend.list(resource)), key=str
            )
            for resource in WATCHED
        },
        "events": [(e.reason, e.regarding.name, e.message) for e in backend.events],
        "bindings": list(backend.bindings),
    }


def cache_state(app: SchedulerApp) -> dict[str, Any]:
    cache = app.cache
    table = cache.table

    def amounts(matrix: Any, row: int) -> dict[str, int]:
        return {r: int(matrix[row, c]) for r, c in table.column.items() if int(matrix[row, c])}

    return {
        "nodes": {
            name: (
                amounts(table.allocatable, row),
                amounts(table.requested, row),
                table.non_zero[row].tolist(),
            )
            for name, row in sorted(table.row.items())
        },
        "pods": sorted((p.uid, cache.node_of(p.uid)) for p in cache.assigned_pods()),
        "nominations": sorted((n.pod.uid, n.node) for n in cache.nominations()),
        "withdrawn": sorted(cache.withdrawn()),
        "version": cache.version,
        "generation": cache.generation,
        "queue": app.queue.counts(),
    }


async def test_many_what_ifs_change_nothing_in_the_api_server_or_the_cache() -> None:
    backend = topology_backend({"b1": ("s1", 4), "b2": ("s2", 3)})
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", max_cpu="64", max_gpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-c", max_cpu="64", max_gpu="32"))
    apply(backend, gang("old-x", 1, priority=LOW, node_names=["b1-n0"]))
    apply(backend, gang("old-y", 1, priority=LOW, node_names=["b1-n1"]))
    apply(
        backend,
        [pod("a-busy", gpus=8, node_name="b2-n0", labels={"quota.scheduling.koordinator.sh/name": "team-a"})],
    )
    async with running(backend) as app:
        # A gang no block can hold stays pending, its members known to the scheduler.
        apply(backend, gang("stuck", 4, gather=("BlockLayer", "MustGather")))
        await until(lambda: all(app.explanations.get("default", f"stuck-{i}") is not None for i in range(4)))
        # Let the scheduler settle: the quotas' figures written back (team-a's used, from a-busy;
        # team-c uses nothing, which is not written, as Koordinator), its retries and events done:
        # nothing in the API server changes for 2.5 s (2.5 rounds of the figures writer).
        await until(
            lambda: any(
                q.metadata.name == "team-a" and q.status is not None and q.status.used
                for q in backend.list(ELASTICQUOTAS)
            )
        )
        quiet_since, last = asyncio.get_running_loop().time(), api_state(backend)
        while asyncio.get_running_loop().time() - quiet_since < 2.5:
            await asyncio.sleep(0.1)
            now = api_state(backend)
            if now != last:
                quiet_since, last = asyncio.get_running_loop().time(), now
        before_api, before_cache = api_state(backend), cache_state(app)
        jobs = [
            gang("train", 4, gather=("BlockLayer", "MustGather"), priority=HIGH),  # after preemption
            gang("small", 2),  # fits now
            gang("wide", 8, min_member=3),  # fewer members
            gang("quota", 2, labels={"quota.scheduling.koordinator.sh/name": "team-a"}),  # another quota
            gang("prefer", 6, gather=("BlockLayer", "MustGather")),  # PreferGather
            gang("big", 2, gpus=16),  # fewer GPUs
        ]
        answers = [await what_if(app, job) for job in jobs for _ in range(3)]
        answers.append(await what_if(app, gang="stuck"))
        answers.append(await what_if(app, pod="stuck-1"))
        assert any(a.after_preemption is not None and a.after_preemption.victims for a in answers)
        assert any(a.fits_now.fits for a in answers)
        assert {c.kind for a in answers for c in (a.smallest_change, *a.alternatives) if c is not None} >= {
            "members",
            "quota",
            "topology",
            "gpu",
        }
        assert api_state(backend) == before_api
        assert cache_state(app) == before_cache
