"""Custom resources of ``quota.koordinator.sh``."""

from apis.quota.elasticquotaprofile import (
    ElasticQuotaProfile,
    ElasticQuotaProfileSpec,
    ElasticQuotaProfileStatus,
)

__all__ = ["ElasticQuotaProfile", "ElasticQuotaProfileSpec", "ElasticQuotaProfileStatus"]
