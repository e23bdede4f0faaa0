"""PodGroup status and schedule timeout, from indexed member pods.

Kopf indexes the pods labelled ``pod-group.scheduling.sigs.k8s.io`` by ``(namespace, podgroup)``
(one watch, no listing per PodGroup), and a timer on each PodGroup recomputes its status from that
index every ``ManagerConfig.resync_seconds``: pod and PodGroup changes show within one interval,
and so does a passed schedule timeout. The rules live in ``operators.logic.podgroup_phase``.

PodGroup has no status subresource: Kopf patches ``status`` through the main object, together
with the timeout annotation, and only when something changed. The timer puts no finalizer on
the object (``operators.handlers.timers``): deleting a PodGroup does not wait for koord-manager.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from apis.core import Pod
from apis.extension.gang import LABEL_POD_GROUP
from apis.scheduling.podgroup import PodGroup
from operators.config import ManagerConfig
from operators.handlers import errors, timers
from operators.logic import podgroup_phase
from operators.logic.podgroup_phase import MemberPod

__all__ = ["register"]

Members = kopf.Index[tuple[str, str], MemberPod]


def podgroup_members(
    namespace: str | None, labels: kopf.Labels, body: kopf.Body, **_: Any
) -> dict[tuple[str, str], MemberPod]:
    """Index: (namespace, PodGroup name) -> the member pods' summaries."""
    member = MemberPod.from_pod(Pod.model_validate(dict(body)))  # nested values are raw dicts
    return {(namespace or "", labels[LABEL_POD_GROUP]): member}


def make_sync(config: ManagerConfig) -> Any:  # Any: Kopf's TimerFn protocol does not list index kwargs
    async def sync_podgroup_status(
        body: kopf.Body,
        namespace: str,
        name: str,
        patch: kopf.Patch,
        memo: Any,
        podgroup_members: Members,
        **_: Any,
    ) -> None:
        """Write the status, the timeout mark and the timeout event the group needs now, if any.

        A PodGroup that does not parse is a permanent error (once per distinct problem)."""
        try:
            group = PodGroup.model_validate(dict(body))  # nested values are raw dicts
        except ValidationError as exc:
            errors.raise_once(memo, "spec", errors.invalid_object("PodGroup", exc))
            return
        errors.raise_once(memo, "spec", None)
        members = list(podgroup_members.get((namespace, name), []))
        update = podgroup_phase.plan(
            group, members, datetime.now(UTC), default_timeout=config.default_schedule_timeout_seconds
        )
        if update.status is not None:
            # None removes a field; the conditions are koord-scheduler's (its what-if advice), so
            # a status computed from a body read before its write must not remove them.
            patch["status"] = update.status.model_dump(by_alias=True, mode="json", exclude={"conditions"})
        for key, value in update.annotations.items():
            patch.metadata.annotations[key] = value
        if update.event is not None:
            kopf.event(body, type="Warning", reason=podgroup_phase.TIMEOUT_EVENT_REASON, message=update.event)

    return sync_podgroup_status


def register(registry: kopf.OperatorRegistry, config: ManagerConfig) -> None:
    """Index member pods; recompute each PodGroup's status on a timer."""
    info = PodGroup.crd
    kopf.index(
        "", "v1", "pods", id="podgroup_members", labels={LABEL_POD_GROUP: kopf.PRESENT}, registry=registry
    )(podgroup_members)
    timers.resync_timer(
        info.group,
        info.version,
        info.plural,
        id="podgroup_status",
        interval=config.resync_seconds,
        registry=registry,
    )(make_sync(config))
