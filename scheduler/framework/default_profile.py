"""The default plugin set per extension point, derived from what each plugin implements.

A profile without a ``plugins`` section runs the default set (``scheduler.plugins.DEFAULT_PLUGINS``).
It is written the way kube-scheduler v1 writes its defaults under ``multiPoint``: each default
plugin is named once, with its Score weight, and runs at every extension point its class
implements (``Registry.implements``) except the ones it is explicitly left off. At each point the
plugins run in the order the profile names them, unless that point is given an explicit order;
an explicit order must name exactly the plugins derived there, so it decides the order, never who
runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.framework.profile import ExtensionPoint, PluginRef
from scheduler.framework.registry import Registry

__all__ = ["DefaultPlugin", "default_plugins"]


@dataclass(frozen=True)
class DefaultPlugin:
    name: str
    weight: int = 1
    """Its weight at Score."""
    left_off: frozenset[ExtensionPoint] = frozenset()
    """Extension points it implements but runs at only when a configuration enables it there."""


def default_plugins(
    registry: Registry,
    profile: Sequence[DefaultPlugin],
    orders: Mapping[ExtensionPoint, Sequence[str]],
) -> dict[ExtensionPoint, tuple[PluginRef, ...]]:
    """The plugins of ``profile`` at each extension point (points with none are left out), in the
    profile's order or the point's explicit one in ``orders``. ValueError when the profile names a
    plugin twice, leaves a plugin off a point it does not implement, gives a weight to a plugin
    that does not score, or when an explicit order does not name exactly the derived plugins."""
    points_of: dict[str, frozenset[ExtensionPoint]] = {}
    weight_of: dict[str, int] = {}
    for plugin in profile:
        if plugin.name in points_of:
            raise ValueError(f"the default profile names {plugin.name} twice")
        implemented = frozenset(registry.implements(plugin.name))
        not_implemented = plugin.left_off - implemented
        if not_implemented:
            missing = ", ".join(sorted(point.value for point in not_implemented))
            raise ValueError(f"{plugin.name} is left off {missing}, which it does not implement")
        points = implemented - plugin.left_off
        if plugin.weight != 1 and ExtensionPoint.SCORE not in points:
            raise ValueError(f"{plugin.name} has a Score weight but does not run at score")
        points_of[plugin.name] = points
        weight_of[plugin.name] = plugin.weight

    result: dict[ExtensionPoint, tuple[PluginRef, ...]] = {}
    for point in ExtensionPoint:
        names = [plugin.name for plugin in profile if point in points_of[plugin.name]]
        if point in orders:
            explicit = list(orders[point])
            if sorted(explicit) != sorted(names):
                raise ValueError(
                    f"the explicit {point.value} order names {explicit}, "
                    f"but the default plugins that run there are {names}"
                )
            names = explicit
        if names:
            result[point] = tuple(
                PluginRef(name, weight_of[name]) if point is ExtensionPoint.SCORE else PluginRef(name)
                for name in names
            )
    return result
