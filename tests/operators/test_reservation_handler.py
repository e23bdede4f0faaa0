"""The Reservation daemon against fake indexes and a recording client: it writes the planned status
(whole object, resourceVersion kept, the scheduler's fields untouched) once per observed version,
sleeps until the next deadline, wakes on an owner pod's event, and deletes a reservation whose
retention has passed. The pure rules are tested in tests/operators/logic."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
import pytest
from kopf._cogs.aiokits import aioenums
from kubernetes_asyncio import client

from apis.core import Pod
from apis.extension.reservation import ANNOTATION_RESERVATION_ALLOCATED
from operators.config import ManagerConfig
from operators.handlers import errors
from operators.handlers.reservation import Lifecycle, Wakeups, reservation_owners, status_body
from operators.logic.reservation_status import OwnerPod

LOGGER = logging.getLogger("test")


class FakeClient:
    def __init__(self, error: BaseException | None = None) -> None:
        self.written: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str]] = []
        self.error = error

    async def replace_status(self, body: dict[str, Any]) -> None:
        if self.error is not None:
            raise self.error
        self.written.append(body)

    async def delete(self, name: str, uid: str) -> None:
        self.deleted.append((name, uid))


def _created(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def reservation_body(
    status: dict[str, Any], *, ttl: str = "1h", created: float = 0, **spec: Any
) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {
                "name": "r",
                "uid": "r-uid",
                "resourceVersion": "7",
                "creationTimestamp": _created(created),
            },
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}
                },
                "owners": [{"object": {"name": "p"}}],
                "ttl": ttl,
                **spec,
            },
            "status": status,
        }
    )


AVAILABLE = {"phase": "Available", "nodeName": "node-1", "allocatable": {"cpu": "1"}, "extra": "kept"}


def owner(node: str = "node-1") -> OwnerPod:
    pod = Pod.model_validate(
        {
            "metadata": {
                "name": "p",
                "namespace": "default",
                "uid": "p-uid",
                "annotations": {ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": "r", "uid": "r-uid"})},
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
    )
    raw: Any = pod.model_dump(by_alias=True, exclude_none=True, mode="json")
    found = reservation_owners(kopf.Body(raw))
    return found["r-uid"]


def lifecycle(fake: FakeClient, retention: int = 86400) -> Lifecycle:
    config = ManagerConfig(reservation_gc_duration_seconds=retention)
    return Lifecycle(config, fake, Wakeups())  # type: ignore[arg-type]


async def step(life: Lifecycle, body: kopf.Body, owners: list[OwnerPod], written: str | None = None) -> Any:
    return await life._step(body, kopf.Memo(), LOGGER, {"r-uid": owners}, {"node-1": [True]}, written)  # type: ignore[arg-type]


def test_status_body_replaces_only_the_fields_koord_manager_owns() -> None:
    from apis.scheduling.reservation import ReservationStatus

    body: dict[str, Any] = {
        "metadata": {"name": "r"},
        "status": {**AVAILABLE, "currentOwners": [{"name": "old"}], "allocated": {"cpu": "1"}},
    }
    new = status_body(body, ReservationStatus(phase="Available"))
    assert new["status"] == {**AVAILABLE, "phase": "Available"}  # owners and allocated removed
    assert body["status"]["currentOwners"] == [{"name": "old"}]  # the input is left alone


async def test_an_owner_makes_the_reservation_succeed_in_one_write_per_version() -> None:
    fake = FakeClient()
    life = lifecycle(fake)
    body = reservation_body(AVAILABLE)
    delay, written = await step(life, body, [owner()])
    assert written == "7"
    (sent,) = fake.written
    assert sent["metadata"]["resourceVersion"] == "7"
    assert sent["status"]["phase"] == "Succeeded"
    assert sent["status"]["currentOwners"] == [{"namespace": "default", "name": "p", "uid": "p-uid"}]
    assert sent["status"]["allocated"] == {"cpu": "1"}
    assert (sent["status"]["nodeName"], sent["status"]["extra"]) == ("node-1", "kept")
    assert 3590 < delay <= 3600.1  # the ttl's deadline
    await step(life, body, [owner()], written)
    assert len(fake.written) == 1  # the same version is not written twice


async def test_a_reservation_without_owners_writes_nothing_and_sleeps_until_it_expires() -> None:
    fake = FakeClient()
    delay, _ = await step(
        lifecycle(fake), reservation_body(AVAILABLE, ttl="10s", created=4), [owner("node-2")]
    )
    assert fake.written == []
    assert 5 < delay < 6.2


async def test_a_finished_reservation_past_its_retention_is_deleted() -> None:
    fake = FakeClient()
    finished = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _created(120)}],
    }
    delay, _ = await step(lifecycle(fake, retention=60), reservation_body(finished), [])
    assert fake.deleted == [("r", "r-uid")]
    assert delay is None
    kept = FakeClient()
    delay, _ = await step(lifecycle(kept, retention=3600), reservation_body(finished), [])
    assert kept.deleted == []
    assert 3470 < delay < 3481


@pytest.mark.parametrize(("status", "expected"), [(409, None), (503, errors.RETRY_DELAY_SECONDS)])
async def test_a_conflict_waits_for_the_next_event_and_other_errors_retry(
    status: int, expected: float | None
) -> None:
    fake = FakeClient(client.ApiException(status=status))
    delay, written = await step(lifecycle(fake), reservation_body(AVAILABLE), [owner()])
    assert (delay, written) == (expected, None)


async def test_the_daemon_wakes_on_its_owner_pods_event() -> None:
    fake = FakeClient()
    life = lifecycle(fake)
    owners: Any = {}  # the index: uid -> owner pods
    nodes: Any = {"node-1": [True]}
    setter: aioenums.FlagSetter[Any] = aioenums.FlagSetter()
    stopped = aioenums.AsyncFlagWaiter(setter)
    body = reservation_body(AVAILABLE)
    task = asyncio.create_task(
        life.run(
            body,
            stopped,
            kopf.Memo(),
            LOGGER,
            reservation_owners=owners,
            reservation_nodes=nodes,
        )
    )
    await asyncio.sleep(0.05)
    assert fake.written == []  # no owner yet: asleep until the ttl
    owners["r-uid"] = [owner()]
    annotations = {ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": "r", "uid": "r-uid"})}
    await life.on_owner_event(annotations=annotations)
    await asyncio.sleep(0.05)
    assert [w["status"]["phase"] for w in fake.written] == ["Succeeded"]
    setter.set()
    await asyncio.wait_for(task, 1)


async def test_a_bound_reservation_refuses_a_new_template_at_admission() -> None:
    life = lifecycle(FakeClient())
    old = reservation_body(AVAILABLE)
    new = reservation_body(AVAILABLE, owners=[{"object": {"name": "q"}}])
    with pytest.raises(
        kopf.AdmissionError,
        match=r"spec\.owners: Forbidden: may not change once the reservation is bound to node node-1",
    ):
        await life.validate_update(new, old)
    await life.validate_update(reservation_body(AVAILABLE, ttl="2h"), old)
