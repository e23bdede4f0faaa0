"""What makes an ElasticQuota invalid in its tree: pure functions, no Kopf, no I/O.

``operators.handlers.elasticquota`` calls them at admission with the candidate object, its
previous version (UPDATE) and every quota koord-manager knows. Each returns the problems as
``field: what is wrong`` strings that name the quota and the resource; an empty list admits.

Quotas are identified by name across namespaces, as in Koordinator's tree. The rules are
algorithms.md 4.9, in its numbering:

1. No negative value in ``spec.max``, ``spec.min`` or the ``shared-weight`` annotation.
2. Every resource of ``spec.min`` is in ``spec.max``, with min <= max.
3. For each key of ``max-strict-check-resource-keys`` that ``status.used`` has: max >= used.
5. ``is-parent`` cannot go from ``"true"`` to anything else while the quota has children.
6. ``tree-id`` cannot change and must equal the parent's (below root) and every child's.
7. A leaf directly under ``koordinator-root-quota`` stops here.
8. The parent exists and is labelled ``is-parent: "true"`` (the root excepted); the parent chain
   never leads back to the quota (a cycle).
9. ``spec.max`` has exactly the parent's resource names and ``spec.min`` a subset of the parent's
   min names (parent root excepted); the same between the quota and each child.
10. Unless the quota is a tree root or labelled ``allow-force-update: "true"``: the siblings' min
    (this quota included) sum to at most the parent's min (parent root excepted), and the
    children's min sum to at most the quota's own min.
12. Delete: the root, system and default quotas, and a quota with child quotas, stay; so does a
    quota that pods name in their ``quota.scheduling.koordinator.sh/name`` label.
14. A namespace is listed in the ``namespaces`` annotation of one quota only.

Rule 5's other half, ``is-parent`` going to ``"true"`` while the quota has pods, is
``is_parent_with_pods``. The pods are found by the caller as Koordinator's webhook finds them
(``hasQuotaBoundedPods``: the label, the namespace named like the quota, the namespaces of its
``namespaces`` annotation; pods in any phase). Rule 11, with the ElasticQuotaGuaranteeUsage gate
only, is ``guarantee_for_min``. Where users and tools match on Koordinator's own wording, it
follows ours in parentheses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from apis.errors import InvalidAnnotation
from apis.extension import quota as keys
from apis.quantity import Quantity
from apis.resources import add, max_of
from apis.scheduling.elasticquota import ElasticQuota

__all__ = [
    "BUILT_IN_QUOTAS",
    "children_of",
    "guarantee_for_min",
    "is_parent_with_pods",
    "validate",
    "validate_delete",
    "validate_self",
]

BUILT_IN_QUOTAS = frozenset({keys.ROOT_QUOTA_NAME, keys.SYSTEM_QUOTA_NAME, keys.DEFAULT_QUOTA_NAME})

_PARENT = f"metadata.labels[{keys.LABEL_QUOTA_PARENT}]"
_IS_PARENT = f"metadata.labels[{keys.LABEL_QUOTA_IS_PARENT}]"
_TREE_ID = f"metadata.labels[{keys.LABEL_QUOTA_TREE_ID}]"
_NAMESPACES = f"metadata.annotations[{keys.ANNOTATION_QUOTA_NAMESPACES}]"


def _name(quota: ElasticQuota) -> str:
    return quota.metadata.name or ""


def _labels(quota: ElasticQuota) -> dict[str, str]:
    return quota.metadata.labels or {}


def _min(quota: ElasticQuota) -> dict[str, Quantity]:
    return dict(quota.spec.min or {}) if quota.spec else {}


def _max(quota: ElasticQuota) -> dict[str, Quantity]:
    return dict(quota.spec.max or {}) if quota.spec else {}


def _parent(quota: ElasticQuota) -> str:
    return keys.parent_quota_name(_name(quota), quota.metadata.labels)


def _tree_id(quota: ElasticQuota) -> str:
    return _labels(quota).get(keys.LABEL_QUOTA_TREE_ID, "")


def _names(values: Iterable[str]) -> str:
    return ", ".join(sorted(values))


def children_of(name: str, quotas: Iterable[ElasticQuota]) -> list[ElasticQuota]:
    """The quotas whose parent is ``name``, in name order."""
    return sorted((q for q in quotas if _parent(q) == name and _name(q) != name), key=_name)


def validate_self(quota: ElasticQuota) -> list[str]:
    """Rules 1-3: what is wrong with the quota on its own."""
    problems: list[str] = []
    minimum, maximum = _min(quota), _max(quota)
    for field, resources in (("spec.max", maximum), ("spec.min", minimum)):
        problems += [f"{field}.{r} ({q}) is negative" for r, q in sorted(resources.items()) if q.sign() < 0]
    annotations = quota.metadata.annotations or {}
    try:
        weight = keys.get_quota_resource_list(annotations, keys.ANNOTATION_SHARED_WEIGHT) or {}
    except InvalidAnnotation as exc:
        problems.append(f"metadata.annotations[{exc.key}]: {exc.problem}")
    else:
        problems += [
            f"metadata.annotations[{keys.ANNOTATION_SHARED_WEIGHT}].{r} ({q}) is negative"
            for r, q in sorted(weight.items())
            if q.sign() < 0
        ]
    for resource, low in sorted(minimum.items()):
        high = maximum.get(resource)
        if high is None:
            problems.append(f"spec.min.{resource} is set but spec.max has no {resource}")
        elif high < low:
            problems.append(f"spec.min.{resource} ({low}) exceeds spec.max.{resource} ({high})")
    problems += _max_strict_check(quota, maximum)
    return problems


def _max_strict_check(quota: ElasticQuota, maximum: Mapping[str, Quantity]) -> list[str]:
    raw = (quota.metadata.annotations or {}).get(keys.ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS)
    if not raw:
        return []
    try:
        strict = keys.parse_max_strict_check_resource_keys(raw)
    except InvalidAnnotation as exc:
        return [f"metadata.annotations[{exc.key}]: {exc.problem}"]
    used = (quota.status.used or {}) if quota.status else {}
    problems: list[str] = []
    for resource in strict:
        if resource not in used:
            continue
        if resource not in maximum:
            problems.append(f"spec.max has no {resource}, which status.used has and strict check requires")
        elif maximum[resource] < used[resource]:
            problems.append(
                f"spec.max.{resource} ({maximum[resource]}) is below status.used.{resource} "
                f"({used[resource]}), which strict check forbids"
            )
    return problems


def validate(candidate: ElasticQuota, old: ElasticQuota | None, quotas: Sequence[ElasticQuota]) -> list[str]:
    """Every reason to refuse creating (``old`` None) or updating ``candidate``.

    ``quotas`` are the quotas that exist now; a version of the candidate among them is ignored.
    """
    name = _name(candidate)
    others = {_name(q): q for q in quotas if _name(q) != name}
    problems = validate_self(candidate)
    if old is None:
        problems += _duplicate_name(candidate, quotas)
    problems += _claimed_namespaces(candidate, others.values())
    if name == keys.ROOT_QUOTA_NAME:
        return problems
    return problems + _tree_rules(candidate, old, others)


def _duplicate_name(candidate: ElasticQuota, quotas: Sequence[ElasticQuota]) -> list[str]:
    name, namespace = _name(candidate), candidate.metadata.namespace
    return [
        f"metadata.name: quota {name!r} already exists in namespace {q.metadata.namespace!r} "
        "(quota names are unique across namespaces)"
        for q in quotas
        if _name(q) == name and q.metadata.namespace != namespace
    ]


def _claimed_namespaces(candidate: ElasticQuota, others: Iterable[ElasticQuota]) -> list[str]:
    try:
        wanted = keys.get_quota_namespaces(candidate.metadata.annotations) or []
    except InvalidAnnotation as exc:
        return [f"{_NAMESPACES}: {exc.problem}"]
    problems: list[str] = []
    for other in sorted(others, key=_name):
        try:
            claimed = set(keys.get_quota_namespaces(other.metadata.annotations) or [])
        except InvalidAnnotation:
            continue
        problems += [
            f"{_NAMESPACES}: namespace {ns!r} is already claimed by quota {_name(other)!r}"
            for ns in sorted(set(wanted) & claimed)
        ]
    return problems


def _tree_rules(
    candidate: ElasticQuota, old: ElasticQuota | None, others: Mapping[str, ElasticQuota]
) -> list[str]:
    name, parent_name = _name(candidate), _parent(candidate)
    children = children_of(name, others.values())
    problems: list[str] = []
    # 5
    demoted = old is not None and keys.is_parent(old.metadata.labels)
    if demoted and children and not keys.is_parent(candidate.metadata.labels):
        problems.append(
            f'{_IS_PARENT}: cannot change from "true" while quota {name!r} has child quotas: '
            + _names(_name(c) for c in children)
        )
    # 8 (cycle), before anything walks the tree
    cycle = _cycle(name, parent_name, others)
    if cycle:
        return [*problems, f"{_PARENT}: {parent_name!r} would make a cycle: {' -> '.join(cycle)}"]
    parent = others.get(parent_name)
    # 6
    problems += _tree_id_rules(candidate, old, parent, children)
    # 7
    if parent_name == keys.ROOT_QUOTA_NAME and not keys.is_parent(candidate.metadata.labels):
        return problems
    # 8
    if parent_name != keys.ROOT_QUOTA_NAME:
        if parent is None:
            return [*problems, f"{_PARENT}: parent quota {parent_name!r} does not exist"]
        if not keys.is_parent(parent.metadata.labels):
            return [
                *problems,
                f"{_PARENT}: parent quota {parent_name!r} is not labelled {keys.LABEL_QUOTA_IS_PARENT}: "
                '"true"',
            ]
    # 9
    if parent is not None and parent_name != keys.ROOT_QUOTA_NAME:
        problems += _key_rules(candidate, parent, f"parent quota {parent_name!r}")
    for child in children:
        problems += [f"child quota {_name(child)!r}: {p}" for p in _key_rules(child, candidate, "this quota")]
    # 10
    labels = candidate.metadata.labels
    if not keys.allow_force_update(labels) and not keys.is_tree_root(labels):
        if parent is not None and parent_name != keys.ROOT_QUOTA_NAME:
            siblings = children_of(parent_name, others.values())
            problems += _min_sum(
                [*siblings, candidate],
                _min(parent),
                f"the children of {parent_name!r} (this quota included)",
                f"parent quota {parent_name!r}",
            )
        problems += _min_sum(children, _min(candidate), f"the children of {name!r}", "this quota")
    return problems


def _cycle(name: str, parent_name: str, others: Mapping[str, ElasticQuota]) -> list[str]:
    """The chain ``name -> parent -> ... -> name`` if the parent chain comes back to ``name``."""
    chain, current, seen = [name], parent_name, {name}
    while current and current != keys.ROOT_QUOTA_NAME:
        chain.append(current)
        if current == name:
            return chain
        if current in seen:
            return []  # an existing cycle above, not through this quota
        seen.add(current)
        above = others.get(current)
        if above is None:
            return []
        current = _parent(above)
    return []


def _tree_id_rules(
    candidate: ElasticQuota,
    old: ElasticQuota | None,
    parent: ElasticQuota | None,
    children: Sequence[ElasticQuota],
) -> list[str]:
    tree_id = _tree_id(candidate)
    problems: list[str] = []
    if old is not None and _tree_id(old) != tree_id:
        problems.append(f"{_TREE_ID}: cannot change ({_tree_id(old)!r} -> {tree_id!r})")
    if parent is not None and _parent(candidate) != keys.ROOT_QUOTA_NAME and _tree_id(parent) != tree_id:
        problems.append(
            f"{_TREE_ID}: {tree_id!r} differs from {_tree_id(parent)!r} of parent quota {_name(parent)!r}"
        )
    problems += [
        f"{_TREE_ID}: {tree_id!r} differs from {_tree_id(c)!r} of child quota {_name(c)!r}"
        for c in children
        if _tree_id(c) != tree_id
    ]
    return problems


def _key_rules(child: ElasticQuota, parent: ElasticQuota, parent_desc: str) -> list[str]:
    """Rule 9 between one child and its parent, phrased from the child's side."""
    problems: list[str] = []
    child_max, parent_max = set(_max(child)), set(_max(parent))
    if child_max != parent_max:
        problems.append(
            f"spec.max names [{_names(child_max)}] but spec.max of {parent_desc} names "
            f"[{_names(parent_max)}]: they must be the same resources"
        )
    extra_min = set(_min(child)) - set(_min(parent))
    if extra_min:
        problems.append(f"spec.min.{_names(extra_min)} is not in spec.min of {parent_desc}")
    return problems


