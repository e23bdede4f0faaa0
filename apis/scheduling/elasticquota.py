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


_LABEL = r".metadata.labels.quota\.scheduling\.koordinator\.sh/"
_RESOURCES = (("CPU", "cpu"), ("MEM", "memory"), ("GPU", r"nvidia\.com/gpu"))
"""The resources ``kubectl get eq`` shows one by one (header prefix, JSONPath key)."""


def _per_resource() -> tuple[PrinterColumn, ...]:
    columns = []
    for header, key in _RESOURCES:
        columns += [
            PrinterColumn(
                name=f"{header}-MIN",
                type="string",
                json_path=f".spec.min.{key}",
                description="guaranteed (spec.min)",
            ),
            PrinterColumn(
                name=f"{header}-USED",
                type="string",
                json_path=f".status.used.{key}",
                description="in use (status.used, written by koord-scheduler)",
            ),
        ]
    return tuple(columns)


_PRINTER_COLUMNS = (
    PrinterColumn(name="PARENT", type="string", json_path=_LABEL + "parent", description="the parent quota"),
    # JSONPath picks single values: one column per resource and bound keeps each cell a short
    # quantity. spec.max is only in -o wide: the built-in quotas' "unlimited" max is
    # 1844674407370955161 (Koordinator's MaxInt64/5), which a printer column cannot shorten.
    *_per_resource(),
    PrinterColumn(name="AGE", type="date", json_path=".metadata.creationTimestamp"),
    # -o wide: the tree flags and the whole maps, every resource and the raw max included.
    PrinterColumn(name="IS-PARENT", type="string", json_path=_LABEL + "is-parent", priority=1),
    PrinterColumn(name="TREE-ID", type="string", json_path=_LABEL + "tree-id", priority=1),
    PrinterColumn(name="MIN", type="string", json_path=".spec.min", priority=1),
    PrinterColumn(name="MAX", type="string", json_path=".spec.max", priority=1),
    PrinterColumn(name="USED", type="string", json_path=".status.used", priority=1),
    PrinterColumn(
        name="RUNTIME",
        type="string",
        json_path=r".metadata.annotations.quota\.scheduling\.koordinator\.sh/runtime",
        description="the runtime quota koord-scheduler computed (a JSON ResourceList)",
        priority=1,
    ),
)


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
        printer_columns=_PRINTER_COLUMNS,
    )

    spec: ElasticQuotaSpec | None = None
    """The Min and Max of the quota."""
    status: ElasticQuotaStatus | None = None
    """The observed use, written through the main resource."""
