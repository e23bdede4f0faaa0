"""The what-if's answers where the answer is known by construction, on the in-memory API server,
and compared with what the scheduler then does when the job is submitted."""

from __future__ import annotations

import pytest

from apis.client.backend import ELASTICQUOTAS, NODES, PODS
from scheduler.whatif.priorities import PRIORITYCLASSES
from scheduler.whatif.request import RequestError
from tests.scheduler.whatif.cluster import (
    DEFAULT_PROFILE_CONFIG,
    HIGH,
    LOW,
    apply,
    bound,
    elastic_quota,
    gang,
    gpu_node,
    names,
    pod,
    running,
    topology_backend,
    until,
    what_if,
)


async def test_a_gang_that_fits_gets_a_node_and_block_per_member_and_the_scheduler_agrees() -> None:
    backend = topology_backend({"b1": ("s1", 4), "b2": ("s1", 4)})
    async with running(backend) as app:
        job = gang("train", 4, gather=("BlockLayer", "MustGather"))
        answer = await what_if(app, job)
        assert answer.fits_now.fits, answer
        assert answer.job == "default/train"
        placed = {p.pod: p for p in answer.fits_now.placements}
        assert set(placed) == {f"default/train-{i}" for i in range(4)}
        assert len({p.node for p in placed.values()}) == 4
        assert len({p.domain["BlockLayer"] for p in placed.values()}) == 1
        assert answer.after_preemption is None
        assert answer.smallest_change is None
        apply(backend, job)
        await until(lambda: len([n for n in bound(backend) if n.startswith("train-")]) == 4)
        blocks = {node.split("-")[0] for name, node in bound(backend).items() if name.startswith("train-")}
        assert len(blocks) == 1


async def test_a_gang_fits_in_one_block_only_after_two_named_low_priority_jobs_go() -> None:
    """b1: two nodes held by the low-priority jobs old-x and old-y, two free; b2: three nodes held
    by a high-priority pod, one free. A 4-member MustGather-block gang fits only in b1, once both
    old jobs go; the scheduler then evicts exactly those."""
    backend = topology_backend({"b1": ("s1", 4), "b2": ("s1", 4)})
    apply(backend, gang("old-x", 1, priority=LOW, node_names=["b1-n0"]))
    apply(backend, gang("old-y", 1, priority=LOW, node_names=["b1-n1"]))
    for i in range(3):
        apply(backend, [pod(f"vip-{i}", priority=HIGH + 1, node_name=f"b2-n{i}")])
    async with running(backend) as app:
        job = gang("train", 4, gather=("BlockLayer", "MustGather"), priority=HIGH)
        answer = await what_if(app, job)
        assert not answer.fits_now.fits
        # Three nodes are free in all: not even the gang's members fit, wherever they went.
        assert answer.blocker is not None, answer.blocker
        assert answer.blocker.kind == "capacity", answer.blocker
        after = answer.after_preemption
        assert after is not None, after
        assert after.fits, after
        assert sorted(after.jobs) == ["default/old-x", "default/old-y"]
        assert {v.pod for v in after.victims} == {"default/old-x-0", "default/old-y-0"}
        assert all(v.priority == LOW for v in after.victims)
        assert {p.node for p in after.placements} == {f"b1-n{i}" for i in range(4)}
        assert answer.largest.members_with_preemption == 4
        # What the scheduler then does: the same victims go, the gang lands in b1.
        apply(backend, job)
        await until(lambda: len([n for n in bound(backend) if n.startswith("train-")]) == 4)
        assert {"old-x-0", "old-y-0"}.isdisjoint(names(backend))
        assert {f"vip-{i}" for i in range(3)} <= names(backend)
        assert {node for name, node in bound(backend).items() if name.startswith("train-")} == {
            f"b1-n{i}" for i in range(4)
        }


async def test_a_gang_of_8_that_fits_with_6_members_is_told_so() -> None:
    backend = topology_backend({"b1": ("s1", 6)})
    async with running(backend) as app:
        job = gang("train", 8, min_member=6)
        answer = await what_if(app, job)
        assert not answer.fits_now.fits
        assert answer.blocker is not None, answer.blocker
        assert answer.blocker.kind == "capacity", answer.blocker
        assert answer.largest.members_now == 6
        change = answer.smallest_change
        assert change is not None, change
        assert change.kind == "members", change
        assert change.members == 6, change
        assert len(change.placements) == 6
        assert answer.after_preemption is not None
        assert not answer.after_preemption.fits
        # Submitted with 6 members, the scheduler places all six.
        apply(backend, gang("train", 6, min_member=6))
        await until(lambda: len([n for n in bound(backend) if n.startswith("train-")]) == 6)


