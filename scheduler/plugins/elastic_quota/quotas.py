"""The ElasticQuota and ElasticQuotaProfile objects the scheduler knows, and which quota a pod charges.

``QuotaIndex`` is fed by the two watches. It turns each quota object into a ``QuotaInfo`` (integer
units, the tree labels decoded) and keeps the three built-in quotas present even when no object
exists for them: ``koordinator-root-quota`` (the top of the default tree),
``koordinator-system-quota`` and ``koordinator-default-quota`` (their max from the plugin args).

Pod to quota (algorithms.md 4.1), in order: the pod label ``quota.scheduling.koordinator.sh/name``
(a label naming an unknown quota means the default quota); a quota named like the pod's namespace
in that namespace; a quota whose ``namespaces`` annotation lists the namespace; else
``koordinator-default-quota``. With the feature gate ``DisableDefaultQuota``, only the label counts:
a pod without it, or naming a quota that does not exist, charges no quota (Koordinator's
``GetQuotaName`` and ``getPodAssociateQuotaNameAndTreeID`` under that gate).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apis.errors import InvalidValue
from apis.extension import quota as quota_ext
from apis.extension.colocation import transform_deprecated_batch_resources
from apis.quantity import Quantity
from apis.quota.elasticquotaprofile import ElasticQuotaProfile
from apis.resources import to_int_units
from apis.scheduling.elasticquota import ElasticQuota
from scheduler.plugins.elastic_quota.writer import USED_KEY, resource_json
from scheduler.quota import QuotaSpec
from scheduler.quota.tree import Resources

__all__ = ["QuotaIndex", "QuotaInfo", "int_units"]

log = logging.getLogger(__name__)


def int_units(resources: Mapping[str, Quantity] | None) -> dict[str, int]:
    """A ResourceList in the scheduler's integer units (``apis.resources.to_int_units``)."""
    return {name: to_int_units(name, q) for name, q in (resources or {}).items()}


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """One quota as the scheduler uses it."""

    spec: QuotaSpec
    namespace: str
    exists: bool = True
    """An ElasticQuota object exists (False: a built-in quota the scheduler assumes)."""
    is_tree_root: bool = False
    """Labelled ``is-root=true``: the top of a profile's tree."""
    tree_id: str = ""
    profile: str = ""
    """The ``profile`` label: the ElasticQuotaProfile that made this tree root."""
    ignore_default_tree: bool = False
    total_resource: Resources = field(default_factory=dict)
    """The ``total-resource`` annotation of a tree root (used when no profile is known)."""
    namespaces: tuple[str, ...] = ()
    observed: Mapping[str, str] = field(default_factory=dict)
    """The figures the object carries now (annotation key or ``status.used`` -> text), so that the
    scheduler writes only what changed."""

    @property
    def name(self) -> str:
        return self.spec.name


def _observed(quota: ElasticQuota) -> dict[str, str]:
    annotations = quota.metadata.annotations or {}
    observed = {key: value for key, value in annotations.items() if key.startswith(quota_ext.QUOTA_PREFIX)}
    used = quota.status.used if quota.status is not None else None
    if used is not None:
        observed[USED_KEY] = resource_json(int_units(used))
    return observed


