"""A pod's topology spread constraints, compiled: kube-scheduler's ``filterTopologySpreadConstraints``.

Defaults as upstream: ``minDomains`` 1, ``nodeAffinityPolicy`` Honor, ``nodeTaintsPolicy``
Ignore. ``matchLabelKeys``: the pod's values of those keys are ANDed to the selector (a null
selector then becomes just those labels, as upstream's ``mergeLabelSetWithSelector`` makes it).
A selector that ``metav1.LabelSelectorAsSelector`` refuses is an error for the whole pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.core import TopologySpreadConstraint
from apis.meta import LabelSelector
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.pod_selector import PodMatcher, Requirement, Selector

__all__ = ["Constraint", "InvalidConstraint", "compile_constraints", "selector_error"]

_SET_OPERATORS = ("In", "NotIn")
_EXIST_OPERATORS = ("Exists", "DoesNotExist")


class InvalidConstraint(ValueError):
    """A constraint whose label selector is malformed (kube-scheduler fails the pod with it)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    def matcher(self, namespace: str) -> PodMatcher:
        """Pods this constraint counts: same namespace, selected, not terminating."""
        return PodMatcher(self.selector, frozenset((namespace,)), skip_terminating=True)


def selector_error(selector: LabelSelector | None) -> str | None:
    """What ``metav1.LabelSelectorAsSelector`` rejects in ``selector`` (None: it is valid)."""
    for i, expression in enumerate(selector.match_expressions or () if selector else ()):
        values = expression.values or []
        path = f"labelSelector.matchExpressions[{i}]"
        if expression.operator in _SET_OPERATORS and not values:
            return f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty"
        if expression.operator in _EXIST_OPERATORS and values:
            return f"{path}.values: Invalid value: values set must be empty for exists and does not exist"
        if expression.operator not in _SET_OPERATORS + _EXIST_OPERATORS:
            return f"{path}.operator: Unsupported value: {expression.operator!r}"
    return None


def compile_constraints(
    specs: Sequence[TopologySpreadConstraint], pod: PodInfo, action: str, selector: Selector | None = None
) -> tuple[Constraint, ...]:
    """The constraints of ``specs`` whose ``whenUnsatisfiable`` is ``action``; ``selector``
    replaces theirs (the default constraints' per-pod selector). Raises ``InvalidConstraint``."""
    result: list[Constraint] = []
    for spec in specs:
        if spec.when_unsatisfiable != action:
            continue
        compiled = selector
        if compiled is None:
            error = selector_error(spec.label_selector)
            if error is not None:
                raise InvalidConstraint(error)
            compiled = Selector.of(spec.label_selector)
        extra = [
            Requirement(key, "In", frozenset((pod.labels[key],)))
            for key in spec.match_label_keys or ()
            if key in pod.labels
        ]
        if extra:
            compiled = Selector(frozenset(extra)) if compiled.nothing else compiled.adding(extra)
        result.append(
            Constraint(
                max_skew=spec.max_skew,
                topology_key=spec.topology_key,
                selector=compiled,
                min_domains=spec.min_domains if spec.min_domains is not None else 1,
                honor_affinity=spec.node_affinity_policy != "Ignore",
                honor_taints=spec.node_taints_policy == "Honor",
            )
        )
    return tuple(result)
