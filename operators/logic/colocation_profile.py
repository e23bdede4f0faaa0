"""ClusterColocationProfile pod mutation (algorithms.md 10.6), pure: no Kopf, no client.

koord-manager's pod webhook (``operators.handlers.colocation_profile``) runs these steps on a new pod:

1. :func:`matching`: the profiles whose ``namespaceSelector`` matches the namespace's labels and
   whose ``selector`` matches the pod's labels (an absent or empty selector matches everything),
   sorted by name. Unlike Koordinator, a selector that cannot be evaluated (an unknown operator,
   ``In`` without values, a namespace whose labels could not be read) does **not** match: a broken
   profile leaves pods alone instead of mutating every pod of the cluster.
2. :func:`rolled`: each matched profile applies with its ``probability``: unset is 100, ``N`` or
   ``"N%"`` applies when a uniform roll in [0, 100) is below N, so N% is exactly N chances in 100
   (Koordinator's ``rand.Intn(100) > N`` skip gives N+1). The roll is injected (``Dice``).
3. :func:`mutate`, for the profiles that applied, in name order (a later one overwrites an earlier
   one): ``labels``, ``annotations``, ``labelKeysMapping``, ``annotationKeysMapping``,
   ``labelSuffixes``, ``schedulerName``, ``qosClass`` (label ``koordinator.sh/qosClass``),
   ``priorityClassName`` (with the PriorityClass's value and preemptionPolicy), ``koordinatorPriority``
   (label ``koordinator.sh/priority``), then ``patch`` as a strategic merge patch
   (``operators.logic.strategic_merge``, which lists the subset supported). Then, unless an applied
   profile carries ``config.koordinator.sh/skip-update-resources``, :func:`convert_resources` renames
   cpu and memory to the batch or mid resources of the pod's priority class, and
   :func:`with_extended_resource_spec` writes ``node.koordinator.sh/extended-resource-spec``.

Nothing happens to a pod no profile applied to: a profile that lost its roll converts no resources
(Koordinator converts them as soon as one profile matched, algorithms.md 10.8).

The pod is handled as its plain JSON object rather than the ``apis.core.Pod`` model: that model is
the subset the scheduler reads, and a mutation must give back every other field unchanged.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.core import PriorityClass
from apis.extension import colocation
from apis.extension.priority import (
    LABEL_POD_PRIORITY,
    LABEL_POD_PRIORITY_CLASS,
    PRIORITY_BATCH,
    PRIORITY_MID,
    priority_class_of,
)
from apis.extension.qos import LABEL_POD_QOS
from apis.meta import LabelSelector
from apis.quantity import Quantity
from operators.logic import strategic_merge

__all__ = [
    "Dice",
    "MissingPriorityClass",
    "convert_resources",
    "extended_resource_spec",
    "matching",
    "mutate",
    "parse_probability",
    "probability_of",
    "rolled",
    "selector_problems",
    "selects",
    "validate",
    "with_extended_resource_spec",
]

Dice = Callable[[], int]
"""A uniform random integer in [0, 100) (``random.Random(seed).randrange(100)`` in tests)."""

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^(({_DNS_SUBDOMAIN})/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_OPERATORS_WITH_VALUES = ("In", "NotIn")
_OPERATORS_WITHOUT_VALUES = ("Exists", "DoesNotExist")


class MissingPriorityClass(LookupError):
    """A profile that applied names a PriorityClass that does not exist."""

    def __init__(self, profile: str, name: str) -> None:
        super().__init__(
            f"ClusterColocationProfile {profile!r} sets priorityClassName {name!r}, "
            f"but no PriorityClass {name!r} exists: create it or fix the profile"
        )
        self.profile = profile
        self.name = name


# ---- 1. matching ---------------------------------------------------------------------------------


def _key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if not _KEY_RE.match(key) or len(name) > 63 or len(prefix) > 253:
        return f"{key!r} is not a valid label key"
    return None


def selector_problems(selector: LabelSelector | None, field: str) -> list[str]:
    """Why ``selector`` cannot be evaluated, as Kubernetes' ``LabelSelectorAsSelector`` refuses it
    (an empty list: it can)."""
    if selector is None:
        return []
    found: list[str] = []
    for key, value in (selector.match_labels or {}).items():
        if (problem := _key_problem(key)) is not None:
            found.append(f"{field}.matchLabels: {problem}")
        if not _VALUE_RE.match(value) or len(value) > 63:
            found.append(f"{field}.matchLabels[{key}]: {value!r} is not a valid label value")
    for i, req in enumerate(selector.match_expressions or ()):
        here = f"{field}.matchExpressions[{i}]"
        if (problem := _key_problem(req.key)) is not None:
            found.append(f"{here}.key: {problem}")
        values = req.values or []
        if req.operator in _OPERATORS_WITH_VALUES:
            if not values:
                found.append(f"{here}.values: must be non-empty for operator {req.operator}")
        elif req.operator in _OPERATORS_WITHOUT_VALUES:
            if values:
                found.append(f"{here}.values: must be empty for operator {req.operator}")
        else:
            found.append(f"{here}.operator: {req.operator!r} is not In, NotIn, Exists or DoesNotExist")
        for value in values:
            if not _VALUE_RE.match(value) or len(value) > 63:
                found.append(f"{here}.values: {value!r} is not a valid label value")
    return found


def selects(selector: LabelSelector | None, labels: Mapping[str, str] | None) -> bool:
    """A profile's reading of a selector: absent or empty matches everything; one that cannot be
    evaluated, or labels that could not be read (None), match nothing."""
    if selector is None or (not selector.match_labels and not selector.match_expressions):
        return True
    if labels is None or selector_problems(selector, ""):
        return False
    return selector.matches(labels)


def matching(
    profiles: Iterable[ClusterColocationProfile],
    pod_labels: Mapping[str, str],
    namespace_labels: Mapping[str, str] | None,
) -> list[ClusterColocationProfile]:
    """The profiles that match the pod, sorted by name. ``namespace_labels`` is None when the
    namespace could not be read: a profile with a namespaceSelector then does not match."""
    found = [
        profile
        for profile in profiles
        if profile.spec is not None
        and selects(profile.spec.namespace_selector, namespace_labels)
        and selects(profile.spec.selector, pod_labels)
    ]
    return sorted(found, key=lambda p: p.metadata.name or "")


# ---- 2. probability ------------------------------------------------------------------------------


def parse_probability(value: int | str | None) -> int:
    """``spec.probability`` as a percentage: None is 100, ``N`` or ``"N%"`` is N (0 or more; above
    100 always applies). Raises ValueError naming the field for anything else."""
    if value is None:
        return 100
    if isinstance(value, str):
        digits = value[:-1] if value.endswith("%") else ""
        if not digits.isdigit() or not digits.isascii():
            raise ValueError(f"spec.probability: {value!r} is neither an integer nor a percentage like '50%'")
        value = int(digits)
    if value < 0:
        raise ValueError(f"spec.probability: {value} is negative")
    return value


def probability_of(profile: ClusterColocationProfile) -> int:
    """The profile's probability; 0 (never applies) when it cannot be parsed."""
    try:
        return parse_probability(profile.spec.probability if profile.spec else None)
    except ValueError:
        return 0


