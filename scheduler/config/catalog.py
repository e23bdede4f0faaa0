"""The plugins a configuration may name: what the registry has, and what it lacks on purpose.

``resolve`` takes the plugin registry (``scheduler.framework.registry.Registry`` satisfies
``PluginCatalog``) to check plugin names and each plugin's ``pluginConfig`` args at start-up.
A bare ``implements`` callable is accepted too, for callers that only resolve plugin sets
(tests with fake plugins): then names are checked but args are left to the plugins.

A name that Koordinator or kube-scheduler registers but koord-scheduler does not implement is
"not supported yet" rather than "unknown": a user copying Koordinator's YAML should learn that the
plugin is known and missing, not that they mistyped it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from scheduler.framework.profile import ExtensionPoint

__all__ = [
    "KOORDINATOR_PLUGINS",
    "KUBE_SCHEDULER_PLUGINS",
    "Catalog",
    "Implements",
    "PluginCatalog",
    "catalog_of",
    "did_you_mean",
]

Implements = Callable[[str], AbstractSet[ExtensionPoint]]
"""``implements(plugin_name)``: the extension points a plugin implements; raises KeyError if unknown."""

KOORDINATOR_PLUGINS = frozenset(
    {
        "Coscheduling",
        "DefaultPreBind",
        "DeviceShare",
        "ElasticQuota",
        "LoadAwareScheduling",
        "NodeNUMAResource",
        "NodeResourcesFitPlus",
        "Reservation",
        "ScarceResourceAvoidance",
        "SchedulingHint",
    }
)
"""koord-scheduler's registered plugins in Koordinator (api-reference section 3)."""

KUBE_SCHEDULER_PLUGINS = frozenset(
    {
        "DefaultBinder",
        "DefaultPreemption",
        "DynamicResources",
        "ImageLocality",
        "InterPodAffinity",
        "NodeAffinity",
        "NodeName",
        "NodePorts",
        "NodeResourcesBalancedAllocation",
        "NodeResourcesFit",
        "NodeUnschedulable",
        "NodeVolumeLimits",
        "PodTopologySpread",
        "PrioritySort",
        "SchedulingGates",
        "TaintToleration",
        "VolumeBinding",
        "VolumeRestrictions",
        "VolumeZone",
    }
)
"""kube-scheduler's in-tree plugins, which Koordinator's profiles enable beside its own."""


class ArgsSpec(Protocol):
    @property
    def args_model(self) -> type[BaseModel] | None: ...


@runtime_checkable
class PluginCatalog(Protocol):
    """What resolution needs of a plugin registry."""

    def names(self) -> list[str]: ...

    def implements(self, name: str) -> AbstractSet[ExtensionPoint]:
        """Raises KeyError if ``name`` is not registered."""
        ...

    def get(self, name: str) -> ArgsSpec: ...


def _quoted(name: str) -> str:
    return f'"{name}"'


def did_you_mean(name: str, candidates: Sequence[str], quote: Callable[[str], str] = _quoted) -> str:
    """`` (did you mean "x"?)`` for the closest of ``candidates``, or an empty string."""
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {quote(close[0])}?)" if close else ""


@dataclass(frozen=True)
class Catalog:
    """A ``PluginCatalog`` or a bare ``implements``, with the messages resolution reports."""

    implements: Implements
    registry: PluginCatalog | None = None

    def names(self) -> list[str]:
        return self.registry.names() if self.registry is not None else []

    def args_model(self, name: str) -> tuple[bool, type[BaseModel] | None]:
        """(whether args can be checked here, the plugin's args model or None if it takes none)."""
        if self.registry is None:
            return False, None
        return True, self.registry.get(name).args_model

    def unknown(self, name: str) -> str:
        """Why ``name`` cannot be used, for a name ``implements`` does not know."""
        names = self.names()
        listed = f"; the plugins koord-scheduler has: {', '.join(names)}" if names else ""
        if name in KOORDINATOR_PLUGINS or name in KUBE_SCHEDULER_PLUGINS:
            origin = "Koordinator" if name in KOORDINATOR_PLUGINS else "kube-scheduler"
            return f"plugin {name!r} is a {origin} plugin that koord-scheduler does not support yet{listed}"
        return f"unknown plugin {name!r}{did_you_mean(name, names, repr)}{listed}"


def catalog_of(plugins: PluginCatalog | Implements) -> Catalog:
    if isinstance(plugins, PluginCatalog):
        return Catalog(plugins.implements, plugins)
    return Catalog(plugins)
