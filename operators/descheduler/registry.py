"""The descheduler's plugins by name, as ``profiles[].plugins`` and ``pluginConfig`` name them.

A policy plugin registers a ``PluginFactory``: its args model (validated at start-up, defaults
applied when the profile gives none), the extension points it implements, the factory that builds
it from its args and the ``DeschedulerHandle``, and the API permissions it needs beyond the core's
(rendered into the chart by ``python -m operators.descheduler.rbacgen``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from apis.client.rbac import PolicyRule
from operators.descheduler.config import MIGRATION_CONTROLLER, MigrationControllerArgs
from operators.descheduler.defrag import plugin as defrag
from operators.descheduler.defrag.args import GangDefragmentationArgs
from operators.descheduler.framework import DeschedulerHandle
from operators.descheduler.lownodeload import plugin as lownodeload
from operators.descheduler.lownodeload.args import LowNodeLoadArgs

__all__ = ["REGISTRY", "PluginFactory", "args_models"]


@dataclass(frozen=True)
class PluginFactory:
    args: type[BaseModel]
    points: frozenset[str]
    """Any of ``deschedule``, ``balance``, ``evict``, ``filter``."""
    new: Callable[[Any, DeschedulerHandle], Any] | None
    """Builds the plugin (a ``BalancePlugin`` / ``DeschedulePlugin``) from its args and the
    handle (the caches, the evictor, the API for the rest); None for the MigrationController,
    which the process builds itself (it is the handle's evictor)."""
    rbac: tuple[PolicyRule, ...] = ()


REGISTRY: dict[str, PluginFactory] = {
    MIGRATION_CONTROLLER: PluginFactory(MigrationControllerArgs, frozenset({"evict", "filter"}), None),
    defrag.NAME: PluginFactory(GangDefragmentationArgs, frozenset({"balance"}), defrag.new, defrag.RBAC),
    lownodeload.NAME: PluginFactory(
        LowNodeLoadArgs, frozenset({"balance"}), lownodeload.new, lownodeload.RBAC
    ),
}


def args_models(
    registry: Mapping[str, PluginFactory] = REGISTRY,
) -> dict[str, tuple[type[BaseModel], frozenset[str]]]:
    return {name: (factory.args, factory.points) for name, factory in registry.items()}
