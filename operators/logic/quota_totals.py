"""Node allocatable -> the totals of the built-in root quota and of each ElasticQuotaProfile's tree
root: pure functions, no Kopf, no I/O.

- The cluster total (algorithms 4.8) is the sum of every node's allocatable. koord-manager writes
  it into ``koordinator-root-quota`` as ``spec.min``, ``spec.max`` and the ``total-resource``
  annotation, so ``kubectl get eq`` shows what the default tree shares.
- A profile's tree root (api-reference 1.7, Koordinator's ``quota-controller/profile``) gets the
  selected nodes' allocatable times ``resourceRatio`` as ``total-resource``, that total's
  ``resource-keys`` (default cpu and memory) as ``spec.min`` and 4611686018427387 for each of those
  keys as ``spec.max``; cordoned or NotReady nodes' share goes into ``unschedulable-resource``.
  Labels: ``profile``, ``tree-id`` (FNV-64a of ``namespace/name`` in decimal, as Koordinator),
  ``is-root: "true"``, ``is-parent: "true"`` (so child quotas can hang below it; ``quotaLabels``
  may override it), then ``quotaLabels``.

The ratio is read as koord-scheduler reads it (``apis.quota.elasticquotaprofile.resource_ratio``)
and applied exactly (Koordinator multiplies float64s): milli-CPU and whole units of every other
resource, truncated. A number outside (0, 1] counts as 1, as in Koordinator; a ratio that is no
number at all makes the profile invalid (InvalidSpec), so no tree root is written from a guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict

from apis.core import Node
from apis.extension import quota as keys
from apis.meta import selects
from apis.quantity import Format, Quantity
from apis.quota.elasticquotaprofile import ElasticQuotaProfile, resource_ratio
from apis.resources import CPU, ResourceList, add, from_int_units
from apis.scheduling.elasticquota import ElasticQuota, ElasticQuotaSpec

__all__ = [
    "BUILT_IN_MAX",
    "PROFILE_QUOTA_MAX",
    "DesiredQuota",
    "NodeCapacity",
    "built_in_quota",
    "cluster_root_quota",
    "parse_ratio",
    "profile_tree_id",
    "profile_tree_root",
    "scale",
    "total",
]

PROFILE_QUOTA_MAX = Quantity.from_int(4611686018427387)
"""``spec.max`` of each resource key of a profile's tree root (int64 max / 2000, api-reference)."""

