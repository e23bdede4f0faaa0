"""Node affinity for the pods of a profile's quota tree (Koordinator's pod mutating webhook,
``addNodeAffinityForMultiQuotaTree``).

A pod created in a quota that carries a ``tree-id`` of an ElasticQuotaProfile gets the profile's
``nodeSelector`` as required node affinity: every ``matchLabels`` pair becomes an ``In``
requirement, every ``matchExpressions`` entry a requirement with the same operator and values;
they are ANDed into each of the pod's required terms (a pod without any gets one term holding
them). The pod thereby lands only on the tree's nodes under any scheduler.

Which quota: the pod's ``quota.scheduling.koordinator.sh/name`` label, else the quota named like
the pod's namespace in that namespace, as Koordinator's webhook looks it up.
"""

from __future__ import annotations

from apis.core import NodeSelector, Pod
from apis.extension import quota as keys
from apis.meta import LabelSelector, NodeSelectorRequirement, NodeSelectorTerm
from apis.scheduling.elasticquota import ElasticQuota

__all__ = ["quota_lookup", "selector_requirements", "tree_id", "with_tree_affinity"]


def quota_lookup(pod: Pod) -> tuple[str | None, str]:
    """(namespace, name) of the quota to read: (None, label) for a named quota (any namespace),
    else (the pod's namespace, the pod's namespace)."""
    named = (pod.metadata.labels or {}).get(keys.LABEL_QUOTA_NAME)
    if named:
        return None, named
    namespace = pod.metadata.namespace or "default"
    return namespace, namespace


def tree_id(quota: ElasticQuota | None) -> str:
    """The quota's tree id ("" for a quota of the default tree, or no quota)."""
    if quota is None:
        return ""
    return (quota.metadata.labels or {}).get(keys.LABEL_QUOTA_TREE_ID, "")


def selector_requirements(selector: LabelSelector) -> list[NodeSelectorRequirement]:
    """A label selector as node selector requirements (matchLabels sorted by key)."""
    out = [
        NodeSelectorRequirement(key=key, operator="In", values=[value])
        for key, value in sorted((selector.match_labels or {}).items())
    ]
    out += [
        NodeSelectorRequirement(key=e.key, operator=e.operator, values=e.values)
        for e in selector.match_expressions or ()
    ]
    return out


def with_tree_affinity(pod: Pod, selector: LabelSelector) -> NodeSelector | None:
    """The pod's required node affinity with the tree's requirements ANDed into every term;
    None when there is nothing to add (an empty selector, or every term holds them already)."""
    requirements = selector_requirements(selector)
    if not requirements:
        return None
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    terms = list(required.node_selector_terms) if required else []
    if not terms:
        return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_expressions=requirements)])
    changed = False
    merged = []
    for term in terms:
        expressions = list(term.match_expressions or ())
        missing = [r for r in requirements if r not in expressions]
        changed = changed or bool(missing)
        merged.append(
            NodeSelectorTerm(match_expressions=expressions + missing, match_fields=term.match_fields)
        )
    return NodeSelector(node_selector_terms=merged) if changed else None
