"""Per-cycle scratch data shared between a plugin's extension points.

Written once (PreFilter, PreScore) under a key derived from the plugin's name, read many times
(Filter, Score). Reading a key that was never written is an error, not a default: it means an
extension point ran without the one that should have prepared it.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["CycleState", "StateKey"]

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key: ``KEY = StateKey[FitState]("NodeResourcesFit/preFilter")``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    __slots__ = ("_data", "notes", "planning", "record_plugin_metrics", "skip_filter", "skip_score")

    def __init__(self, *, planning: bool = False, record_plugin_metrics: bool = True) -> None:
        self._data: dict[str, Any] = {}
        self.planning = planning
        self.record_plugin_metrics = record_plugin_metrics
        """Time each plugin of this cycle (``plugin_execution_duration_seconds``): kube-scheduler's
        ``SetRecordPluginMetrics``, true for a sample of the cycles (``Framework.cycle_state``)."""
        """The cycle evaluates a pod for a plan (a gang's placement, a preemption), not for real:
        plugins that plan several pods at once skip themselves, so the framework is not re-entered."""
        self.skip_filter: set[str] = set()
        """Plugins whose PreFilter returned SKIP: their Filter does not run this cycle."""
        self.skip_score: set[str] = set()
        self.notes: list[str] = []
        """Sentences plugins add to the pod's explanation (``koordctl explain pod``): what they
        chose and why, beyond the node (the reservation a pod allocated from ...)."""

    def note(self, text: str) -> None:
        if not self.planning:
            self.notes.append(text)

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T:
        try:
            value: T = self._data[key.name]
        except KeyError:
            raise KeyError(f"cycle state {key.name!r} was not written in this cycle") from None
        return value

    def get(self, key: StateKey[T]) -> T | None:
        value: T | None = self._data.get(key.name)
        return value

    def __contains__(self, key: StateKey[Any]) -> bool:
        return key.name in self._data
