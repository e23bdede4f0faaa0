"""What makes a Koordinator object invalid at admission: pure functions, no Kopf, no I/O.

The CRD schema already rejects wrong types, unknown enum values and missing required fields.
What it cannot see is checked here, with messages that name the field:

1. the object validated against its pydantic model (Go duration grammar in ``spec.ttl``,
   int32 ranges, everything the schema expresses too, so a schema gap cannot let it through);
2. the JSON- and number-valued annotations Koordinator reads from that kind, parsed with the
   same typed parsers the scheduler uses (a ``gatherStrategy`` strategy of ``"Sometimes"`` is
   rejected here, where Koordinator would silently ignore the whole annotation);
3. per-kind rules across fields of a valid object (``SPEC_CHECKS``): a ClusterNetworkTopology
   whose layers do not form one chain ending at NodeTopologyLayer; an ElasticQuotaProfile whose
   ``resourceRatio`` is no number (Koordinator's controller would fail on it at every resync);
   a Reservation the scheduler could never place or match (``reservation_admission``); a
   PodMigrationJob with an unknown mode or a podRef without namespace and name (``pmj_admission``);
   a ClusterColocationProfile whose selector cannot be evaluated, whose probability is no
   percentage or whose patch uses an unsupported directive (``colocation_profile.validate``).

Lenient keys that Koordinator resolves to a default (an unknown gang ``mode``) are not rejected:
they produce a warning, which kubectl prints: an unknown gang ``mode``, a ``resourceRatio``
outside (0, 1] (Koordinator then uses 1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from apis.config.clustercolocationprofile import ClusterColocationProfile
from apis.errors import InvalidAnnotation, InvalidSpec, echo, summary
from apis.extension import gang, networktopology
from apis.meta import KoordResource
from apis.quota.elasticquotaprofile import ElasticQuotaProfile, parse_resource_ratio
from apis.scheduling.networktopology import ClusterNetworkTopology
from apis.scheduling.podmigrationjob import PodMigrationJob
from apis.scheduling.reservation import Reservation
from operators.logic import colocation_profile, pmj_admission, reservation_admission, topology_tree

__all__ = ["AdmissionResult", "review"]

AnnotationParser = Callable[[str], object]
LenientResolver = Callable[[str | None], Any]

# Gang annotations are honoured on the PodGroup object as well as on pods (api-reference 2.1).
_PODGROUP_STRICT: dict[str, AnnotationParser] = {
    networktopology.ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC: networktopology.parse_network_topology_spec,
    gang.ANNOTATION_GANG_GROUPS: gang.parse_gang_groups,
}
_PODGROUP_LENIENT: dict[str, LenientResolver] = {
    gang.ANNOTATION_GANG_MODE: gang.resolve_gang_mode,
}

STRICT_ANNOTATIONS: dict[str, dict[str, AnnotationParser]] = {"PodGroup": _PODGROUP_STRICT}
LENIENT_ANNOTATIONS: dict[str, dict[str, LenientResolver]] = {"PodGroup": _PODGROUP_LENIENT}

SpecCheck = Callable[[KoordResource], list[str]]


def _network_topology_chain(obj: KoordResource) -> list[str]:
    assert isinstance(obj, ClusterNetworkTopology)
    return topology_tree.validate_chain(obj.spec) if obj.spec is not None else []


def _resource_ratio(obj: KoordResource) -> list[str]:
    assert isinstance(obj, ElasticQuotaProfile)
    raw = obj.spec.resource_ratio if obj.spec is not None else None
    if not raw:
        return []
    try:
        parse_resource_ratio(raw)
    except InvalidSpec as error:
        return [str(error)]
    return []


def _resource_ratio_range(obj: KoordResource) -> list[str]:
    assert isinstance(obj, ElasticQuotaProfile)
    raw = obj.spec.resource_ratio if obj.spec is not None else None
    if not raw or _resource_ratio(obj):
        return []
    if 0 < parse_resource_ratio(raw) <= 1:
        return []
    return [f"spec.resourceRatio: {raw!r} is outside (0, 1]; the quota uses 1 (the nodes' whole total)"]


def _reservation(obj: KoordResource) -> list[str]:
    assert isinstance(obj, Reservation)
    return reservation_admission.validate(obj)


def _pod_migration_job(obj: KoordResource) -> list[str]:
    assert isinstance(obj, PodMigrationJob)
    return pmj_admission.validate(obj)


def _colocation_profile(obj: KoordResource) -> list[str]:
    assert isinstance(obj, ClusterColocationProfile)
    return colocation_profile.validate(obj)


SPEC_CHECKS: dict[str, list[SpecCheck]] = {
    "ClusterColocationProfile": [_colocation_profile],
    "ClusterNetworkTopology": [_network_topology_chain],
    "ElasticQuotaProfile": [_resource_ratio],
    "Reservation": [_reservation],
    "PodMigrationJob": [_pod_migration_job],
}
"""Per-kind checks over an object that passed its model; each returns its problems."""

SPEC_WARNINGS: dict[str, list[SpecCheck]] = {"ElasticQuotaProfile": [_resource_ratio_range]}
"""Per-kind checks whose findings are warnings: Koordinator accepts the object and falls back."""


@dataclass
class AdmissionResult:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.errors

    def message(self) -> str:
        """The problems joined, of bounded size however many there are (``apis.errors.summary``)."""
        return summary(self.errors)


def review(model: type[KoordResource], body: Mapping[str, Any]) -> AdmissionResult:
    """Every reason to reject ``body`` (a wire object of ``model``'s kind), and every warning."""
    result = AdmissionResult()
    kind = model.crd.kind
    try:
        obj = model.model_validate(dict(body))
    except ValidationError as exc:
        result.errors.extend(_describe(error) for error in exc.errors())
    else:
        for check in SPEC_CHECKS.get(kind, []):
            result.errors.extend(check(obj))
        for check in SPEC_WARNINGS.get(kind, []):
            result.warnings.extend(check(obj))
    meta = body.get("metadata")
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    # A body that is no object of strings was denied by the model above; its annotations are not read.
    annotations = {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, Mapping) else {}
    for key, parse in STRICT_ANNOTATIONS.get(kind, {}).items():
        raw = annotations.get(key)
        if raw is None:
            continue
        try:
            parse(raw)
        except InvalidAnnotation as exc:
            result.errors.append(f"metadata.annotations[{key}]: {exc.problem}")
    for key, resolve in LENIENT_ANNOTATIONS.get(kind, {}).items():
        if key in annotations:
            warning = resolve(annotations[key]).warning
            if warning:
                result.warnings.append(f"metadata.annotations[{key}]: {warning}")
    return result


def _describe(error: Any) -> str:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    given = error.get("input")
    shown = (
        f" (got {echo(given)})" if error["type"] != "missing" and not isinstance(given, dict | list) else ""
    )
    return f"{path}: {error['msg']}{shown}"
