"""InterPodAffinity (kube-scheduler's in-tree plugin): see ``plugin.py``."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.inter_pod_affinity.plugin import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    NAME,
    RBAC,
    InterPodAffinity,
    InterPodAffinityArgs,
    new,
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "PLUGIN",
    "RBAC",
    "InterPodAffinity",
    "InterPodAffinityArgs",
    "new",
]

PLUGIN = PluginSpec(NAME, new, InterPodAffinityArgs, RBAC)