def _min_sum(
    members: Sequence[ElasticQuota], limit: Mapping[str, Quantity], who: str, limit_desc: str
) -> list[str]:
    """Problems where the members' min summed per resource exceeds ``limit`` (a missing limit is 0)."""
    total: dict[str, Quantity] = {}
    for member in members:
        total = add(total, _min(member))
    zero = Quantity.from_int(0)
    return [
        f"spec.min.{resource}: {who} sum to {amount}, more than spec.min.{resource} of {limit_desc} "
        f"({limit.get(resource, zero)})"
        for resource, amount in sorted(total.items())
        if limit.get(resource, zero) < amount
    ]


def validate_delete(
    quota: ElasticQuota, quotas: Sequence[ElasticQuota], pods: Sequence[str] = ()
) -> list[str]:
    """Rule 12: why ``quota`` cannot be deleted now; ``pods``: the names of the pods labelled with
    it (Koordinator's webhook looks at the label only here)."""
    name = _name(quota)
    if name in BUILT_IN_QUOTAS:
        return [f"{name!r} is a built-in quota and cannot be deleted"]
    children = children_of(name, [q for q in quotas if _name(q) != name])
    if children:
        return [f"quota {name!r} has child quotas ({_names(_name(c) for c in children)}): delete them first"]
    if pods:
        listed = sorted(pods)
        ours = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        theirs = ", ".join([*pods[:2], "..."] if len(pods) > 2 else pods)
        return [
            f"pods still charge quota {name!r} ({ours}): delete them or move them to another quota "
            f"first (delete quota failed, quota {name} has {len(pods)} child pods: {theirs})"
        ]
    return []