def rolled(profiles: Sequence[ClusterColocationProfile], dice: Dice) -> list[ClusterColocationProfile]:
    """The profiles that win their roll, in the given order; a profile of probability 100 or more
    (or unset) rolls no dice, one of 0 never applies."""
    applied = []
    for profile in profiles:
        chance = probability_of(profile)
        if chance >= 100 or (chance > 0 and dice() < chance):
            applied.append(profile)
    return applied


# ---- 3. mutation ---------------------------------------------------------------------------------


def _labels(pod: dict[str, Any], key: str) -> dict[str, str]:
    meta: dict[str, Any] = pod.setdefault("metadata", {})
    found: dict[str, str] | None = meta.get(key)
    if found is None:
        found = meta[key] = {}
    return found


def _apply_profile(
    pod: dict[str, Any], profile: ClusterColocationProfile, priority_classes: Mapping[str, PriorityClass]
) -> dict[str, Any]:
    spec = profile.spec
    if spec is None:
        return pod
    name = profile.metadata.name or ""
    if spec.labels:
        _labels(pod, "labels").update(spec.labels)
    if spec.annotations:
        _labels(pod, "annotations").update(spec.annotations)
    # The mappings read the values as they were before the step, so chained keys (a->b, b->c) do
    # not depend on the order of the map (Go's iteration order is random).
    mappings = (("labels", spec.label_keys_mapping), ("annotations", spec.annotation_keys_mapping))
    for field, mapping in mappings:
        if mapping:
            current = _labels(pod, field)
            before = dict(current)
            for old_key, new_key in sorted(mapping.items()):
                current[new_key] = before.get(old_key, "")
    if spec.label_suffixes:
        labels = _labels(pod, "labels")
        for key, suffix in sorted(spec.label_suffixes.items()):
            if key in labels:
                labels[key] = labels[key] + suffix
    pod_spec: dict[str, Any] = pod.setdefault("spec", {})
    if spec.scheduler_name:
        pod_spec["schedulerName"] = spec.scheduler_name
    if spec.qos_class:
        _labels(pod, "labels")[LABEL_POD_QOS] = spec.qos_class
    if spec.priority_class_name:
        klass = priority_classes.get(spec.priority_class_name)
        if klass is None:
            raise MissingPriorityClass(name, spec.priority_class_name)
        pod_spec["priorityClassName"] = spec.priority_class_name
        pod_spec["priority"] = klass.value
        if klass.preemption_policy:
            pod_spec["preemptionPolicy"] = klass.preemption_policy
    if spec.koordinator_priority is not None:
        _labels(pod, "labels")[LABEL_POD_PRIORITY] = str(spec.koordinator_priority)
    if spec.patch:
        try:
            pod = strategic_merge.apply(pod, spec.patch)
        except strategic_merge.PatchError as exc:
            message = f"ClusterColocationProfile {name!r}: spec.patch: {exc}"
            raise strategic_merge.PatchError(message) from None
    return pod


