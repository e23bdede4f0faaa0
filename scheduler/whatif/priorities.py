"""The cluster's PriorityClasses, watched so that a what-if's pods get the priority (and
preemptionPolicy) the API server's Priority admission would give them from ``priorityClassName``;
a job's priority decides whom it may preempt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from apis.client.backend import ResourceType, WatchEvent
from apis.core import PriorityClass

__all__ = ["PRIORITYCLASSES", "PriorityClasses"]

PRIORITYCLASSES = ResourceType.of(PriorityClass)


@dataclass
class PriorityClasses:
    by_name: dict[str, PriorityClass] = field(default_factory=dict)

    def on_event(self, event: WatchEvent[PriorityClass]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _replace(self, classes: Sequence[PriorityClass]) -> None:
        self.by_name = {c.metadata.name or "": c for c in classes}

    def _upsert(self, klass: PriorityClass) -> None:
        self.by_name[klass.metadata.name or ""] = klass

    def _delete(self, klass: PriorityClass) -> None:
        self.by_name.pop(klass.metadata.name or "", None)

    def get(self, name: str) -> PriorityClass | None:
        return self.by_name.get(name)
