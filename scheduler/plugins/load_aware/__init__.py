"""LoadAwareScheduling: filter and score nodes by their measured usage (NodeMetric); see plugin.py."""

from scheduler.plugins.load_aware.args import LoadAwareSchedulingArgs
from scheduler.plugins.load_aware.plugin import NAME, RBAC, LoadAwareScheduling, new

__all__ = ["NAME", "RBAC", "LoadAwareScheduling", "LoadAwareSchedulingArgs", "new"]
