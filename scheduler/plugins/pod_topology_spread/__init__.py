"""PodTopologySpread (kube-scheduler v1.35): ``topologySpreadConstraints`` and default spreading."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.pod_topology_spread.args import PodTopologySpreadArgs
from scheduler.plugins.pod_topology_spread.plugin import NAME, RBAC, PodTopologySpread, new

__all__ = ["NAME", "PLUGIN", "RBAC", "PodTopologySpread", "PodTopologySpreadArgs", "new"]

PLUGIN = PluginSpec(NAME, new, PodTopologySpreadArgs, RBAC)
