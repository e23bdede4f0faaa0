"""Namespace labels, from the plugin's own watch of namespaces: a pod affinity term's
``namespaceSelector`` selects namespaces by them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.client.backend import ResourceType, WatchEvent
from apis.core import Namespace
from scheduler.cache.pod_selector import Selector

__all__ = ["NAMESPACES", "NamespaceLabels"]

NAMESPACES = ResourceType.of(Namespace)

_NO_LABELS: Mapping[str, str] = {}


class NamespaceLabels:
    def __init__(self) -> None:
        self._labels: dict[str, dict[str, str]] = {}
        self._selected: dict[Selector, frozenset[str]] = {}
        """Namespaces each selector selects, until the next namespace change."""

    def on_event(self, event: WatchEvent[Namespace]) -> None:
        def replace(namespaces: Sequence[Namespace]) -> None:
            self._labels = {ns.metadata.name or "": dict(ns.metadata.labels or {}) for ns in namespaces}

        def upsert(ns: Namespace) -> None:
            self._labels[ns.metadata.name or ""] = dict(ns.metadata.labels or {})

        def delete(ns: Namespace) -> None:
            self._labels.pop(ns.metadata.name or "", None)

        event.dispatch(replace, upsert, delete)
        self._selected.clear()

    def labels(self, namespace: str) -> Mapping[str, str]:
        return self._labels.get(namespace, _NO_LABELS)

    def selected(self, selector: Selector) -> frozenset[str] | None:
        """The namespaces ``selector`` selects; None when it selects every namespace (an empty
        selector), as kube-scheduler keeps such a selector instead of listing namespaces."""
        if not selector.nothing and not selector.requirements:
            return None
        found = self._selected.get(selector)
        if found is None:
            found = frozenset(name for name, labels in self._labels.items() if selector.matches(labels))
            self._selected[selector] = found
        return found
