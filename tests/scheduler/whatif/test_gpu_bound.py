"""The largest-GPU search cut by counting (``gpu_bound``) answers as the search that solves every
per-pod amount: on random clusters, the bound is never below an amount that fits, and the answer
is the largest amount the solver places."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.whatif.context import WhatIfContext
from scheduler.whatif.gpu_bound import gpu_bound
from scheduler.whatif.largest import largest_gpu
from scheduler.whatif.mutate import with_gpu
from scheduler.whatif.probe import probe
from scheduler.whatif.request import WhatIfRequest
from scheduler.whatif.workload import job_of_objects
from tests.scheduler.whatif.cluster import GPU, HIGH, LOW, apply, gang, pod, running, topology_backend, until

SCHEDULER = "koord-scheduler"
GATHERS: list[tuple[str, str] | None] = [None, ("SpineLayer", "MustGather"), ("BlockLayer", "MustGather")]


def _split_in_two_containers(member: dict[str, Any], first: int, second: int) -> None:
    """3 + 5 GPUs: with_gpu scales each container and rounds each down (to at least 1)."""
    container = member["spec"]["containers"][0]
    other = {"name": "d", "resources": {"requests": {GPU: str(second)}, "limits": {GPU: str(second)}}}
    container["resources"]["requests"][GPU] = container["resources"]["limits"][GPU] = str(first)
    member["spec"]["containers"].append(other)


@pytest.mark.parametrize("seed", range(8))
async def test_the_bounded_search_answers_as_solving_every_amount(seed: int) -> None:
    rng = random.Random(seed)
    blocks = {f"b{b}": (f"s{b // 2}", 3) for b in range(4)}
    backend = topology_backend(blocks)
    taken = 0
    for block, (_, count) in blocks.items():
        for i in range(count):
            gpus = rng.choice([0, 0, 2, 3, 5, 6, 7, 8])
            if gpus:
                apply(backend, [pod(f"low-{block}-{i}", gpus=gpus, priority=LOW, node_name=f"{block}-n{i}")])
                taken += 1
    objects = gang("train", rng.randint(2, 6), gather=rng.choice(GATHERS), priority=HIGH)
    if seed % 2:
        for member in objects[1:]:
            _split_in_two_containers(member, 3, 5)
    async with running(backend) as app:
        await until(lambda: len(list(app.cache.assigned_pods())) == taken)
        ctx = WhatIfContext.of(app.frameworks[SCHEDULER], app.cache, 10)
        request = WhatIfRequest.model_validate({"objects": objects, "timeLimitSeconds": 10})
        job = job_of_objects(request, SCHEDULER)
        values = list(range(1, 8))
        fitting = [v for v in values if (await probe(ctx, with_gpu(job, GPU, v))).fits]
        assert gpu_bound(ctx, job, GPU, values) >= max(fitting, default=0)
        found = await largest_gpu(ctx, job)
        assert found is not None
        assert found[1].value == max(fitting, default=0)
        assert found[1].complete
