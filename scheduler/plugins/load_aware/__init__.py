"""LoadAwareScheduling: filter and score nodes by their measured usage (NodeMetric); see plugin.py."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.plugin import NAME, RBAC, LoadAwareScheduling, new

__all__ = ["NAME", "PLUGIN", "RBAC", "LoadAwareScheduling", "LoadAwareSchedulingArgs", "new"]

PLUGIN = PluginSpec(NAME, new, LoadAwareSchedulingArgs, RBAC)
