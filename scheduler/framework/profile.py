"""A resolved scheduler profile: which plugins run at each extension point, with weights and args.

``scheduler.config`` turns a KubeSchedulerConfiguration into these (applying kube-scheduler's
enable/disable semantics against the default plugin set); ``runtime.Framework`` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["EXTENSION_POINT_METHODS", "ExtensionPoint", "PluginRef", "ResolvedProfile"]


class ExtensionPoint(StrEnum):
    PRE_ENQUEUE = "preEnqueue"
    QUEUE_SORT = "queueSort"
    PRE_FILTER = "preFilter"
    FILTER = "filter"
    POST_FILTER = "postFilter"
    PRE_SCORE = "preScore"
    SCORE = "score"
    RESERVE = "reserve"
    PERMIT = "permit"
    PRE_BIND = "preBind"
    BIND = "bind"
    POST_BIND = "postBind"


EXTENSION_POINT_METHODS: dict[ExtensionPoint, tuple[str, ...]] = {
    ExtensionPoint.PRE_ENQUEUE: ("pre_enqueue",),
    ExtensionPoint.QUEUE_SORT: ("sort_key",),
    ExtensionPoint.PRE_FILTER: ("pre_filter",),
    ExtensionPoint.FILTER: ("filter",),
    ExtensionPoint.POST_FILTER: ("post_filter",),
    ExtensionPoint.PRE_SCORE: ("pre_score",),
    ExtensionPoint.SCORE: ("score",),
    ExtensionPoint.RESERVE: ("reserve", "unreserve"),
    ExtensionPoint.PERMIT: ("permit",),
    ExtensionPoint.PRE_BIND: ("pre_bind",),
    ExtensionPoint.BIND: ("bind",),
    ExtensionPoint.POST_BIND: ("post_bind",),
}
"""The methods a plugin must have to be enabled at each extension point."""


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 1
    """Only meaningful at Score."""


@dataclass(frozen=True)
class ResolvedProfile:
    scheduler_name: str
    plugins: dict[ExtensionPoint, tuple[PluginRef, ...]]
    plugin_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Raw args per plugin name (the ``args`` of ``pluginConfig``), validated by the plugin's model."""
    percentage_of_nodes_to_score: int | None = None
