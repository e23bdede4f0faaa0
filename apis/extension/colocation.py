"""Batch / mid extended resources and colocation pod annotations (api-reference 2.10).

batch-cpu and mid-cpu are integer milli-cores (cpu ``500m`` becomes ``500``); the memory resources are
bytes. The pod webhook renames cpu/memory requests and limits to these names for koord-batch and
koord-mid pods matched by a ClusterColocationProfile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from apis.base import KoordModel
from apis.extension._annotation import ResourceList, lookup, parse_json
from apis.extension.priority import PRIORITY_BATCH, PRIORITY_MID, PRIORITY_NONE, PRIORITY_PROD

__all__ = [
    "ANNOTATION_EXTENDED_RESOURCE_SPEC",
    "ANNOTATION_POD_REPLACE_RESOURCES",
    "BATCH_CPU",
    "BATCH_MEMORY",
    "DEPRECATED_BATCH_RESOURCE_ALIASES",
    "KOORD_BATCH_CPU",
    "KOORD_BATCH_MEMORY",
    "LABEL_SKIP_UPDATE_RESOURCES",
    "MID_CPU",
    "MID_MEMORY",
    "RESOURCE_NAME_MAP",
    "ExtendedResourceContainerSpec",
    "ExtendedResourceSpec",
    "ReplaceResources",
    "get_extended_resource_spec",
    "get_replace_resources",
    "parse_extended_resource_spec",
    "parse_replace_resources",
    "transform_deprecated_batch_resources",
    "translate_resource_name",
]

_V = TypeVar("_V")

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"
KOORD_BATCH_CPU = "koordinator.sh/batch-cpu"
"""Deprecated alias of kubernetes.io/batch-cpu."""
KOORD_BATCH_MEMORY = "koordinator.sh/batch-memory"
"""Deprecated alias of kubernetes.io/batch-memory."""

DEPRECATED_BATCH_RESOURCE_ALIASES: Mapping[str, str] = {
    KOORD_BATCH_CPU: BATCH_CPU,
    KOORD_BATCH_MEMORY: BATCH_MEMORY,
}


def transform_deprecated_batch_resources(resources: Mapping[str, _V]) -> dict[str, _V]:
    """A resource list (a pod's requests, a node's allocatable, a quota's min or max) with the
    deprecated ``koordinator.sh/batch-*`` names renamed to ``kubernetes.io/batch-*``, as
    koord-scheduler's pod, node and ElasticQuota transformers rewrite them; a deprecated name whose
    new name is also in the list stays as it is."""
    out = dict(resources)
    for old, new in DEPRECATED_BATCH_RESOURCE_ALIASES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


RESOURCE_NAME_MAP: Mapping[str, Mapping[str, str]] = {
    PRIORITY_BATCH: {"cpu": BATCH_CPU, "memory": BATCH_MEMORY},
    PRIORITY_MID: {"cpu": MID_CPU, "memory": MID_MEMORY},
}
"""Priority class -> (cpu/memory -> extended resource name)."""

ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_POD_REPLACE_RESOURCES = "pod.koordinator.sh/replace-resources"
LABEL_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"
"""On a ClusterColocationProfile: do not rename the pod's cpu/memory resources."""


def translate_resource_name(priority_class: str, resource: str) -> str | None:
    """The resource a pod of ``priority_class`` requests instead of ``resource``.

    koord-prod and no class keep the name; koord-batch/koord-mid map cpu and memory to their extended
    names; anything else (e.g. koord-free, or another resource of a batch pod) has no mapping: None.
    """
    if priority_class in (PRIORITY_PROD, PRIORITY_NONE):
        return resource
    return RESOURCE_NAME_MAP.get(priority_class, {}).get(resource)


class ExtendedResourceContainerSpec(KoordModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None


class ExtendedResourceSpec(KoordModel):
    containers: dict[str, ExtendedResourceContainerSpec] | None = None


def parse_extended_resource_spec(raw: str) -> ExtendedResourceSpec:
    return parse_json(ANNOTATION_EXTENDED_RESOURCE_SPEC, raw, ExtendedResourceSpec)


def get_extended_resource_spec(annotations: Mapping[str, str] | None) -> ExtendedResourceSpec:
    """An empty spec when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_EXTENDED_RESOURCE_SPEC)
    return ExtendedResourceSpec() if raw is None else parse_extended_resource_spec(raw)


@dataclass(frozen=True)
class ReplaceResources:
    replace: dict[str, str] = field(default_factory=dict)
    """Resource renames ``from -> to``."""
    erase: list[str] = field(default_factory=list)
    """Resources to remove."""
    ignored: list[str] = field(default_factory=list)
    """Entries that are not ``from:to`` and were skipped, as Koordinator skips them."""


def parse_replace_resources(raw: str) -> ReplaceResources:
    """``"a:b,c:d,e:"``: rename a to b and c to d, erase e. Parts are trimmed; malformed entries are
    skipped (reported in ``ignored``) as Koordinator does."""
    result = ReplaceResources()
    if not raw:
        return result
    for entry in raw.split(","):
        parts = entry.split(":")
        if len(parts) != 2:
            result.ignored.append(entry)
            continue
        source, target = parts[0].strip(), parts[1].strip()
        if not target:
            result.erase.append(source)
        else:
            result.replace[source] = target
    return result


def get_replace_resources(annotations: Mapping[str, str] | None) -> ReplaceResources:
    return parse_replace_resources(lookup(annotations, ANNOTATION_POD_REPLACE_RESOURCES) or "")
