"""Hierarchical elastic quota as pure math: no pods, nodes or scheduler types.

``runtime`` shares one resource among a quota's children (min scaling, largest-remainder sharing);
``tree`` aggregates requests bottom-up and computes every quota's runtime top-down;
``incremental`` keeps a tree between changes and refreshes only the changed quotas' paths. The
``ElasticQuota`` plugin (``scheduler.plugins.elastic_quota``) feeds them from its informers.
"""

from scheduler.quota.runtime import Child, hamilton_shares, scale_mins, share
from scheduler.quota.tree import Figures, QuotaSpec, Resources, TreeInput, Usage, compute_tree

__all__ = [
    "Child",
    "Figures",
    "QuotaSpec",
    "Resources",
    "TreeInput",
    "Usage",
    "compute_tree",
    "hamilton_shares",
    "scale_mins",
    "share",
]
