"""The eviction seam: what a component asks of the one eviction service.

Job preemption, quota preemption, the quota revoke controller, reservation backfill and the
descheduler all evict through an ``Evictor``, so every eviction behaves the same: the Eviction
API with the pod's grace period, PodDisruptionBudget refusals handled one way, an optional
``DisruptionTarget`` condition, soft eviction, and an event naming the reason.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from apis.client.backend import PODS, BackendError, ClusterBackend, EventRecord, NotFound, ObjectRef
from apis.client.rbac import PolicyRule
from apis.core import Pod
from apis.extension import preemption as preemption_ext
from apis.podkey import pod_key, pod_ref

__all__ = [
    "DISRUPTION_TARGET",
    "EVICTION_RULES",
    "EvictedPod",
    "EvictionRequest",
    "EvictionService",
    "Evictor",
    "PodToEvict",
]

log = logging.getLogger(__name__)

DISRUPTION_TARGET = "DisruptionTarget"
SOFT_EVICTION_LABEL_VALUE = "true"

EVICTION_RULES = (
    PolicyRule.on(
        PODS, "create", subresource="eviction", why="Evictions go through the Eviction API (policy/v1)."
    ),
    PolicyRule.on(
        PODS,
        "patch",
        subresource="status",
        why="The DisruptionTarget condition is written on a victim before it is evicted.",
    ),
    PolicyRule.on(
        PODS,
        "delete",
        why="A victim whose PodDisruptionBudget refuses the eviction may be deleted, as kube-scheduler's "
        "preemption does.",
    ),
    PolicyRule.on(PODS, "patch", why="Soft eviction only labels and annotates the pod for a custom evictor."),
)
"""What a plugin that evicts through the ``Evictor`` adds to its own ``RBAC``."""


class EvictedPod(Protocol):
    """What the service evicts: the scheduler's ``PodInfo`` is one, ``PodToEvict`` wraps a bare Pod."""

    @property
    def pod(self) -> Pod: ...


@dataclass(frozen=True, slots=True)
class PodToEvict:
    pod: Pod


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    """One pod to evict, and what to tell its owner."""

    pod: EvictedPod
    reason: str
    """The event reason: ``Preempted``, ``QuotaRevoked``, ``Descheduled`` ..."""
    message: str
    """The event message, naming who evicts and why."""
    node: str = ""
    event_type: str = "Normal"
    action: str = "Evicting"
    disruption_reason: str | None = None
    """Reason of the ``DisruptionTarget`` condition written before the eviction (kube-scheduler's
    ``PreemptionByScheduler``); None: none is written (the Eviction API adds its own)."""
    delete_if_refused: bool = False
    """When a PodDisruptionBudget refuses the eviction (HTTP 429), delete the pod anyway, as
    kube-scheduler's preemption does; otherwise the eviction is given up."""
    delete: bool = False
    """Delete the pod instead of evicting it (no PodDisruptionBudget check): the descheduler's
    ``evictionPolicy: Delete``."""
    soft: bool = False
    """Only mark the pod (``scheduling.koordinator.sh/soft-eviction`` label and annotation) for a
    custom evictor; nothing is deleted."""


class Evictor(Protocol):
    async def evict(self, request: EvictionRequest) -> bool:
        """Evict (or mark) the pod; True when it is going, False when it was gone already or the
        eviction was refused. Never raises for an API error: it is logged."""
        ...


class EvictionService:
    """The ``Evictor`` over a ``ClusterBackend``; ``initiator`` names the component in the
    condition and the soft-eviction record (``koord-scheduler``, ``koord-descheduler``)."""

    def __init__(self, backend: ClusterBackend, initiator: str) -> None:
        self._backend = backend
        self._initiator = initiator

    async def evict(self, request: EvictionRequest) -> bool:
        pod = request.pod
        key = pod_key(pod.pod)
        try:
            if request.soft:
                await self._mark(request)
            elif request.delete:
                await self._backend.delete_pod(pod.pod)
            else:
                if request.disruption_reason is not None:
                    await self._backend.patch_pod_status(
                        pod.pod, {"status": {"conditions": [self._disruption_target(request)]}}
                    )
                if not await self._evict(request):
                    return False
        except NotFound:
            return False
        except Exception as exc:
            log.warning("could not evict %s (%s): %s", key, request.message, exc)
            return False
        await self._backend.record_event(
            EventRecord(
                regarding=_regarding(pod.pod),
                type=request.event_type,
                reason=request.reason,
                action=request.action,
                message=request.message,
            )
        )
        return True

    async def _evict(self, request: EvictionRequest) -> bool:
        """The Eviction API (policy/v1) with the pod's own grace period."""
        try:
            await self._backend.evict(request.pod.pod)
        except BackendError as exc:
            if exc.status != 429:
                raise
            if not request.delete_if_refused:
                log.info("a PodDisruptionBudget refuses evicting %s: %s", pod_key(request.pod.pod), exc)
                return False
            # The caller chose this victim knowing the budget (its cost model counts violations),
            # so delete it as kube-scheduler's preemption does.
            await self._backend.delete_pod(request.pod.pod)
        return True

    async def _mark(self, request: EvictionRequest) -> None:
        spec = preemption_ext.SoftEvictionSpec.model_validate(
            {
                "timestamp": _now(),
                "initiator": self._initiator,
                "reason": request.message,
                "deleteOptions": {},
            }
        )
        await self._backend.patch_pod(
            request.pod.pod,
            {
                "metadata": {
                    "labels": {preemption_ext.ANNOTATION_SOFT_EVICTION: SOFT_EVICTION_LABEL_VALUE},
                    "annotations": {
                        preemption_ext.ANNOTATION_SOFT_EVICTION: json.dumps(
                            spec.to_wire(), separators=(",", ":")
                        )
                    },
                }
            },
        )

    def _disruption_target(self, request: EvictionRequest) -> dict[str, Any]:
        return {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": request.disruption_reason,
            "message": f"{self._initiator}: {request.message}",
            "lastTransitionTime": _now(),
        }


def _regarding(pod: Pod) -> ObjectRef:
    namespace, name = pod_ref(pod)
    return ObjectRef(kind="Pod", namespace=namespace, name=name, uid=pod.metadata.uid or pod_key(pod))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