class QuotaIndex:
    """Every quota and profile, by name; ``version`` changes whenever anything a figure depends on does."""

    def __init__(
        self,
        *,
        namespace: str,
        default_max: Mapping[str, Quantity],
        system_max: Mapping[str, Quantity],
        disable_default_quota: bool = False,
    ) -> None:
        self.namespace = namespace
        self.disable_default_quota = disable_default_quota
        self._builtin = {
            quota_ext.ROOT_QUOTA_NAME: QuotaInfo(
                QuotaSpec(quota_ext.ROOT_QUOTA_NAME, ""), namespace, exists=False
            ),
            quota_ext.SYSTEM_QUOTA_NAME: self._builtin_leaf(quota_ext.SYSTEM_QUOTA_NAME, system_max),
            quota_ext.DEFAULT_QUOTA_NAME: self._builtin_leaf(quota_ext.DEFAULT_QUOTA_NAME, default_max),
        }
        self._objects: dict[str, QuotaInfo] = {}
        self.quotas: dict[str, QuotaInfo] = dict(self._builtin)
        self.profiles: dict[tuple[str, str], ElasticQuotaProfile] = {}
        self._by_namespace: dict[str, str] = {}
        self.version = 0
        """Changes when the trees must be rebuilt (a quota added, removed or moved, a profile)."""
        self.spec_version = 0
        """Changes when a quota's min, max, shared weight or lending changed (``respecced``)."""
        self.respecced: set[str] = set()
        """The quotas whose min, max, shared weight or lending changed since the plugin last asked."""
        self.mapping_version = 0
        """Changes when the pod -> quota mapping may have changed (quotas added, removed, renamed)."""

    def _builtin_leaf(self, name: str, max_resources: Mapping[str, Quantity]) -> QuotaInfo:
        limits = int_units(max_resources)
        spec = QuotaSpec(name, quota_ext.ROOT_QUOTA_NAME, max=limits, shared_weight=limits)
        return QuotaInfo(spec, self.namespace, exists=False)

    # ---- informer side -----------------------------------------------------------------------

    def on_quota(self, quota: ElasticQuota) -> None:
        info = _info(quota)
        old = self._objects.get(info.name)
        self._objects[info.name] = info
        if old is None or _place(old) != _place(info) or info.is_tree_root:
            self._rebuild()
            return
        current = self.quotas[info.name]  # its parent as the tree placed it (orphans: the root)
        self.quotas[info.name] = dataclasses.replace(
            info, spec=dataclasses.replace(info.spec, parent=current.spec.parent)
        )
        if _shape(old) != _shape(info):  # min, max, weight or lending: that quota's path only
            self.respecced.add(info.name)
            self.spec_version += 1

    def on_quota_deleted(self, quota: ElasticQuota) -> None:
        if self._objects.pop(quota.metadata.name or "", None) is not None:
            self._rebuild()

    def replace_quotas(self, quotas: Iterable[ElasticQuota]) -> None:
        self._objects = {info.name: info for info in map(_info, quotas)}
        self._rebuild()

    def on_profile(self, profile: ElasticQuotaProfile) -> None:
        self.profiles[(profile.metadata.namespace or "default", profile.metadata.name or "")] = profile
        self.version += 1

    def on_profile_deleted(self, profile: ElasticQuotaProfile) -> None:
        self.profiles.pop((profile.metadata.namespace or "default", profile.metadata.name or ""), None)
        self.version += 1

    def replace_profiles(self, profiles: Iterable[ElasticQuotaProfile]) -> None:
        self.profiles = {(p.metadata.namespace or "default", p.metadata.name or ""): p for p in profiles}
        self.version += 1

    def _rebuild(self) -> None:
        self.quotas = {**self._builtin, **self._objects}
        root = quota_ext.ROOT_QUOTA_NAME
        for name, info in list(self.quotas.items()):
            parent = info.spec.parent
            if info.is_tree_root or name == root:
                parent = ""
            elif parent not in self.quotas or parent == name:
                parent = root  # an orphan hangs under the root rather than vanishing
            if parent != info.spec.parent:
                self.quotas[name] = _with_parent(info, parent)
        self._by_namespace = {}
        for name, info in sorted(self.quotas.items()):
            for namespace in info.namespaces:
                self._by_namespace.setdefault(namespace, name)
        self.version += 1
        self.mapping_version += 1

    # ---- lookups -----------------------------------------------------------------------------

    def quota_for(self, namespace: str, labels: Mapping[str, str]) -> str:
        """The quota a pod in ``namespace`` with ``labels`` charges to (module docstring); "" for
        none, which only ``DisableDefaultQuota`` gives."""
        named = labels.get(quota_ext.LABEL_QUOTA_NAME)
        if self.disable_default_quota:
            return named if named and named in self.quotas else ""
        if named:
            return named if named in self.quotas else quota_ext.DEFAULT_QUOTA_NAME
        same = self.quotas.get(namespace)
        if same is not None and same.exists and same.namespace == namespace:
            return namespace
        return self._by_namespace.get(namespace, quota_ext.DEFAULT_QUOTA_NAME)

    def profile_of(self, root: QuotaInfo) -> ElasticQuotaProfile | None:
        """The profile behind a tree root: by its ``profile`` label, else by ``spec.quotaName``."""
        if root.profile:
            found = self.profiles.get((root.namespace, root.profile))
            if found is not None:
                return found
        for (namespace, _), profile in sorted(self.profiles.items()):
            if (
                namespace == root.namespace
                and profile.spec is not None
                and profile.spec.quota_name == root.name
            ):
                return profile
        return None


def _shape(info: QuotaInfo) -> QuotaInfo:
    """What figures depend on: everything but the observed figures."""
    return dataclasses.replace(info, observed={})


def _place(info: QuotaInfo) -> QuotaInfo:
    """What places the quota in the trees (everything but its min, max, shared weight, lending and
    the observed figures): a change of it rebuilds the index."""
    spec = info.spec
    return dataclasses.replace(
        info,
        observed={},
        spec=dataclasses.replace(spec, min={}, max={}, shared_weight={}, lends=True),
    )


def _with_parent(info: QuotaInfo, parent: str) -> QuotaInfo:
    return dataclasses.replace(info, spec=dataclasses.replace(info.spec, parent=parent))


def _info(quota: ElasticQuota) -> QuotaInfo:
    meta = quota.metadata
    name = meta.name or ""
    labels = meta.labels or {}
    annotations = meta.annotations or {}
    spec = quota.spec
    # Koordinator's ElasticQuota transformer: the deprecated koordinator.sh/batch-* names count as
    # kubernetes.io/batch-*, the names pods and nodes are read with.
    max_q = transform_deprecated_batch_resources((spec.max if spec is not None else None) or {})
    min_q = transform_deprecated_batch_resources((spec.min if spec is not None else None) or {})
    weight = quota_ext.resolve_shared_weight(annotations, dict(max_q))
    if weight.warning:
        log.warning("ElasticQuota %s: %s", name, weight.warning)
    try:
        namespaces = tuple(quota_ext.get_quota_namespaces(annotations) or ())
    except InvalidValue as exc:
        log.warning("ElasticQuota %s: %s; ignored", name, exc)
        namespaces = ()
    try:
        total = int_units(quota_ext.get_quota_resource_list(annotations, quota_ext.ANNOTATION_TOTAL_RESOURCE))
    except InvalidValue:
        total = {}
    return QuotaInfo(
        spec=QuotaSpec(
            name=name,
            parent=quota_ext.parent_quota_name(name, labels),
            min=int_units(min_q),
            max=int_units(max_q),
            shared_weight=int_units(weight.value),
            lends=quota_ext.allow_lent_resource(labels),
        ),
        namespace=meta.namespace or "default",
        is_tree_root=quota_ext.is_tree_root(labels) and name != quota_ext.ROOT_QUOTA_NAME,
        tree_id=labels.get(quota_ext.LABEL_QUOTA_TREE_ID, ""),
        profile=labels.get(quota_ext.LABEL_QUOTA_PROFILE, ""),
        ignore_default_tree=quota_ext.ignore_default_tree(labels),
        total_resource=total,
        namespaces=namespaces,
        observed=_observed(quota),
    )
