"""ElasticQuotaProfile (``quota.koordinator.sh/v1alpha1``, namespaced, short name ``eqp``).

koord-manager maintains an ElasticQuota named ``spec.quotaName`` whose ``min`` is the selected
nodes' allocatable times ``spec.resourceRatio``.
"""

from __future__ import annotations

from typing import ClassVar

from apis.base import CRDInfo, KoordModel
from apis.meta import KoordResource, LabelSelector

__all__ = ["ElasticQuotaProfile", "ElasticQuotaProfileSpec", "ElasticQuotaProfileStatus"]


class ElasticQuotaProfileSpec(KoordModel):
    """Which nodes back the quota and how the quota is named and labelled."""

    quota_name: str
    """Name of the ElasticQuota to create or maintain in the profile's namespace."""
    quota_labels: dict[str, str] | None = None
    """Labels copied onto the quota."""
    resource_ratio: str | None = None
    """Decimal ratio such as "0.9" applied to the nodes' total allocatable."""
    node_selector: LabelSelector
    """Selects the nodes whose allocatable forms the quota total."""


class ElasticQuotaProfileStatus(KoordModel):
    """Always empty."""


class ElasticQuotaProfile(KoordResource):
    """ElasticQuotaProfile derives an ElasticQuota from a set of nodes."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="quota.koordinator.sh",
        version="v1alpha1",
        kind="ElasticQuotaProfile",
        plural="elasticquotaprofiles",
        singular="elasticquotaprofile",
        scope="Namespaced",
        short_names=("eqp",),
        status_subresource=False,
    )

    spec: ElasticQuotaProfileSpec | None = None
    """The nodes and the quota they back."""
    status: ElasticQuotaProfileStatus | None = None
    """Always empty."""
