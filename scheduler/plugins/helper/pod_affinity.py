"""Pod affinity terms compiled once into hashable values, as kube-scheduler's ``AffinityTerm``
(InterPodAffinity filters and scores with them; Coscheduling keeps a gang's members apart by them).

A term belongs to a pod (its owner): with neither ``namespaces`` nor ``namespaceSelector`` it
selects pods of the owner's namespace; ``matchLabelKeys`` / ``mismatchLabelKeys`` take their values
from the owner's labels and are ANDed into the label selector as ``In`` / ``NotIn`` (what
kube-apiserver merges at pod creation; merging again is harmless, the requirements form a set).
A null label selector matches no pod, an empty one every pod; a null namespace selector matches
no namespace, an empty one every namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.core import PodAffinity, PodAffinityTerm
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import PodMatcher, Requirement, Selector

__all__ = [
    "AffinityTerm",
    "WeightedTerm",
    "all_of",
    "compile_term",
    "may_repel",
    "required_terms",
    "topology_keys",
    "weighted_terms",
]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector
    topology_key: str

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, str]) -> bool:
        """Whether ``pod`` (whose namespace carries ``namespace_labels``) is one the term selects."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(pod.labels)
        return False

    def matcher(self, selected_namespaces: frozenset[str] | None) -> PodMatcher:
        """The term as a ``PodMatcher``, given the namespaces its namespace selector selects
        (None: every namespace)."""
        if self.namespace_selector.nothing:
            return PodMatcher(self.selector, self.namespaces)
        if selected_namespaces is None:
            return PodMatcher(self.selector, None)
        return PodMatcher(self.selector, self.namespaces | selected_namespaces)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


def compile_term(term: PodAffinityTerm, owner: PodInfo) -> AffinityTerm:
    namespaces = frozenset(term.namespaces or ())
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset((owner.namespace,))
    selector = Selector.of(term.label_selector)
    if term.label_selector is not None:
        merged = [
            Requirement(key, "In", frozenset((owner.labels[key],)))
            for key in term.match_label_keys or ()
            if key in owner.labels
        ]
        merged += [
            Requirement(key, "NotIn", frozenset((owner.labels[key],)))
            for key in term.mismatch_label_keys or ()
            if key in owner.labels
        ]
        selector = selector.adding(merged)
    return AffinityTerm(selector, namespaces, Selector.of(term.namespace_selector), term.topology_key)


def required_terms(affinity: PodAffinity | None, owner: PodInfo) -> tuple[AffinityTerm, ...]:
    if affinity is None:
        return ()
    terms = affinity.required_during_scheduling_ignored_during_execution or ()
    return tuple(compile_term(t, owner) for t in terms)


def weighted_terms(affinity: PodAffinity | None, owner: PodInfo) -> tuple[WeightedTerm, ...]:
    if affinity is None:
        return ()
    terms = affinity.preferred_during_scheduling_ignored_during_execution or ()
    return tuple(WeightedTerm(t.weight, compile_term(t.pod_affinity_term, owner)) for t in terms)


def all_of(matchers: Sequence[PodMatcher]) -> PodMatcher:
    """One matcher for "matches every one of ``matchers``": selectors ANDed, namespaces intersected."""
    requirements: set[Requirement] = set()
    namespaces: frozenset[str] | None = None
    nothing = False
    for matcher in matchers:
        nothing = nothing or matcher.selector.nothing
        requirements |= matcher.selector.requirements
        if matcher.namespaces is not None:
            namespaces = matcher.namespaces if namespaces is None else namespaces & matcher.namespaces
    return PodMatcher(Selector(frozenset(requirements), nothing), namespaces)


def topology_keys(terms: Iterable[AffinityTerm]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.topology_key for t in terms))


def may_repel(pod: PodInfo, other: PodInfo) -> bool:
    """Whether ``other`` being near may fail ``pod``'s Filters by required pod anti-affinity, either
    way: a term of one selects the other's labels. Namespaces are not looked at (a cheap
    over-approximation: Filter has the last word)."""
    for owner, target in ((pod, other), (other, pod)):
        affinity = owner.pod.spec.affinity
        if affinity is None or affinity.pod_anti_affinity is None:
            continue
        if any(t.selector.matches(target.labels) for t in required_terms(affinity.pod_anti_affinity, owner)):
            return True
    return False
