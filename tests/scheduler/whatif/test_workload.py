"""From a request's manifests to one job: gangs by PodGroup, annotations or labels, workloads
expanded, one job per request."""

from __future__ import annotations

from typing import Any

import pytest

from apis.core import PriorityClass
from scheduler.whatif.priorities import PriorityClasses
from scheduler.whatif.request import RequestError, WhatIfRequest
from scheduler.whatif.workload import UID_PREFIX, Job, job_of_objects
from tests.scheduler.whatif.cluster import gang, pod


def _job(objects: list[dict[str, Any]], classes: PriorityClasses | None = None) -> Job:
    return job_of_objects(WhatIfRequest.model_validate({"objects": objects}), "koord-scheduler", classes)


def test_a_pod_group_makes_its_pods_one_gang_in_rank_order_with_made_up_uids() -> None:
    objects = gang("train", 3, min_member=2, gather=("BlockLayer", "MustGather"))
    objects[1:] = reversed(objects[1:])
    job = _job(objects)
    assert job.id == "default/train"
    assert job.gang
    assert job.min_member == 2
    assert [m.name for m in job.members] == ["train-0", "train-1", "train-2"]
    assert all(m.uid.startswith(UID_PREFIX) for m in job.members)
    assert job.spec is not None
    assert job.spec.gather_strategy is not None
    assert job.spec.gather_strategy[0].layer == "BlockLayer"


def test_koordinator_gang_annotations_make_a_gang() -> None:
    members = [
        pod(
            f"w-{i}",
            annotations={
                "gang.scheduling.koordinator.sh/name": "g",
                "gang.scheduling.koordinator.sh/min-available": "2",
            },
        )
        for i in range(3)
    ]
    job = _job(members)
    assert (job.id, job.min_member, len(job.members), job.gang) == ("default/g", 2, 3, True)


def test_a_job_template_is_expanded_and_pods_of_no_gang_need_every_pod() -> None:
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "etl", "namespace": "data"},
        "spec": {"parallelism": 4, "template": {"spec": pod("t")["spec"]}},
    }
    job = _job([batch])
    assert [m.key for m in job.members] == [f"data/etl-{i}" for i in range(4)]
    assert not job.gang
    assert job.min_member == 4


def test_two_gangs_or_a_gang_and_strays_are_refused_as_more_than_one_job() -> None:
    with pytest.raises(RequestError) as two:
        _job([*gang("a", 1)[1:], *gang("b", 1)[1:]])
    assert two.value.field == "objects"
    assert "gangs a, b" in str(two.value)
    with pytest.raises(RequestError) as stray:
        _job([*gang("a", 1)[1:], pod("stray")])
    assert "others to none" in str(stray.value)


def test_a_gang_short_of_its_min_member_is_refused() -> None:
    with pytest.raises(RequestError) as raised:
        _job(gang("train", 2, min_member=3))
    assert "needs 3 members" in str(raised.value)


def test_a_priority_class_sets_priority_and_preemption_policy_unless_the_pod_says() -> None:
    classes = PriorityClasses()
    classes.by_name["gentle"] = PriorityClass.model_validate(
        {"metadata": {"name": "gentle"}, "value": 77, "preemptionPolicy": "Never"}
    )
    member = pod("p")
    del member["spec"]["priority"]
    member["spec"]["priorityClassName"] = "gentle"
    job = _job([member], classes)
    assert job.members[0].priority == 77
    assert job.members[0].pod.spec.preemption_policy == "Never"