def is_parent_with_pods(candidate: ElasticQuota, old: ElasticQuota | None, has_pods: bool) -> list[str]:
    """Rule 5, the other way: a quota that pods charge cannot become a parent (pods of a parent
    quota are never scheduled). ``has_pods``: see the module docstring."""
    turned_on = old is not None and not keys.is_parent(old.metadata.labels)
    if not (turned_on and keys.is_parent(candidate.metadata.labels) and has_pods):
        return []
    name = _name(candidate)
    return [
        f'{_IS_PARENT}: cannot change to "true" while pods charge quota {name!r} (quota has bound '
        f"pods, isParent is forbidden to modify as true, quotaName: {name})"
    ]


def _guaranteed(quota: ElasticQuota) -> dict[str, Quantity]:
    """The ``guaranteed`` annotation the scheduler writes under the gate ({} when absent or malformed)."""
    try:
        return dict(
            keys.get_quota_resource_list(quota.metadata.annotations, keys.ANNOTATION_GUARANTEED) or {}
        )
    except InvalidAnnotation:
        return {}


def _within(amounts: Mapping[str, Quantity], limit: Mapping[str, Quantity]) -> bool:
    zero = Quantity.from_int(0)
    return all(amount <= limit.get(resource, zero) for resource, amount in amounts.items())


