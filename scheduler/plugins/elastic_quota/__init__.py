"""The ElasticQuota plugin: hierarchical, multi-tree elastic quota at PreFilter and Reserve.

Modules, one job each: ``args`` (ElasticQuotaArgs), ``quotas`` (quota and profile objects, pod ->
quota), ``ledger`` (per-quota sums of pods), ``forest`` (every tree's total and figures),
``figures`` (the figures kept between cycles), ``checks`` (the admission checks), ``admission``
(a pod's job admitted at once), ``reservation_credit`` (owners charged only beyond their
reservation), ``reclaim`` (entitlements read by quota reclaim and preemption), ``writer``
(figures written back onto the objects), ``hooks`` (quota hook plugins), ``revoke`` and
``revoking`` (the overuse revoke controller and its evictions), ``handlers/`` (one informer
handler per watched kind), ``plugin`` (the extension points and the API preemption uses). The
quota math itself is ``scheduler.quota``.
"""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.elastic_quota.args import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.plugin import NAME, RBAC, ElasticQuota, new

__all__ = ["NAME", "PLUGIN", "RBAC", "ElasticQuota", "ElasticQuotaArgs", "new"]

PLUGIN = PluginSpec(NAME, new, ElasticQuotaArgs, RBAC)