async def test_a_gang_its_quota_refuses_fits_only_under_another_quota() -> None:
    backend = topology_backend({"b1": ("s1", 4)})
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", max_cpu="64", max_gpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-b", max_cpu="64", max_gpu="4"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-c", max_cpu="64", max_gpu="32"))
    async with running(backend) as app:
        job = gang("train", 2, labels={"quota.scheduling.koordinator.sh/name": "team-a"}, gpus=8)
        apply(
            backend,
            [
                pod(
                    "a-busy",
                    gpus=8,
                    node_name="b1-n0",
                    labels={"quota.scheduling.koordinator.sh/name": "team-a"},
                )
            ],
        )
        await until(lambda: "a-busy" in {p.name for p in app.cache.assigned_pods()})
        answer = await what_if(app, job)
        assert not answer.fits_now.fits
        assert answer.fits_now.quota == "team-a"
        assert answer.fits_now.quota_fits is False
        assert answer.blocker is not None
        assert answer.blocker.kind == "quota"
        change = answer.smallest_change
        assert change is not None, change
        assert change.kind == "quota", change
        assert change.quota == "team-c", change
        assert len(change.placements) == 2
        moved = gang("train", 2, labels={"quota.scheduling.koordinator.sh/name": "team-c"}, gpus=8)
        apply(backend, moved)
        await until(lambda: len([n for n in bound(backend) if n.startswith("train-")]) == 2)


async def test_another_quota_of_the_jobs_own_namespace_comes_before_a_roomier_one_of_another_team() -> None:
    """The suggestion is the quota the job's team can move to: of the quotas with room, one in the
    job's namespace wins over a roomier one of another namespace."""
    backend = topology_backend({"b1": ("s1", 4)})
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a", max_cpu="64", max_gpu="8"))
    backend.apply(ELASTICQUOTAS, elastic_quota("team-a-spare", max_cpu="64", max_gpu="16"))
    backend.apply(ELASTICQUOTAS, elastic_quota("other-team", max_cpu="64", max_gpu="32", namespace="other"))
    async with running(backend) as app:
        job = gang("train", 2, labels={"quota.scheduling.koordinator.sh/name": "team-a"}, gpus=8)
        busy = pod(
            "a-busy", gpus=8, node_name="b1-n0", labels={"quota.scheduling.koordinator.sh/name": "team-a"}
        )
        apply(backend, [busy])
        await until(lambda: "a-busy" in {p.name for p in app.cache.assigned_pods()})
        change = (await what_if(app, job)).smallest_change
        assert change is not None
        assert (change.kind, change.quota) == ("quota", "team-a-spare"), change


async def test_a_must_gather_gang_that_fits_only_with_prefer_gather() -> None:
    """Two blocks of 3 free nodes in different spines: a 4-member MustGather-block gang fits
    neither in one block nor in one spine; PreferGather places it over both blocks."""
    backend = topology_backend({"b1": ("s1", 3), "b2": ("s2", 3)})
    async with running(backend) as app:
        job = gang("train", 4, gather=("BlockLayer", "MustGather"))
        answer = await what_if(app, job)
        assert not answer.fits_now.fits
        assert answer.blocker is not None, answer.blocker
        assert answer.blocker.kind == "topology", answer.blocker
        change = answer.smallest_change
        assert change is not None, answer
        assert change.kind == "topology", answer
        assert change.network_topology_spec == {
            "gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"}]
        }
        assert len(change.placements) == 4
        apply(backend, gang("train", 4, gather=("BlockLayer", "PreferGather")))
        await until(lambda: len([n for n in bound(backend) if n.startswith("train-")]) == 4)


async def test_a_taint_that_keeps_a_pod_out_is_named_and_its_toleration_checked() -> None:
    backend = topology_backend({"b1": ("s1", 0)})
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    backend.apply(NODES, gpu_node("t0", spine="s1", block="b1", taints=[taint]))
    async with running(backend) as app:
        answer = await what_if(app, [pod("p", gpus=4)])
        assert not answer.fits_now.fits
        assert answer.blocker is not None
        assert answer.blocker.kind == "filter"
        assert any("untolerated taint" in reason for reason in answer.blocker.reasons), answer.blocker
        change = answer.smallest_change
        assert change is not None, answer
        assert change.kind == "toleration", answer
        assert change.toleration == {
            "key": "dedicated",
            "operator": "Equal",
            "value": "training",
            "effect": "NoSchedule",
        }
        assert [p.node for p in change.placements] == ["t0"]