BUILT_IN_MAX = Quantity.from_int((2**63 - 1) // 5)
"""``spec.max`` cpu and memory of the system and default quotas (``ElasticQuotaArgs`` defaults)."""

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3


class NodeCapacity(BaseModel):
    """What the totals read from a node."""

    model_config = ConfigDict(frozen=True)

    name: str
    labels: dict[str, str]
    allocatable: ResourceList
    schedulable: bool
    """Not cordoned and Ready."""

    @classmethod
    def from_node(cls, node: Node) -> NodeCapacity:
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        return cls(
            name=node.metadata.name or "",
            labels=dict(node.metadata.labels or {}),
            allocatable=dict(node.status.allocatable or {}),
            schedulable=ready and not node.spec.unschedulable,
        )


class DesiredQuota(BaseModel):
    """The parts of an ElasticQuota koord-manager owns: set these, leave everything else alone."""

    model_config = ConfigDict(frozen=True)

    labels: dict[str, str]
    annotations: dict[str, str]
    spec: ElasticQuotaSpec

    def differs_from(self, current: ElasticQuota) -> bool:
        labels = current.metadata.labels or {}
        annotations = current.metadata.annotations or {}
        spec = current.spec or ElasticQuotaSpec()
        return (
            any(labels.get(k) != v for k, v in self.labels.items())
            or any(annotations.get(k) != v for k, v in self.annotations.items())
            or (spec.min or {}) != (self.spec.min or {})
            or (spec.max or {}) != (self.spec.max or {})
        )

    def merge_patch(self, current: ElasticQuota | None = None) -> dict[str, Any]:
        """A JSON merge patch that sets exactly these parts; resources ``current`` has in min or max
        and these do not are removed (a merge patch would otherwise keep them)."""
        spec = (current.spec if current else None) or ElasticQuotaSpec()
        return {
            "metadata": {"labels": dict(self.labels), "annotations": dict(self.annotations)},
            "spec": {
                "min": _replacing(spec.min or {}, self.spec.min or {}),
                "max": _replacing(spec.max or {}, self.spec.max or {}),
            },
        }

    def new_quota(self, name: str, namespace: str) -> ElasticQuota:
        quota = ElasticQuota.new(name, namespace, spec=self.spec.model_dump(by_alias=True, mode="json"))
        assert isinstance(quota, ElasticQuota)
        quota.metadata.labels = dict(self.labels)
        quota.metadata.annotations = dict(self.annotations)
        return quota


def _replacing(current: Mapping[str, Quantity], wanted: Mapping[str, Quantity]) -> dict[str, str | None]:
    patch: dict[str, str | None] = {r: None for r in current if r not in wanted}
    patch.update(_wire(wanted))
    return patch


def _wire(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {r: str(q) for r, q in sorted(resources.items())}


def _json(resources: Mapping[str, Quantity]) -> str:
    return json.dumps(_wire(resources), separators=(",", ":"))


def total(nodes: Iterable[NodeCapacity]) -> ResourceList:
    """The sum of the nodes' allocatable, per resource."""
    result: ResourceList = {}
    for node in nodes:
        result = add(result, node.allocatable)
    return result


def parse_ratio(raw: str | None) -> Fraction:
    """``resourceRatio`` as an exact fraction; 1 when absent or outside (0, 1]. Raises InvalidSpec
    naming ``spec.resourceRatio`` when it is no number Go's ParseFloat accepts (or a hostile one)."""
    return resource_ratio(raw)


def scale(resources: Mapping[str, Quantity], ratio: Fraction) -> ResourceList:
    """Each quantity times ``ratio``, truncated to milli-CPU or whole units."""
    if ratio == 1:
        return dict(resources)
    result: ResourceList = {}
    for name, quantity in resources.items():
        units = quantity.milli_value() if name == CPU else quantity.value()
        result[name] = from_int_units(name, int(units * ratio))
    return result


def profile_tree_id(namespace: str, name: str) -> str:
    """Koordinator's tree id for a profile: FNV-64a of ``namespace/name``, in decimal."""
    digest = _FNV64_OFFSET
    for byte in f"{namespace}/{name}".encode():
        digest = ((digest ^ byte) * _FNV64_PRIME) % 2**64
    return str(digest)


def cluster_root_quota(nodes: Iterable[NodeCapacity]) -> DesiredQuota:
    """``koordinator-root-quota``: every node's allocatable as min, max and ``total-resource``."""
    cluster = total(nodes)
    return DesiredQuota(
        labels={keys.LABEL_QUOTA_IS_PARENT: "true", keys.LABEL_ALLOW_LENT_RESOURCE: "false"},
        annotations={keys.ANNOTATION_TOTAL_RESOURCE: _json(cluster)},
        spec=ElasticQuotaSpec(min=dict(cluster), max=dict(cluster)),
    )


def profile_tree_root(
    profile: ElasticQuotaProfile, tree_id: str, nodes: Iterable[NodeCapacity]
) -> DesiredQuota:
    """The tree root quota the profile asks for, from the nodes its selector picks.

    Raises InvalidSpec when ``spec.resourceRatio`` is malformed: the profile is invalid.
    """
    assert profile.spec is not None
    ratio = parse_ratio(profile.spec.resource_ratio)
    selected = [n for n in nodes if selects(profile.spec.node_selector, n.labels)]
    tree_total = scale(total(selected), ratio)
    unschedulable = scale(total(n for n in selected if not n.schedulable), ratio)
    try:
        resource_keys = keys.get_resource_keys(profile.metadata.annotations)
    except ValueError:
        resource_keys = list(keys.DEFAULT_RESOURCE_KEYS)  # Koordinator logs and keeps the default
    zero = Quantity.from_int(0, Format.DECIMAL_SI)
    labels = {
        keys.LABEL_QUOTA_PROFILE: profile.metadata.name or "",
        keys.LABEL_QUOTA_IS_PARENT: "true",
        **(profile.spec.quota_labels or {}),
        keys.LABEL_QUOTA_TREE_ID: tree_id,
        keys.LABEL_QUOTA_IS_ROOT: "true",
    }
    return DesiredQuota(
        labels=labels,
        annotations={
            keys.ANNOTATION_TOTAL_RESOURCE: _json(tree_total),
            keys.ANNOTATION_UNSCHEDULABLE_RESOURCE: _json(unschedulable),
        },
        spec=ElasticQuotaSpec(
            min={k: tree_total.get(k, zero) for k in resource_keys},
            max={k: PROFILE_QUOTA_MAX for k in resource_keys},
        ),
    )


def built_in_quota(name: str) -> DesiredQuota:
    """``koordinator-system-quota`` or ``koordinator-default-quota`` as Koordinator's scheduler creates
    them: no labels (their parent is the root), ``spec.max`` int64 max / 5 of cpu and memory."""
    return DesiredQuota(
        labels={},
        annotations={},
        spec=ElasticQuotaSpec(max={"cpu": BUILT_IN_MAX, "memory": BUILT_IN_MAX}),
    )
