"""DefaultPreBind: Koordinator's PreBind plugin that applies the patch the other PreBind plugins built.

In Koordinator every PreBind plugin edits a copy of the pod (or of the Reservation of a reserve
pod) and DefaultPreBind, last, sends the difference in one patch. In koord-scheduler the other
PreBind plugins leave their annotations in ``BIND_ANNOTATIONS`` and DefaultBinder sends them on the
Binding, whose annotations the API server copies onto the pod: the pod never runs with its node
but without its allocation record, and no separate patch is left to apply. The plugin is
here so that Koordinator's configuration loads and means the same; its PreBind only checks that a
record exists for a Bind plugin to carry, and says so once at start-up.
"""

from __future__ import annotations

import logging

from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import BIND_ANNOTATIONS
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import PreBindPlugin
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["NAME", "PLUGIN", "DefaultPreBind", "new"]

NAME = "DefaultPreBind"

log = logging.getLogger(__name__)


class DefaultPreBind(PreBindPlugin):
    def __init__(self, handle: Handle) -> None:
        log.debug(
            "profile %s: DefaultPreBind enabled; the PreBind plugins' annotations travel on the "
            "Binding (DefaultBinder), so it has no patch of its own to apply",
            handle.scheduler_name,
        )

    @property
    def name(self) -> str:
        return NAME

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        annotations = state.get(BIND_ANNOTATIONS)
        if annotations:
            log.debug("%s: %d annotation(s) go with its binding to %s", pod.key, len(annotations), node)
        return Status.success()


def new(args: None, handle: Handle) -> DefaultPreBind:
    return DefaultPreBind(handle)


PLUGIN = PluginSpec(NAME, new)
