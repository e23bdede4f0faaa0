"""Why each pod is where it is: the last scheduling outcome per pod, for the debug API and
``koordctl explain pod``, and the FailedScheduling event text kube-scheduler users know."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Explanation", "ExplanationStore"]


@dataclass
class Explanation:
    namespace: str
    name: str
    result: str
    """scheduled, unschedulable, error, waiting."""
    message: str
    node: str | None = None
    attempts: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    """Rejection reason -> number of nodes rejected for it."""
    rejecting_plugins: list[str] = field(default_factory=list)
    nominated_node: str | None = None
    notes: list[str] = field(default_factory=list)
    """What plugins chose and why (the reservation the pod allocated from, or why none)."""
    timestamp: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ExplanationStore:
    """The latest explanation per pod, bounded (oldest dropped first)."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, Explanation] = OrderedDict()

    def put(self, explanation: Explanation) -> None:
        key = f"{explanation.namespace}/{explanation.name}"
        self._items.pop(key, None)
        self._items[key] = explanation
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, namespace: str, name: str) -> Explanation | None:
        return self._items.get(f"{namespace}/{name}")

    def lookup(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.get(namespace, name)
        return found.to_dict() if found is not None else None

    def forget(self, namespace: str, name: str) -> None:
        self._items.pop(f"{namespace}/{name}", None)