def _list(amounts: Mapping[str, Quantity]) -> str:
    return ", ".join(f"{resource}: {amount}" for resource, amount in sorted(amounts.items())) or "nothing"


def guarantee_for_min(candidate: ElasticQuota, quotas: Sequence[ElasticQuota]) -> list[str]:
    """Rule 11 (ElasticQuotaGuaranteeUsage), as Koordinator's ``checkGuaranteedForMin``: a quota of a
    tree (not its root, not ``allow-force-update``) may raise its min above its ``guaranteed`` only
    if its ancestors can guarantee it: going up, a parent must hold ``max(its min, this need plus
    its other children's guaranteed)`` within its own ``guaranteed``, or pass the need on; the
    tree's root cannot pass it on."""
    labels = _labels(candidate)
    if keys.allow_force_update(labels) or not _tree_id(candidate) or keys.is_tree_root(labels):
        return []
    name, minimum, guaranteed = _name(candidate), _min(candidate), _guaranteed(candidate)
    if _within(minimum, guaranteed):
        return []
    others = {_name(q): q for q in quotas if _name(q) != name}
    need, child, parent_name = max_of(minimum, guaranteed), name, _parent(candidate)
    while parent_name != keys.ROOT_QUOTA_NAME:
        parent = others.get(parent_name)
        if parent is None:
            return []  # rule 8 reports the missing parent
        total = dict(need)
        for sibling in children_of(parent_name, others.values()):
            if _name(sibling) != child:
                total = add(total, _guaranteed(sibling))
        need = max_of(_min(parent), total)
        if _within(need, _guaranteed(parent)):
            return []
        child, parent_name = parent_name, _parent(parent)
    return [
        f"spec.min: quota {name!r} asks for more than it is guaranteed ({_list(guaranteed)}), and up to "
        f"the tree root {child!r} ({_list(_guaranteed(others.get(child, candidate)))} guaranteed) no "
        f"quota can guarantee {_list(need)} (tree root quota {child} can't guarantee for min)"
    ]
