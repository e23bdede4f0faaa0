"""The labels and annotations koord-manager fills in on an ElasticQuota at admission (algorithms 4.9
rule 4): pure functions, no Kopf, no I/O.

1. ``parent`` defaults to ``koordinator-root-quota`` (not on the root itself).
2. ``tree-id``: a quota without one keeps its previous one (UPDATE), or on CREATE takes its
   parent's, so a whole subtree of a profile's tree root carries the tree's id.
3. ``shared-weight`` defaults to ``spec.max`` and keeps max's resource names: names missing from
   the weight are added with max's value, names max no longer has are removed. A malformed weight
   is left for validation to report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from apis.errors import InvalidAnnotation
from apis.extension import quota as keys
from apis.scheduling.elasticquota import ElasticQuota

__all__ = ["defaults"]


def defaults(
    candidate: ElasticQuota, old: ElasticQuota | None, quotas: Sequence[ElasticQuota]
) -> dict[str, dict[str, str]]:
    """``{"labels": {...}, "annotations": {...}}``: only the keys to set, each with its new value."""
    name = candidate.metadata.name or ""
    labels = candidate.metadata.labels or {}
    annotations = candidate.metadata.annotations or {}
    set_labels: dict[str, str] = {}
    if name != keys.ROOT_QUOTA_NAME and not labels.get(keys.LABEL_QUOTA_PARENT):
        set_labels[keys.LABEL_QUOTA_PARENT] = keys.ROOT_QUOTA_NAME
    if not labels.get(keys.LABEL_QUOTA_TREE_ID):
        tree_id = _inherited_tree_id(candidate, old, quotas)
        if tree_id:
            set_labels[keys.LABEL_QUOTA_TREE_ID] = tree_id
    set_annotations: dict[str, str] = {}
    weight = _synced_shared_weight(candidate, annotations)
    if weight is not None:
        set_annotations[keys.ANNOTATION_SHARED_WEIGHT] = weight
    return {"labels": set_labels, "annotations": set_annotations}


def _inherited_tree_id(
    candidate: ElasticQuota, old: ElasticQuota | None, quotas: Sequence[ElasticQuota]
) -> str:
    if old is not None:
        return (old.metadata.labels or {}).get(keys.LABEL_QUOTA_TREE_ID, "")
    parent_name = keys.parent_quota_name(candidate.metadata.name or "", candidate.metadata.labels)
    if parent_name in ("", keys.ROOT_QUOTA_NAME):
        return ""
    for quota in quotas:
        if quota.metadata.name == parent_name:
            return (quota.metadata.labels or {}).get(keys.LABEL_QUOTA_TREE_ID, "")
    return ""


def _synced_shared_weight(candidate: ElasticQuota, annotations: Mapping[str, str]) -> str | None:
    """The weight annotation to write, or None when it is right as it is (or malformed)."""
    maximum = dict(candidate.spec.max or {}) if candidate.spec else {}
    if not maximum:
        return None
    try:
        weight = keys.get_quota_resource_list(annotations, keys.ANNOTATION_SHARED_WEIGHT)
    except InvalidAnnotation:
        return None
    if weight is None:
        synced = maximum
    else:
        synced = {r: weight.get(r, q) for r, q in maximum.items()}
        if synced == weight and set(synced) == set(weight):
            return None
    return json.dumps({r: str(q) for r, q in sorted(synced.items())}, separators=(",", ":"))
