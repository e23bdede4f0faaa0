"""The Kubernetes shapes that Koordinator's API embeds: ObjectMeta, selectors, taints, conditions.

``KoordResource`` is the root of every custom resource model: apiVersion, kind and metadata,
plus the ``crd`` class attribute that ``apis.crdgen`` renders into a CustomResourceDefinition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from apis.base import CRDInfo, KoordModel
from apis.errors import echo
from apis.types import Int64, Time

__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "NODE_SELECTOR_OPERATORS",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "CheckedLabelSelector",
    "CheckedNodeSelectorTerm",
    "Condition",
    "KoordResource",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "Taint",
    "Toleration",
    "unknown_toleration_values",
]


class OwnerReference(KoordModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KoordModel):
    """The parts of metav1.ObjectMeta that koordinator-py reads or writes."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class ObjectReference(KoordModel):
    """corev1.ObjectReference; every field optional."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class LabelSelectorRequirement(KoordModel):
    key: str
    operator: str
    """In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = None


class LabelSelector(KoordModel):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """metav1.LabelSelector semantics: every matchLabels pair and every expression holds (an
        empty selector matches everything; an unknown operator matches nothing)."""
        for key, value in (self.match_labels or {}).items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions or ():
            values = req.values or []
            if req.operator == "In":
                ok = labels.get(req.key) in values
            elif req.operator == "NotIn":
                ok = req.key not in labels or labels[req.key] not in values
            elif req.operator == "Exists":
                ok = req.key in labels
            elif req.operator == "DoesNotExist":
                ok = req.key not in labels
            else:
                ok = False
            if not ok:
                return False
        return True


LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TOLERATION_OPERATORS = ("", "Exists", "Equal")
TAINT_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_label_selector(selector: LabelSelector) -> LabelSelector:
    for i, req in enumerate(selector.match_expressions or ()):
        if req.operator not in LABEL_SELECTOR_OPERATORS:
            raise ValueError(
                f"matchExpressions[{i}].operator: {echo(req.operator)} is not one of "
                + ", ".join(LABEL_SELECTOR_OPERATORS)
            )
    return selector


CheckedLabelSelector = Annotated[LabelSelector, AfterValidator(_check_label_selector)]
"""A LabelSelector read from an annotation: an unknown operator is refused where it is read, as
``metav1.LabelSelectorAsSelector`` refuses it in Koordinator (plain LabelSelector objects from the
API server were validated there already)."""


def selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes' reading of an optional selector: a null one selects nothing, an empty one all."""
    return selector is not None and selector.matches(labels)


class NodeSelectorRequirement(KoordModel):
    key: str
    operator: str
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: list[str] | None = None


class NodeSelectorTerm(KoordModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


def _check_node_selector_term(term: NodeSelectorTerm) -> NodeSelectorTerm:
    for field, reqs in (("matchExpressions", term.match_expressions), ("matchFields", term.match_fields)):
        for i, req in enumerate(reqs or ()):
            if req.operator not in NODE_SELECTOR_OPERATORS:
                raise ValueError(
                    f"{field}[{i}].operator: {echo(req.operator)} is not one of "
                    + ", ".join(NODE_SELECTOR_OPERATORS)
                )
    return term


CheckedNodeSelectorTerm = Annotated[NodeSelectorTerm, AfterValidator(_check_node_selector_term)]
"""A NodeSelectorTerm read from an annotation: an unknown operator is refused, as Koordinator's
``nodeaffinity.NewNodeSelector`` refuses it."""


class Taint(KoordModel):
    key: str
    value: str | None = None
    effect: str
    """NoSchedule, PreferNoSchedule or NoExecute."""
    time_added: Time | None = None


class Toleration(KoordModel):
    key: str | None = None
    operator: str | None = None
    """Exists or Equal (the default)."""
    value: str | None = None
    effect: str | None = None
    toleration_seconds: Int64 | None = None


def unknown_toleration_values(tolerations: list[Toleration] | None) -> list[str]:
    """What Kubernetes would refuse in ``tolerations`` but Koordinator accepts from an annotation
    (such a toleration tolerates nothing): one line per unknown operator or effect."""
    problems = []
    for i, toleration in enumerate(tolerations or ()):
        if (toleration.operator or "") not in TOLERATION_OPERATORS:
            problems.append(f"tolerations[{i}].operator {echo(toleration.operator)} is unknown")
        if (toleration.effect or "") not in TAINT_EFFECTS:
            problems.append(f"tolerations[{i}].effect {echo(toleration.effect)} is unknown")
    return problems


class Condition(KoordModel):
    """metav1.Condition."""

    type: str = Field(max_length=316)
    status: Literal["True", "False", "Unknown"]
    observed_generation: Int64 | None = Field(default=None, ge=0)
    last_transition_time: Time
    reason: str = Field(max_length=1024)
    message: str = Field(max_length=32768)


class KoordResource(KoordModel):
    """A root API object. Subclasses set ``crd`` and declare ``spec`` / ``status``."""

    crd: ClassVar[CRDInfo]

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @classmethod
    def new(cls, name: str, namespace: str | None = None, **fields: object) -> KoordResource:
        """A fresh object with apiVersion and kind filled in from ``crd``."""
        return cls.model_validate(
            {
                "apiVersion": cls.crd.api_version,
                "kind": cls.crd.kind,
                "metadata": {"name": name, "namespace": namespace},
                **fields,
            }
        )