def _skips_resources(profile: ClusterColocationProfile) -> bool:
    meta = profile.metadata
    key = colocation.LABEL_SKIP_UPDATE_RESOURCES
    return key in (meta.annotations or {}) or key in (meta.labels or {})


def mutate(
    pod: Mapping[str, Any],
    applied: Sequence[ClusterColocationProfile],
    priority_classes: Mapping[str, PriorityClass],
) -> dict[str, Any]:
    """A copy of ``pod`` with every profile of ``applied`` applied in order, then its resources
    converted and the extended-resource-spec annotation written (see the module docstring).

    ``priority_classes`` holds the PriorityClasses the profiles name; a missing one raises
    MissingPriorityClass, a patch that does not fit the pod raises ``strategic_merge.PatchError``.
    With nothing applied, the copy equals ``pod``.
    """
    result = copy.deepcopy(dict(pod))
    if not applied:
        return result
    for profile in applied:
        result = _apply_profile(result, profile, priority_classes)
    if any(_skips_resources(p) for p in applied):
        return result
    convert_resources(result)
    return with_extended_resource_spec(result)


def _pod_priority_class(pod: Mapping[str, Any]) -> str:
    """Koordinator's raw class: the ``koordinator.sh/priority-class`` label, else the range of
    ``spec.priority`` (no QoS fallback: a BE label alone does not make a pod batch)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    priority = (pod.get("spec") or {}).get("priority")
    value = priority if isinstance(priority, int) else None
    return priority_class_of(value, labels.get(LABEL_POD_PRIORITY_CLASS))


def _rename(resources: dict[str, Any] | None, names: Mapping[str, str]) -> None:
    """cpu -> batch/mid cpu in whole milli-cores (rounded up: ``500m`` is 500, ``1.5`` is 1500);
    memory -> batch/mid memory, the same quantity; the native name removed."""
    if not resources:
        return
    for native in ("cpu", "memory"):
        if native not in resources:
            continue
        value = resources.pop(native)
        if native == "cpu":
            value = str(Quantity.parse(value).milli_value())
        resources[names[native]] = value


def convert_resources(pod: dict[str, Any]) -> None:
    """Rename the cpu and memory of a koord-batch (koord-mid) pod to ``kubernetes.io/batch-*``
    (``mid-*``) in every init and regular container's requests and limits and in ``spec.overhead``;
    a container given only a limit of such a resource gets the same request. Other pods are left
    alone."""
    klass = _pod_priority_class(pod)
    if klass not in (PRIORITY_BATCH, PRIORITY_MID):
        return
    names = colocation.RESOURCE_NAME_MAP[klass]
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources")
        if not resources:
            continue
        _rename(resources.get("requests"), names)
        _rename(resources.get("limits"), names)
        limits = resources.get("limits") or {}
        for extended in names.values():
            if extended in limits and extended not in (resources.get("requests") or {}):
                resources.setdefault("requests", {})[extended] = limits[extended]
    _rename(spec.get("overhead"), names)


def extended_resource_spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    """``node.koordinator.sh/extended-resource-spec`` of ``pod``: every regular container's
    batch-cpu and batch-memory requests and limits (Koordinator leaves out init containers, the
    overhead and the mid resources); ``{}`` when no container has any."""
    batch = (colocation.BATCH_CPU, colocation.BATCH_MEMORY)
    containers: dict[str, Any] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        entry: dict[str, Any] = {}
        for part in ("limits", "requests"):
            found = {name: value for name, value in (resources.get(part) or {}).items() if name in batch}
            if found:
                entry[part] = found
        if entry:
            containers[container.get("name", "")] = entry
    return {"containers": containers} if containers else {}


def with_extended_resource_spec(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with the annotation set to :func:`extended_resource_spec` when it differs from what
    the pod carries (a pod with no batch resources and no annotation gets none)."""
    spec = extended_resource_spec(pod)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    current = annotations.get(colocation.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    try:
        unchanged = (json.loads(current) if current is not None else {}) == spec
    except ValueError:
        unchanged = False
    if not unchanged:
        _labels(pod, "annotations")[colocation.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(
            spec, separators=(",", ":"), sort_keys=True
        )
    return pod


# ---- admission -----------------------------------------------------------------------------------


def validate(profile: ClusterColocationProfile) -> list[str]:
    """What makes a profile unusable, for koord-manager's validating webhook: a selector that
    cannot be evaluated, a probability that is no percentage, a patch outside the supported subset."""
    spec = profile.spec
    if spec is None:
        return []
    found = selector_problems(spec.namespace_selector, "spec.namespaceSelector")
    found += selector_problems(spec.selector, "spec.selector")
    try:
        parse_probability(spec.probability)
    except ValueError as exc:
        found.append(str(exc))
    if spec.patch:
        found += strategic_merge.problems(spec.patch)
    return found
