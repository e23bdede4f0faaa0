"""Elastic quota labels and annotations (api-reference 2.3, prefix ``quota.scheduling.koordinator.sh/``).

Boolean labels are asymmetric (compat note 10): ``is-parent``, ``is-root``, ``allow-force-update``
and ``ignore-default-tree`` count only when exactly ``"true"``, while ``allow-lent-resource`` and the
pod label ``preemptible`` are true unless exactly ``"false"``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import TypeAdapter

from apis.errors import InvalidAnnotation
from apis.extension._annotation import Fallback, ResourceList, lookup, parse_json, parse_resource_list

__all__ = [
    "ANNOTATION_ADMISSION",
    "ANNOTATION_ALLOCATED",
    "ANNOTATION_CHILD_REQUEST",
    "ANNOTATION_GUARANTEED",
    "ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS",
    "ANNOTATION_NON_PREEMPTIBLE_REQUEST",
    "ANNOTATION_NON_PREEMPTIBLE_USED",
    "ANNOTATION_QUOTA_NAMESPACES",
    "ANNOTATION_REQUEST",
    "ANNOTATION_RESOURCE_KEYS",
    "ANNOTATION_RUNTIME",
    "ANNOTATION_SHARED_WEIGHT",
    "ANNOTATION_TOTAL_RESOURCE",
    "ANNOTATION_UNSCHEDULABLE_RESOURCE",
    "DEFAULT_QUOTA_NAME",
    "DEFAULT_RESOURCE_KEYS",
    "LABEL_ALLOW_FORCE_UPDATE",
    "LABEL_ALLOW_LENT_RESOURCE",
    "LABEL_PREEMPTIBLE",
    "LABEL_QUOTA_IGNORE_DEFAULT_TREE",
    "LABEL_QUOTA_IS_PARENT",
    "LABEL_QUOTA_IS_ROOT",
    "LABEL_QUOTA_NAME",
    "LABEL_QUOTA_PARENT",
    "LABEL_QUOTA_PROFILE",
    "LABEL_QUOTA_TREE_ID",
    "QUOTA_PREFIX",
    "QUOTA_RESOURCE_LIST_ANNOTATIONS",
    "ROOT_QUOTA_NAME",
    "SYSTEM_QUOTA_NAME",
    "allow_force_update",
    "allow_lent_resource",
    "custom_limiter_limit_key",
    "custom_limiter_used_key",
    "get_quota_namespaces",
    "get_quota_resource_list",
    "get_resource_keys",
    "ignore_default_tree",
    "is_parent",
    "is_preemptible",
    "is_tree_root",
    "parent_quota_name",
    "parse_max_strict_check_resource_keys",
    "parse_quota_namespaces",
    "parse_quota_resource_list",
    "parse_resource_keys",
    "resolve_shared_weight",
]

SYSTEM_QUOTA_NAME = "koordinator-system-quota"
ROOT_QUOTA_NAME = "koordinator-root-quota"
DEFAULT_QUOTA_NAME = "koordinator-default-quota"

QUOTA_PREFIX = "quota.scheduling.koordinator.sh"

LABEL_QUOTA_NAME = QUOTA_PREFIX + "/name"
"""Pod label: the quota the pod charges to."""
LABEL_PREEMPTIBLE = QUOTA_PREFIX + "/preemptible"
"""Pod label: ``"false"`` marks the pod non-preemptible; anything else means preemptible."""
LABEL_QUOTA_PARENT = QUOTA_PREFIX + "/parent"
LABEL_QUOTA_IS_PARENT = QUOTA_PREFIX + "/is-parent"
LABEL_ALLOW_LENT_RESOURCE = QUOTA_PREFIX + "/allow-lent-resource"
LABEL_QUOTA_TREE_ID = QUOTA_PREFIX + "/tree-id"
LABEL_QUOTA_IS_ROOT = QUOTA_PREFIX + "/is-root"
LABEL_QUOTA_PROFILE = QUOTA_PREFIX + "/profile"
LABEL_QUOTA_IGNORE_DEFAULT_TREE = QUOTA_PREFIX + "/ignore-default-tree"
LABEL_ALLOW_FORCE_UPDATE = QUOTA_PREFIX + "/allow-force-update"

ANNOTATION_QUOTA_NAMESPACES = QUOTA_PREFIX + "/namespaces"
ANNOTATION_SHARED_WEIGHT = QUOTA_PREFIX + "/shared-weight"
ANNOTATION_GUARANTEED = QUOTA_PREFIX + "/guaranteed"
ANNOTATION_RUNTIME = QUOTA_PREFIX + "/runtime"
ANNOTATION_REQUEST = QUOTA_PREFIX + "/request"
ANNOTATION_CHILD_REQUEST = QUOTA_PREFIX + "/child-request"
ANNOTATION_ALLOCATED = QUOTA_PREFIX + "/allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = QUOTA_PREFIX + "/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = QUOTA_PREFIX + "/non-preemptible-used"
ANNOTATION_UNSCHEDULABLE_RESOURCE = QUOTA_PREFIX + "/unschedulable-resource"
ANNOTATION_TOTAL_RESOURCE = QUOTA_PREFIX + "/total-resource"
ANNOTATION_RESOURCE_KEYS = QUOTA_PREFIX + "/resource-keys"
"""ElasticQuotaProfile annotation: JSON array of resource names. Default ``["cpu","memory"]``."""
ANNOTATION_ADMISSION = QUOTA_PREFIX + "/admission"
ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS = QUOTA_PREFIX + "/max-strict-check-resource-keys"

QUOTA_RESOURCE_LIST_ANNOTATIONS: frozenset[str] = frozenset(
    {
        ANNOTATION_SHARED_WEIGHT,
        ANNOTATION_GUARANTEED,
        ANNOTATION_RUNTIME,
        ANNOTATION_REQUEST,
        ANNOTATION_CHILD_REQUEST,
        ANNOTATION_ALLOCATED,
        ANNOTATION_NON_PREEMPTIBLE_REQUEST,
        ANNOTATION_NON_PREEMPTIBLE_USED,
        ANNOTATION_UNSCHEDULABLE_RESOURCE,
        ANNOTATION_TOTAL_RESOURCE,
        ANNOTATION_ADMISSION,
    }
)
"""The quota annotations whose value is a JSON ResourceList."""

DEFAULT_RESOURCE_KEYS: tuple[str, ...] = ("cpu", "memory")


def custom_limiter_limit_key(limiter: str) -> str:
    """``quota.scheduling.koordinator.sh/custom-<limiter>-limit``."""
    return f"{QUOTA_PREFIX}/custom-{limiter}-limit"


def custom_limiter_used_key(limiter: str) -> str:
    """``quota.scheduling.koordinator.sh/custom-<limiter>-used``."""
    return f"{QUOTA_PREFIX}/custom-{limiter}-used"


def is_parent(labels: Mapping[str, str] | None) -> bool:
    """The quota is an inner node: only the exact value ``"true"`` counts."""
    return lookup(labels, LABEL_QUOTA_IS_PARENT) == "true"


def allow_lent_resource(labels: Mapping[str, str] | None) -> bool:
    """Unused min may be lent to siblings unless the label is exactly ``"false"``."""
    return lookup(labels, LABEL_ALLOW_LENT_RESOURCE) != "false"


def is_preemptible(labels: Mapping[str, str] | None) -> bool:
    """A pod is a quota/job preemption candidate unless its label is exactly ``"false"``."""
    return lookup(labels, LABEL_PREEMPTIBLE) != "false"


def is_tree_root(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_QUOTA_IS_ROOT) == "true"


def allow_force_update(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_ALLOW_FORCE_UPDATE) == "true"


def ignore_default_tree(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_QUOTA_IGNORE_DEFAULT_TREE) == "true"


def parent_quota_name(quota_name: str, labels: Mapping[str, str] | None) -> str:
    """The parent quota; an empty label means ``koordinator-root-quota`` (the root itself has none)."""
    parent = lookup(labels, LABEL_QUOTA_PARENT) or ""
    if not parent and quota_name != ROOT_QUOTA_NAME:
        return ROOT_QUOTA_NAME
    return parent


def parse_quota_resource_list(key: str, raw: str) -> ResourceList:
    """One of the JSON ResourceList annotations in QUOTA_RESOURCE_LIST_ANNOTATIONS."""
    if key not in QUOTA_RESOURCE_LIST_ANNOTATIONS:
        raise ValueError(f"{key} is not a quota ResourceList annotation")
    return parse_resource_list(key, raw)


def get_quota_resource_list(annotations: Mapping[str, str] | None, key: str) -> ResourceList | None:
    """The ResourceList under ``key``, or None when absent or empty (Koordinator then uses ``{}``)."""
    raw = lookup(annotations, key)
    if not raw:
        return None
    return parse_quota_resource_list(key, raw)


def resolve_shared_weight(
    annotations: Mapping[str, str] | None, max_resources: ResourceList
) -> Fallback[ResourceList]:
    """The effective shared weight: the annotation, or ``spec.max`` when it is missing, malformed or
    all zero (Koordinator's fallback; a malformed value yields a warning)."""
    raw = lookup(annotations, ANNOTATION_SHARED_WEIGHT)
    if raw is None:
        return Fallback(dict(max_resources))
    try:
        weight = parse_resource_list(ANNOTATION_SHARED_WEIGHT, raw)
    except InvalidAnnotation as error:
        return Fallback(dict(max_resources), f"{error}; using spec.max")
    if all(quantity.is_zero() for quantity in weight.values()):
        return Fallback(dict(max_resources))
    return Fallback(weight)


_NAMES: TypeAdapter[list[str]] = TypeAdapter(list[str])


def parse_quota_namespaces(raw: str) -> list[str]:
    """The JSON array of extra namespaces mapped to the quota."""
    return parse_json(ANNOTATION_QUOTA_NAMESPACES, raw, _NAMES)


def get_quota_namespaces(annotations: Mapping[str, str] | None) -> list[str] | None:
    """The namespaces, or None when absent or empty.

    Koordinator itself ignores a malformed value (treats it as absent); this raises instead so the
    caller can report it.
    """
    raw = lookup(annotations, ANNOTATION_QUOTA_NAMESPACES)
    if not raw:
        return None
    return parse_quota_namespaces(raw)


def parse_resource_keys(raw: str) -> list[str]:
    """The ElasticQuotaProfile's JSON array of resource names."""
    return parse_json(ANNOTATION_RESOURCE_KEYS, raw, _NAMES)


def get_resource_keys(annotations: Mapping[str, str] | None) -> list[str]:
    """The profile's resource keys, ``["cpu", "memory"]`` when absent or empty."""
    raw = lookup(annotations, ANNOTATION_RESOURCE_KEYS)
    if not raw:
        return list(DEFAULT_RESOURCE_KEYS)
    return parse_resource_keys(raw)


def parse_max_strict_check_resource_keys(raw: str) -> list[str]:
    """The JSON array of resource names for which the webhook enforces max >= used."""
    return parse_json(ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS, raw, _NAMES)
