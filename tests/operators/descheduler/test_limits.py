"""The max formula (v1.6 rounding), the token buckets and the object limiter."""

from __future__ import annotations

import pytest

from apis.core import Pod
from operators.descheduler.config import MigrationControllerArgs
from operators.descheduler.logic.limits import TokenBucket, max_allowed
from operators.descheduler.logic.object_limiter import ObjectLimiter
from operators.descheduler.logic.view import Workload
from tests.operators.descheduler.helpers import pod_body


@pytest.mark.parametrize(
    ("value", "replicas", "expected"),
    [
        (None, 1, 1),
        (None, 3, 1),
        (None, 4, 2),
        (None, 10, 2),
        (None, 11, 1),  # > 10: 10% rounded down
        (None, 100, 10),
        (None, 0, 0),  # capped at replicas
        ("10%", 5, 1),  # 0.5 rounds down to 0, raised to 1 (v1.6)
        ("50%", 5, 2),  # rounded down, not up
        (0, 5, 1),  # an explicit 0 is 1 too
        (3, 2, 2),  # capped at replicas
        (2, 10, 2),
        ("100%", 4, 4),
    ],
)
def test_max_allowed(value: int | str | None, replicas: int, expected: int) -> None:
    assert max_allowed(value, replicas) == expected


def test_token_bucket_starts_full_and_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=0.5, burst=2, updated=0.0)
    assert bucket.take(0.0)
    assert bucket.take(0.0)
    assert not bucket.take(0.0)
    assert not bucket.allows(1.0)  # half a token
    assert bucket.take(2.0)
    assert not bucket.allows(2.0)


def _pod(name: str, namespace: str = "default") -> Pod:
    return Pod.model_validate(pod_body(name, namespace=namespace))


def test_workload_limiter_paces_evictions_by_max_migrating_over_duration() -> None:
    # 100 replicas with the defaults: 10 per 300 s, one token to start with (burst 0 -> 1).
    limiter = ObjectLimiter(MigrationControllerArgs())
    workload = Workload("w", "Deployment", "default", "d", 100, ())
    pod = _pod("a")
    assert limiter.allows(pod, workload, 0.0)
    limiter.track(pod, workload, 0.0)
    assert not limiter.allows(pod, workload, 29.0)
    assert limiter.allows(pod, workload, 30.0)
    # Another workload has a bucket of its own; a bare pod has none.
    assert limiter.allows(_pod("b"), Workload("x", "Deployment", "default", "e", 100, ()), 1.0)
    assert limiter.allows(_pod("c"), None, 1.0)


def test_namespace_limiter_is_tracked_beside_the_workload_one() -> None:
    args = MigrationControllerArgs.model_validate(
        {
            "objectLimiters": {
                "workload": {"duration": "10s", "maxMigrating": 0},
                "namespace": {"duration": "10s", "maxMigrating": 1},
            }
        }
    )
    limiter = ObjectLimiter(args)
    workload = Workload("w", "Deployment", "default", "d", 10, ())
    limiter.track(_pod("a"), workload, 0.0)
    assert not limiter.allows(_pod("b"), None, 1.0)  # same namespace
    assert limiter.allows(_pod("c", "other"), None, 1.0)
    assert limiter.allows(_pod("b"), None, 10.0)


def test_an_unused_bucket_is_forgotten_after_one_and_a_half_durations() -> None:
    args = MigrationControllerArgs.model_validate(
        {"objectLimiters": {"workload": {"duration": "10s", "maxMigrating": 1}}}
    )
    limiter = ObjectLimiter(args)
    workload = Workload("w", "Deployment", "default", "d", 10, ())
    limiter.track(_pod("a"), workload, 0.0)
    limiter.track(_pod("a"), workload, 0.0)  # in debt: -1 tokens
    assert not limiter.allows(_pod("a"), workload, 14.0)
    assert limiter.allows(_pod("a"), workload, 30.0)  # forgotten, a new full bucket
