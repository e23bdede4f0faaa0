"""The API permissions a plugin needs, declared next to the plugin (``RBAC`` in its module).

``PluginSpec.rbac`` carries them into the registry; ``python -m scheduler.rbacgen`` renders the
chart's koord-scheduler ClusterRole from the core's rules plus every registered plugin's, and a
unit test fails when the checked-in chart differs. So adding a plugin that watches or writes a new
resource is one module and its line in the module list: the chart and the e2e suite (which runs
koord-scheduler with the chart's ServiceAccount) follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apis.client.backend import ResourceType

__all__ = ["PolicyRule"]


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a ClusterRole, with the reason it is needed (rendered as a comment)."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    @staticmethod
    def on(resource: ResourceType[Any], *verbs: str, why: str, subresource: str | None = None) -> PolicyRule:
        """``verbs`` on ``resource`` (or one of its subresources)."""
        name = f"{resource.plural}/{subresource}" if subresource else resource.plural
        return PolicyRule((resource.group,), (name,), verbs, why)

    @staticmethod
    def watching(resource: ResourceType[Any], *, why: str) -> PolicyRule:
        """What an informer of ``resource`` needs: list and watch."""
        return PolicyRule.on(resource, "list", "watch", why=why)

    def grants(self, group: str, resource: str, verb: str) -> bool:
        return group in self.api_groups and resource in self.resources and verb in self.verbs
