"""SchedulingHint: Koordinator's scheduling hint annotation, read at PreFilter.

``internal.scheduling.koordinator.sh/scheduling-hint`` (or the deprecated
``scheduling.koordinator.sh/scheduling-hint`` when the internal one is absent or empty) holds JSON:

- ``nodeNames``: the only nodes the pod may go to (a PreFilter result: other nodes are
  unresolvable, so preemption stays on these too);
- ``preferredNodeNames``: nodes to try first, in order (at most ``maxHintNodes``, and only those
  the PreFilter result allows): the first that passes every Filter is taken without scoring
  (``interfaces.PreferNodesPlugin``); when none passes, every node is evaluated as usual;
- ``extensions``: for other plugins; none reads it here.

A hint that is not valid JSON of that shape rejects the pod (unresolvable: preemption cannot fix
an annotation) with a message naming the key and the problem, which the FailedScheduling event
carries. Koordinator returns an Error there, which retries the pod with backoff for nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from apis.errors import InvalidValue
from apis.extension.scheduler import SchedulingHint as Hint
from apis.extension.scheduler import get_scheduling_hint
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import PreferNodesPlugin
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, PreFilterPlugin, PreFilterResult
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status

__all__ = ["NAME", "PLUGIN", "SchedulingHint", "SchedulingHintArgs", "new"]

NAME = "SchedulingHint"
HINT = StateKey[Hint]("SchedulingHint/hint")

log = logging.getLogger(__name__)


class SchedulingHintArgs(BaseModel):
    """Koordinator's ``SchedulingHintArgs``, with its default."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    max_hint_nodes: int = Field(default=100, gt=0)
    """At most this many preferred nodes are tried (the rest of the list is ignored)."""


class SchedulingHint(PreFilterPlugin, PreferNodesPlugin):
    def __init__(self, args: SchedulingHintArgs) -> None:
        self.args = args

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.POD_UPDATE  # a corrected annotation

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        try:
            hint = get_scheduling_hint(pod.annotations)
        except InvalidValue as exc:
            return PreFilterResult(Status.unresolvable(f"invalid scheduling hint: {exc}"))
        if hint is None:
            return PreFilterResult()
        state.write(HINT, hint)
        if hint.node_names:
            return PreFilterResult(node_names=frozenset(hint.node_names))
        return PreFilterResult()

    def prefer_nodes(self, state: CycleState, pod: PodInfo, allowed: frozenset[str] | None) -> Sequence[str]:
        hint = state.get(HINT)
        if hint is None or not hint.preferred_node_names:
            return ()
        nodes = hint.preferred_node_names[: self.args.max_hint_nodes]
        if allowed is not None:
            nodes = [n for n in nodes if n in allowed]
        return nodes


def new(args: SchedulingHintArgs | None, handle: Handle) -> SchedulingHint:
    return SchedulingHint(args or SchedulingHintArgs())


PLUGIN = PluginSpec(NAME, new, SchedulingHintArgs)
