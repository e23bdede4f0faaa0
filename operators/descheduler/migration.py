"""The MigrationController: the framework's evictor (it writes PodMigrationJobs, it evicts
nothing itself), the arbitrator that admits jobs, the reconciler step that carries one out, and
the scavenger. The decisions are in ``operators.descheduler.logic``; this module reads the caches,
calls them, and applies what they decide through the API."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes_asyncio import client as k8s

from apis.client.backend import BackendError
from apis.client.eviction import EvictionRequest, Evictor, PodToEvict
from apis.core import Pod
from apis.scheduling.podmigrationjob import PodMigrationJob
from operators.descheduler.api import DeschedulerApi, NotFoundError
from operators.descheduler.config import MigrationControllerArgs
from operators.descheduler.framework import EvictOptions
from operators.descheduler.informers import Store
from operators.descheduler.logic import filters
from operators.descheduler.logic.arbitration import arbitrate, passed, pod_of_job
from operators.descheduler.logic.limits import TokenBucket
from operators.descheduler.logic.object_limiter import ObjectLimiter
from operators.descheduler.logic.reconcile import (
    FAILED,
    FAILED_CREATE_RESERVATION,
    FORBIDDEN_MIGRATE_POD,
    PENDING,
    RESERVATION_CREATED,
    RESERVATION_FIRST,
    Observed,
    set_condition,
    step,
    ttl_seconds,
)
from operators.descheduler.logic.view import (
    ACTIVE_PHASES,
    ANNOTATION_EVICT_REASON,
    ANNOTATION_EVICT_TRIGGER,
    ANNOTATION_JOB_CREATED_BY,
    ANNOTATION_PASSED_ARBITRATION,
    job_phase,
    job_targets,
)

__all__ = ["LABEL_EVICT_POLICY", "MigrationController"]

log = logging.getLogger(__name__)

LABEL_EVICT_POLICY = "koordinator.sh/evict-policy"
RETRY = 5.0
"""Seconds before a reconcile that failed on the API server (or a refused eviction) is tried again."""
SCAVENGE_GRACE = timedelta(minutes=5)
SCAVENGE_WITHOUT_TTL = timedelta(minutes=30)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class MigrationController:
    name = "MigrationController"

    def __init__(
        self,
        args: MigrationControllerArgs,
        store: Store,
        api: DeschedulerApi,
        evictions: Evictor,
        *,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.args = args
        self._store = store
        self._api = api
        self._evictions = evictions
        self._clock = clock
        self._now = now
        self.id = str(uuid.uuid4())
        """``koordinator.sh/job-created-by`` of the jobs this process creates."""
        self.limiter = ObjectLimiter(args)
        self._evict_bucket = TokenBucket(args.evict_qps, args.evict_burst, updated=clock())

    # ------------------------------------------------------------------ the framework's evictor

    def refusal(self, pod: Pod) -> str | None:
        """Why the pod may not get a migration job now, None when it may (Koordinator's Filter)."""
        active = [job for job in self._store.jobs() if job_phase(job) in ACTIVE_PHASES]
        if any(job_targets(job, pod) for job in active):
            return "pod already has an active migration job"
        if (
            self.args.default_job_mode == RESERVATION_FIRST
            and pod.spec.scheduler_name not in self.args.scheduler_names
        ):
            return f"pod's scheduler {pod.spec.scheduler_name!r} is not one of schedulerNames"
        return filters.non_retryable(pod, self.args, self._store) or filters.retryable(
            pod, self.args, self._store, active
        )

    def filter(self, pod: Pod) -> bool:
        return self.refusal(pod) is None

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return True

    async def evict(self, pod: Pod, options: EvictOptions) -> bool:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        if self.args.dry_run:
            log.info("dry run: would migrate %s (%s: %s)", key, options.plugin_name, options.reason)
            return True
        reason = self.refusal(pod)
        if reason is None and not self.limiter.allows(pod, self._store.workload_of(pod), self._clock()):
            reason = "the object limiter of its workload or namespace has no token"
        if reason is not None:
            log.info("not migrating %s: %s", key, reason)
            return False
        try:
            job = await self._api.create_job(self.job_body(pod, options))
        except k8s.ApiException as exc:
            log.warning("could not create a migration job for %s: %s", key, exc.reason)
            return False
        self._store.upsert_job(job)  # the next filter of this round must see it
        log.info("created migration job %s for %s", job.metadata.name, key)
        return True

    def job_body(self, pod: Pod, options: EvictOptions) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "paused": False,
            "ttl": self.args.default_job_ttl,
            "mode": self.args.default_job_mode,
            "podRef": {
                "namespace": pod.metadata.namespace,
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
            },
        }
        if self.args.default_delete_options:
            spec["deleteOptions"] = self.args.default_delete_options
        if options.reservation is not None:
            # A Reservation already placed for the replacement (a plan that reserved every move
            # first): the job uses it, ReservationFirst, instead of creating its own.
            spec["mode"] = "ReservationFirst"
            spec["reservationOptions"] = {"reservationRef": {"name": options.reservation}}
        return {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {
                "name": str(uuid.uuid4()),
                "annotations": {
                    ANNOTATION_EVICT_REASON: options.reason,
                    ANNOTATION_EVICT_TRIGGER: options.plugin_name,
                    ANNOTATION_JOB_CREATED_BY: self.id,
                },
            },
            "spec": spec,
        }

    # ------------------------------------------------------------------ arbitration

    async def arbitrate_once(self) -> None:
        waiting = [
            job
            for job in self._store.jobs()
            if job_phase(job) in ("", "Pending") and not passed(job) and not (job.spec and job.spec.paused)
        ]
        if not waiting:
            return
        verdict = arbitrate(waiting, self.args, self._store)
        for job in verdict.admitted:
            await self._write(job, {"metadata": {"annotations": {ANNOTATION_PASSED_ARBITRATION: "true"}}})
        for job, reason in verdict.failed:
            status = {"phase": FAILED, "reason": FORBIDDEN_MIGRATE_POD, "message": reason}
            await self._write(job, {"status": status}, status=True)
        for job, reason in verdict.waiting:
            log.debug("migration job %s waits: %s", job.metadata.name, reason)

    async def _write(self, job: PodMigrationJob, patch: dict[str, Any], *, status: bool = False) -> None:
        try:
            self._store.upsert_job(await self._api.patch_job(job.metadata.name or "", patch, status=status))
        except NotFoundError:
            self._store.delete_job(job.metadata.name or "")
        except k8s.ApiException as exc:
            log.warning("could not update migration job %s: %s", job.metadata.name, exc.reason)

    # ------------------------------------------------------------------ reconcile

    async def reconcile(self, name: str) -> float | None:
        """One step of the job; seconds until the next, None when there is nothing to wait for."""
        job = self._store.job(name)
        if job is None or job.spec is None:
            return None
        ref = job.spec.pod_ref
        pod = self._store.pod(ref.namespace or "", ref.name or "")
        if pod is None and ref.namespace and ref.name and job_phase(job) in ("", PENDING):
            # Kopf's watches have no common sync point: a job may be listed before its pod (a
            # descheduler that just started). Ask the API server before failing it MissingPod.
            try:
                raw = await self._api.list_pod(ref.namespace, ref.name)
            except BackendError:
                return RETRY
            if raw is not None:
                raw.setdefault("apiVersion", "v1")
                raw.setdefault("kind", "Pod")
                self._store.upsert_pod(raw)
                pod = self._store.pod(ref.namespace, ref.name)
        self._store.origin(job)  # remember its node and workload before the pod goes
        options = job.spec.reservation_options
        reservation_name = options.reservation_ref.name if options and options.reservation_ref else None
        try:
            reservation = await self._api.get_reservation(reservation_name) if reservation_name else None
        except k8s.ApiException:
            return RETRY
        bound_pod = None
        owners = (reservation.status.current_owners if reservation and reservation.status else None) or []
        if owners:
            bound_pod = self._store.pod(owners[0].namespace or "", owners[0].name or "")
        workload = self._store.workload_of(pod) if pod is not None else None
        observed = Observed(
            job=job,
            pod=pod,
            reservation=reservation,
            bound_pod=bound_pod,
            now=self._now(),
            default_mode=self.args.default_job_mode,
            pod_spec=self._store.pod_spec(ref.namespace or "", ref.name or ""),
            limiter_allows=pod is None or self.limiter.allows(pod, workload, self._clock()),
        )
        result = step(observed)
        try:
            if result.create_reservation is not None:
                try:
                    await self._api.create_reservation(result.create_reservation)
                except k8s.ApiException as exc:
                    result.spec_patch = {}
                    result.requeue = RETRY
                    set_condition(
                        result.status,
                        RESERVATION_CREATED,
                        False,
                        FAILED_CREATE_RESERVATION,
                        str(exc.reason),
                        observed.now,
                    )
            if result.delete_reservation and reservation_name:
                await self._api.delete_reservation(reservation_name)
            if result.evict:
                assert pod is not None
                if not self._evict_bucket.take(self._clock()):
                    return 1.0 / self.args.evict_qps  # too many evictions: nothing written, try again
                if not await self._evict(pod, job):
                    return RETRY
                self.limiter.track(pod, workload, self._clock())
            if result.spec_patch:
                await self._write(job, {"spec": result.spec_patch})
            if result.status != (job.status or None):
                wire = result.status.model_dump(by_alias=True, exclude_none=True, mode="json")
                await self._write(job, {"status": wire}, status=True)
        except k8s.ApiException as exc:
            log.warning("migration job %s: %s", name, exc.reason)
            return RETRY
        return result.requeue

    async def _evict(self, pod: Pod, job: PodMigrationJob) -> bool:
        labels = {**(job.metadata.labels or {}), **(pod.metadata.labels or {})}
        policy = labels.get(LABEL_EVICT_POLICY) or self.args.eviction_policy
        reason = (job.metadata.annotations or {}).get(ANNOTATION_EVICT_REASON) or "migration requested"
        request = EvictionRequest(
            pod=PodToEvict(pod),
            reason="Evicted",
            message=f"koord-descheduler: PodMigrationJob {job.metadata.name}: {reason}",
            node=pod.spec.node_name or "",
            action="Descheduling",
            delete=policy == "Delete",
            soft=policy == "SoftEviction",
        )
        try:
            return await self._evictions.evict(request)
        except BackendError as exc:
            log.warning("could not evict %s/%s: %s", pod.metadata.namespace, pod.metadata.name, exc)
            return False

    # ------------------------------------------------------------------ clean-up

    async def scavenge_once(self) -> None:
        """Delete jobs (and their reservations) older than ttl + 5m, or 30m without a ttl."""
        now = self._now()
        for job in self._store.jobs():
            created = job.metadata.creation_timestamp
            if created is None:
                continue
            ttl = ttl_seconds(job)
            limit = timedelta(seconds=ttl) + SCAVENGE_GRACE if ttl > 0 else SCAVENGE_WITHOUT_TTL
            if now - created <= limit:
                continue
            try:
                await self.delete_reservation_of(job)
                await self._api.delete_job(job.metadata.name or "")
            except k8s.ApiException as exc:
                log.warning("scavenger: could not delete migration job %s: %s", job.metadata.name, exc.reason)
                return

    async def delete_reservation_of(self, job: PodMigrationJob) -> None:
        """The reservation this controller created for the job (named after its uid); a
        reservation the user named in ``reservationRef`` is theirs and stays."""
        options = job.spec.reservation_options if job.spec else None
        name = options.reservation_ref.name if options and options.reservation_ref else None
        if name and name == job.metadata.uid:
            await self._api.delete_reservation(name)

    async def scale_replicas(self, api_version: str, kind: str, namespace: str, name: str) -> int:
        return await self._api.scale_replicas(api_version, kind, namespace, name)

    def pod_of(self, job: PodMigrationJob) -> Pod | None:
        return pod_of_job(job, self._store)
