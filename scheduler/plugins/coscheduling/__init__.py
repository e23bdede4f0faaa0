"""Coscheduling: gang scheduling (PodGroup CRs and lightweight gang annotations); see plugin.py."""

from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.plugin import NAME, RBAC, Coscheduling, new

__all__ = ["NAME", "RBAC", "Coscheduling", "CoschedulingArgs", "new"]
