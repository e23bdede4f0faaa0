"""ElasticQuotaProfile (``quota.koordinator.sh/v1alpha1``, namespaced, short name ``eqp``).

koord-manager maintains an ElasticQuota named ``spec.quotaName`` whose ``min`` is the selected
nodes' allocatable times ``spec.resourceRatio``.

``spec.resourceRatio`` is read once, here, for koord-manager and koord-scheduler alike
(:meth:`ElasticQuotaProfileSpec.ratio`):

1. unset or empty: 1;
2. otherwise the text must be a number Go's ``strconv.ParseFloat`` accepts (``apis.gofloat``: no
   Inf or NaN, at most 64 characters, exponent bounded before any arithmetic) between 0 and
   :data:`MAX_RESOURCE_RATIO`; anything else raises InvalidSpec naming ``spec.resourceRatio``, and
   the callers treat the whole profile as invalid rather than guess;
3. a valid number outside (0, 1] counts as 1, as Koordinator's profile controller applies it
   (``val > 0 && val <= 1.0``); inside, it is used exactly (Koordinator multiplies float64s).
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from apis.base import CRDInfo, KoordModel
from apis.errors import InvalidSpec, InvalidValue
from apis.gofloat import parse_go_float
from apis.meta import KoordResource, LabelSelector

__all__ = [
    "MAX_RESOURCE_RATIO",
    "RESOURCE_RATIO_FIELD",
    "ElasticQuotaProfile",
    "ElasticQuotaProfileSpec",
    "ElasticQuotaProfileStatus",
    "parse_resource_ratio",
    "resource_ratio",
]

RESOURCE_RATIO_FIELD = "spec.resourceRatio"
MAX_RESOURCE_RATIO = 10**6
"""The largest ratio accepted as a number at all (a ratio above 1 then counts as 1)."""


def parse_resource_ratio(raw: str) -> Fraction:
    """``spec.resourceRatio`` as an exact fraction in [0, MAX_RESOURCE_RATIO] (step 2 above).

    Raises InvalidSpec naming the field when the text is not such a number.
    """
    try:
        ratio = parse_go_float(raw)
    except InvalidValue as error:
        raise InvalidSpec(RESOURCE_RATIO_FIELD, str(error)) from error
    if not 0 <= ratio <= MAX_RESOURCE_RATIO:
        raise InvalidSpec(
            RESOURCE_RATIO_FIELD, f"{raw!r} is outside 0 to {MAX_RESOURCE_RATIO} (a ratio such as '0.9')"
        )
    return ratio


def resource_ratio(raw: str | None) -> Fraction:
    """The ratio applied to the nodes' total (steps 1-3 above); raises InvalidSpec when malformed."""
    if not raw:
        return Fraction(1)
    ratio = parse_resource_ratio(raw)
    return ratio if 0 < ratio <= 1 else Fraction(1)


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

    def ratio(self) -> Fraction:
        """The ratio applied to the nodes' total (steps 1-3 of the module docstring).

        Raises InvalidSpec naming ``spec.resourceRatio`` when it is malformed.
        """
        return resource_ratio(self.resource_ratio)


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
