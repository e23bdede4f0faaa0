"""Coscheduling: gang scheduling (PodGroup CRs and lightweight gang annotations); see plugin.py."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.plugin import NAME, RBAC, Coscheduling, new

__all__ = ["NAME", "PLUGIN", "RBAC", "Coscheduling", "CoschedulingArgs", "new"]

PLUGIN = PluginSpec(NAME, new, CoschedulingArgs, RBAC)
