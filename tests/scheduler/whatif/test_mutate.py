"""Edited members stay each one's own: an edit of the spec alone is done once per distinct spec and
shared by the members alike, and each member keeps its name, uid, labels and the rest of its own spec."""

from __future__ import annotations

from apis.meta import Taint
from scheduler.whatif.mutate import with_gpu, with_quota, with_toleration
from scheduler.whatif.request import WhatIfRequest
from scheduler.whatif.workload import Job, job_of_objects
from tests.scheduler.whatif.cluster import GPU, gang


def _job() -> Job:
    objects = gang("train", 4)
    objects[2]["spec"]["nodeSelector"] = {"zone": "a"}  # its spec is its own
    objects[3]["spec"]["containers"][0]["resources"]["requests"][GPU] = "6"
    return job_of_objects(WhatIfRequest.model_validate({"objects": objects}), "koord-scheduler")


def test_fewer_gpus_keep_each_members_identity_and_own_spec() -> None:
    job = _job()
    smaller = with_gpu(job, GPU, 4)
    assert [m.key for m in smaller.members] == [m.key for m in job.members]
    assert [m.uid for m in smaller.members] == [m.uid for m in job.members]
    assert [m.annotations for m in smaller.members] == [m.annotations for m in job.members]
    assert [m.requests[GPU] for m in smaller.members] == [4, 4, 4, 4]
    assert [m.pod.spec.node_selector for m in smaller.members] == [None, {"zone": "a"}, None, None]
    assert smaller.members[0].pod.spec is smaller.members[3].pod.spec  # alike: edited once
    assert smaller.members[0].pod.spec is not smaller.members[1].pod.spec
    assert [m.requests[GPU] for m in job.members] == [8, 8, 6, 8]  # the job itself is untouched


def test_a_toleration_is_added_to_every_member_and_a_quota_label_too() -> None:
    job = _job()
    taint = Taint(key="dedicated", value="ml", effect="NoSchedule")
    tolerant = with_toleration(job, taint)
    assert all(
        [t.key for t in m.pod.spec.tolerations or ()].count("dedicated") == 1 for m in tolerant.members
    )
    assert [m.pod.spec.node_selector for m in tolerant.members] == [None, {"zone": "a"}, None, None]
    assert all(m.pod.spec.tolerations is None for m in job.members)
    moved = with_quota(job, "team-b")
    assert [m.labels.get("quota.scheduling.koordinator.sh/name") for m in moved.members] == ["team-b"] * 4
    assert [m.key for m in moved.members] == [m.key for m in job.members]
