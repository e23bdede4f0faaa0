"""ElasticQuota (``scheduling.sigs.k8s.io/v1alpha1``): guaranteed and maximum resources of a quota.

Koordinator's own copy of the scheduler-plugins type. The quota tree, lending, weights and
runtime state live in ``quota.scheduling.koordinator.sh/*`` labels and annotations; there is no
status subresource, so the scheduler writes ``status.used`` through the main resource.
"""

from __future__ import annotations

from typing import ClassVar

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import KoordResource
from apis.quantity import Quantity

__all__ = ["ElasticQuota", "ElasticQuotaSpec", "ElasticQuotaStatus"]


class ElasticQuotaSpec(KoordModel):
    """The Min and Max of a quota."""

    min: dict[str, Quantity] | None = None
    """Guaranteed amount of each named resource; must not exceed max (webhook-checked)."""
    max: dict[str, Quantity] | None = None
    """Upper bound of each named resource, applied to successfully scheduled pods' requests."""


class ElasticQuotaStatus(KoordModel):
    """The observed use of a quota."""

    used: dict[str, Quantity] | None = None
    """Current total usage of each resource, written by the scheduler."""


class ElasticQuota(KoordResource):
    """ElasticQuota sets elastic quota restrictions; the tree structure comes from its labels."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.sigs.k8s.io",
        version="v1alpha1",
        kind="ElasticQuota",
        plural="elasticquotas",
        singular="elasticquota",
        scope="Namespaced",
        # Product-owner additions; Koordinator's CRD has neither short names nor columns.
        short_names=("eq", "eqs"),
        status_subresource=False,
        printer_columns=(
            PrinterColumn(name="MIN", type="string", json_path=".spec.min"),
            PrinterColumn(name="MAX", type="string", json_path=".spec.max"),
            # Written by the scheduler: status.used and the runtime annotation (a JSON ResourceList).
            PrinterColumn(name="USED", type="string", json_path=".status.used"),
            PrinterColumn(
                name="RUNTIME",
                type="string",
                json_path=r".metadata.annotations.quota\.scheduling\.koordinator\.sh/runtime",
            ),
            PrinterColumn(
                name="PARENT",
                type="string",
                json_path=r".metadata.labels.quota\.scheduling\.koordinator\.sh/parent",
            ),
            PrinterColumn(name="AGE", type="date", json_path=".metadata.creationTimestamp"),
        ),
    )

    spec: ElasticQuotaSpec | None = None
    """The Min and Max of the quota."""
    status: ElasticQuotaStatus | None = None
    """The observed use, written through the main resource."""
