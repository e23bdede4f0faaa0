"""Plugin name -> how to build it. Registering a name twice is an error, as in kube-scheduler.

Each plugin module (or package) declares its ``PluginSpec`` once, as ``PLUGIN``;
``scheduler.plugins.PLUGIN_MODULES`` lists the modules and the default registry is built from it.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from apis.client.rbac import PolicyRule
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import Plugin
from scheduler.framework.profile import EXTENSION_POINT_METHODS, ExtensionPoint

__all__ = ["PluginSpec", "Registry", "declared_plugin"]


@dataclass(frozen=True)
class PluginSpec:
    name: str
    factory: Callable[[Any, Handle], Plugin]
    """``new(args, handle)``: args is an instance of ``args_model`` (None when it has none)."""
    args_model: type[BaseModel] | None = None
    rbac: tuple[PolicyRule, ...] = ()
    """The API permissions the plugin needs beyond the core's (``scheduler.rbacgen.CORE_RULES``),
    declared as ``RBAC`` in the plugin's module."""


def declared_plugin(module: ModuleType) -> PluginSpec:
    """The ``PLUGIN = PluginSpec(...)`` a plugin module declares; TypeError when it declares none."""
    spec = getattr(module, "PLUGIN", None)
    if not isinstance(spec, PluginSpec):
        raise TypeError(f"{module.__name__} declares no PLUGIN = PluginSpec(...)")
    return spec


class Registry:
    def __init__(self, specs: Iterable[PluginSpec] = ()) -> None:
        self._specs: dict[str, PluginSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: PluginSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"plugin {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> PluginSpec:
        try:
            return self._specs[name]
        except KeyError:
            known = ", ".join(sorted(self._specs))
            raise KeyError(f"unknown plugin {name!r}; registered plugins: {known}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    def names(self) -> list[str]:
        return sorted(self._specs)

    def specs(self) -> list[PluginSpec]:
        return [self._specs[name] for name in sorted(self._specs)]

    def implements(self, name: str) -> set[ExtensionPoint]:
        """The extension points plugin ``name`` can be enabled at, from its factory's return type
        (``multiPoint`` in a KubeSchedulerConfiguration expands to these). KeyError if unknown."""
        plugin_class = typing.get_type_hints(self.get(name).factory).get("return")
        return {
            point
            for point, methods in EXTENSION_POINT_METHODS.items()
            if all(callable(getattr(plugin_class, m, None)) for m in methods)
        }