async def test_fewer_gpus_per_pod_when_no_node_has_as_many() -> None:
    backend = topology_backend({"b1": ("s1", 2)}, gpus=4)
    async with running(backend) as app:
        answer = await what_if(app, gang("train", 2, gpus=8))
        assert not answer.fits_now.fits
        assert answer.largest.gpu_resource == "nvidia.com/gpu"
        assert answer.largest.gpu_per_pod_now == 4
        kinds = [c.kind for c in [answer.smallest_change, *answer.alternatives] if c is not None]
        assert "gpu" in kinds, answer
        gpu = next(
            c for c in [*answer.alternatives, answer.smallest_change] if c is not None and c.kind == "gpu"
        )
        assert gpu.per_pod == 4
        assert len(gpu.placements) == 2


async def test_a_pending_gang_is_asked_by_name() -> None:
    backend = topology_backend({"b1": ("s1", 3), "b2": ("s2", 3)})
    async with running(backend) as app:
        apply(backend, gang("train", 4, gather=("BlockLayer", "MustGather")))
        await until(lambda: app.explanations.get("default", "train-0") is not None)
        by_gang = await what_if(app, gang="train")
        by_pod = await what_if(app, pod="train-2")
        for answer in (by_gang, by_pod):
            assert answer.job == "default/train"
            assert answer.members == 4
            assert not answer.fits_now.fits
            assert answer.smallest_change is not None
            assert answer.smallest_change.kind == "topology"
        assert not bound(backend)
        assert all(app.cache.nominated_node(p.metadata.uid or "") is None for p in backend.list(PODS))


async def test_a_priority_class_gives_the_job_its_priority_as_admission_would() -> None:
    backend = topology_backend({"b1": ("s1", 2)})
    backend.apply(PRIORITYCLASSES, {"metadata": {"name": "urgent"}, "value": HIGH})
    apply(backend, [pod("old", priority=LOW, node_name="b1-n0")])
    async with running(backend) as app:
        await until(lambda: app.whatif.priorities.get("urgent") is not None)
        job = gang("train", 2)
        for member in job[1:]:
            del member["spec"]["priority"]
            member["spec"]["priorityClassName"] = "urgent"
        answer = await what_if(app, job)
        assert answer.after_preemption is not None
        assert [v.pod for v in answer.after_preemption.victims] == ["default/old"]
        job[1]["spec"]["priorityClassName"] = "nonesuch"
        with pytest.raises(RequestError) as raised:
            await what_if(app, job)
        assert raised.value.field.endswith("spec.priorityClassName")


async def test_the_largest_gpu_count_per_pod_now_and_with_preemption() -> None:
    """Two 4-GPU nodes, each with a low-priority pod on 2 GPUs: 8 GPUs per member never fit, 2 fit
    now, 4 once preemption evicts the low-priority pods."""
    backend = topology_backend({"b1": ("s1", 2)}, gpus=4)
    apply(backend, [pod(f"low-{i}", gpus=2, priority=LOW, node_name=f"b1-n{i}") for i in range(2)])
    async with running(backend) as app:
        await until(lambda: len(list(app.cache.assigned_pods())) == 2)
        answer = await what_if(app, gang("train", 2, gpus=8, priority=HIGH))
        assert answer.after_preemption is not None
        assert not answer.after_preemption.fits
        assert answer.largest.gpu_resource == "nvidia.com/gpu"
        assert answer.largest.gpu_per_pod_now == 2
        assert answer.largest.gpu_per_pod_with_preemption == 4


async def test_a_plain_pod_is_told_whom_default_preemption_evicts_and_the_scheduler_agrees() -> None:
    """The default profile (no job-level preemption): b1-n0, the only node, holds two 4-GPU pods of
    low priority; a 4-GPU high-priority pod fits only once one goes, and kube-scheduler's rules
    evict the less important of the two (the other is reprieved). The what-if says so, and the
    scheduler then does exactly that."""
    backend = topology_backend({"b1": ("s1", 1)})
    apply(backend, [pod("low-0", gpus=4, priority=LOW, node_name="b1-n0")])
    apply(backend, [pod("low-1", gpus=4, priority=LOW + 1, node_name="b1-n0")])
    async with running(backend, config_text=DEFAULT_PROFILE_CONFIG) as app:
        job = [pod("urgent", gpus=4, priority=HIGH)]
        answer = await what_if(app, job)
        assert not answer.fits_now.fits
        after = answer.after_preemption
        assert after is not None, answer
        assert (after.enabled, after.fits) == (True, True), after
        assert [v.pod for v in after.victims] == ["default/low-0"]
        assert [(p.pod, p.node) for p in after.placements] == [("default/urgent", "b1-n0")]
        apply(backend, job)
        await until(lambda: bound(backend).get("urgent") == "b1-n0")
        assert names(backend) == {"low-1", "urgent"}
