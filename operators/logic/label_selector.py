"""metav1.LabelSelector matching, as ``metav1.LabelSelectorAsSelector`` then ``Matches`` does."""

from __future__ import annotations

from collections.abc import Mapping

from apis.meta import LabelSelector, LabelSelectorRequirement

__all__ = ["matches"]


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy every term; an empty selector selects everything and None nothing."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.match_labels or {}).items()):
        return False
    return all(_requirement(r, labels) for r in selector.match_expressions or [])


def _requirement(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    values = requirement.values or []
    present = requirement.key in labels
    match requirement.operator:
        case "In":
            return present and labels[requirement.key] in values
        case "NotIn":
            return not present or labels[requirement.key] not in values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
    return False  # Kubernetes refuses the selector; selecting nothing is the safe reading
