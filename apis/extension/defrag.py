"""Gang defragmentation keys (ours, not Koordinator's): koord-descheduler's GangDefragmentation
plugin labels the Reservations of a plan and describes the plan on the waiting gang's PodGroup,
where koord-scheduler reads it for ``koordctl explain``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from apis.base import KoordModel
from apis.errors import InvalidAnnotation
from apis.extension._annotation import lookup, parse_json
from apis.types import Time

__all__ = [
    "ANNOTATION_DEFRAG_PLAN",
    "LABEL_DEFRAG_PLAN",
    "DefragMove",
    "DefragPlan",
    "get_defrag_plan",
]

LABEL_DEFRAG_PLAN = "descheduler.koordinator-py/defrag-plan"
"""On each Reservation of a plan: the plan id (so a restarted descheduler finds its plans)."""
ANNOTATION_DEFRAG_PLAN = "descheduler.koordinator-py/defrag-plan"
"""On the PodGroup and on each Reservation of a plan: the plan as JSON (:class:`DefragPlan`)."""


class DefragMove(KoordModel):
    """One pod the plan moves out of the domain, and the Reservation holding its new place."""

    namespace: str
    name: str
    uid: str
    node: str
    """The node it runs on now (inside the domain)."""
    priority: int
    reservation: str


class DefragPlan(KoordModel):
    """Moves that free one topology domain for a waiting gang."""

    id: str
    gang: str
    """``namespace/name`` of the PodGroup."""
    layer: str
    """The topology layer of the domain (NodeTopologyLayer when the gang gathers nowhere)."""
    domain: str
    nodes: list[str]
    """The domain's nodes, sorted."""
    moves: list[DefragMove]
    created: Time
    phase: Literal["Reserving", "Evicting"] = "Reserving"
    """Reserving: the moved pods' new places are being reserved; Evicting: they were all reserved
    and the pods were asked to move."""

    def describe(self) -> str:
        pods = ", ".join(f"{m.namespace}/{m.name} (on {m.node})" for m in self.moves)
        state = "reserving their new places" if self.phase == "Reserving" else "their eviction was requested"
        return (
            f"defragmentation plan {self.id}: moving {len(self.moves)} pod(s) frees {self.layer} "
            f"{self.domain} for the gang: {pods}; {state}"
        )


def get_defrag_plan(annotations: Mapping[str, str] | None) -> DefragPlan | None:
    """The plan on a PodGroup or Reservation; None when absent, empty or malformed (a plan is a
    report, never a reason to refuse the object)."""
    raw = lookup(annotations, ANNOTATION_DEFRAG_PLAN)
    if not raw:
        return None
    try:
        return parse_json(ANNOTATION_DEFRAG_PLAN, raw, DefragPlan)
    except InvalidAnnotation:
        return None
