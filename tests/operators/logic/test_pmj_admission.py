"""PodMigrationJob admission: an unknown mode or an incomplete podRef is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.logic.admission import review


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": "j"},
        "spec": {"podRef": {"namespace": "default", "name": "p"}, **spec},
    }


@pytest.mark.parametrize("mode", [None, "ReservationFirst", "EvictDirectly"])
def test_both_modes_and_the_default_are_accepted(mode: str | None) -> None:
    assert review(PodMigrationJob, _job(mode=mode)).allowed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"mode": "EvictionDirectly"},
            "spec.mode: 'EvictionDirectly' is not one of ReservationFirst, EvictDirectly",
        ),
        ({"podRef": {"name": "p"}}, "spec.podRef.namespace: required"),
        ({"podRef": {"namespace": "default"}}, "spec.podRef.name: required"),
        ({"ttl": "5 minutes"}, "spec.ttl"),
    ],
)
def test_an_invalid_job_is_refused_naming_the_field(spec: dict[str, Any], message: str) -> None:
    result = review(PodMigrationJob, _job(**spec))
    assert not result.allowed
    assert message in result.message()
