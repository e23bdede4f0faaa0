"""PodMigrationJob rules the CRD schema does not express (its ``mode`` is a plain string):
a job the descheduler could not run is refused, naming the field."""

from __future__ import annotations

from apis.scheduling.podmigrationjob import PodMigrationJob

__all__ = ["MODES", "validate"]

MODES = ("ReservationFirst", "EvictDirectly")


def validate(job: PodMigrationJob) -> list[str]:
    problems: list[str] = []
    if job.spec is None:
        return ["spec: required"]
    if job.spec.mode and job.spec.mode not in MODES:
        problems.append(f"spec.mode: {job.spec.mode!r} is not one of {', '.join(MODES)}")
    ref = job.spec.pod_ref
    if not ref.namespace:
        problems.append("spec.podRef.namespace: required")
    if not ref.name:
        problems.append("spec.podRef.name: required")
    return problems
