"""Quota hook plugins (Koordinator v1.7's ``QuotaHookPlugin``), configured by
``ElasticQuotaArgs.hookPlugins`` and loaded as Python entry points.

A hook package declares its factories under the entry-point group ``koordinator_py.quota_hooks``;
the entry point's name is the ``factoryKey`` the args refer to::

    [project.entry-points."koordinator_py.quota_hooks"]
    team-limits = "my_package.hooks:TeamLimits"

A factory is called as ``factory(reader, key, factory_args)`` (``key`` and ``factoryArgs`` from the
args entry; ``reader`` reads the current quota figures) and returns a ``QuotaHook``. Factories can
also be registered in-process with ``register_factory`` (the loader looks there first, then at the
entry points). A ``factoryKey`` found in neither stops koord-scheduler at start-up.

Hooks subclass ``QuotaHook`` and override what they need; every method runs inside the
scheduler's event loop, so it must be quick and must not block:

- ``replace_quotas(quotas)``: the full list of ElasticQuotas (a watch (re)list, Koordinator's
  ``ResetQuotasForHookPlugins``). Returning a list makes the scheduler use it instead (to adjust
  a quota's min or max, say); None keeps the list.
- ``on_quota_update(old, new)``: one quota created (``old`` None), changed, or deleted (``new``
  None) (Koordinator's ``Pre``/``PostQuotaUpdate``). Returning a quota makes the scheduler use it
  instead of ``new``; None keeps ``new``.
- ``on_pod_updated(quota, old, new)``: the pod-update hook, for every change of a pod on a node
  charged to ``quota``: seen bound or changed (``old`` its previous state, None if it was not on a
  node), deleted or finished (``new`` None), reserved (``old`` None) and unreserved (``new`` None)
  by this scheduler.
- ``check_pod(quota, pod)``: Koordinator's ``CheckPod``, after the quota checks passed at
  PreFilter: a returned reason rejects the pod (Unschedulable); None admits it.

A hook that raises is logged and treated as returning None: a broken hook never fails a
scheduling cycle or stops the informers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import ParamSpec, TypeVar

from apis.scheduling.elasticquota import ElasticQuota as ElasticQuotaObject
from scheduler.cache.pod_info import PodInfo
from scheduler.quota import Figures

__all__ = [
    "ENTRY_POINT_GROUP",
    "HookFactory",
    "Hooks",
    "QuotaHook",
    "QuotaReader",
    "build",
    "find_factory",
    "register_factory",
]

ENTRY_POINT_GROUP = "koordinator_py.quota_hooks"

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class QuotaReader:
    """Read-only access to the quotas (Koordinator's ``QuotaInfoReader``)."""

    figures: Callable[[str], Figures | None]
    """A quota's figures now (min, max, runtime, used ... in integer units), None if unknown."""
    children: Callable[[str], list[str]]
    """The names of a quota's children."""


class QuotaHook:
    """Base class of a quota hook plugin: every method does nothing unless overridden."""

    def __init__(self, reader: QuotaReader, key: str, args: str) -> None:
        self.reader = reader
        self.key = key
        self.args = args

    def replace_quotas(self, quotas: Sequence[ElasticQuotaObject]) -> Sequence[ElasticQuotaObject] | None:
        return None

    def on_quota_update(
        self, old: ElasticQuotaObject | None, new: ElasticQuotaObject | None
    ) -> ElasticQuotaObject | None:
        return None

    def on_pod_updated(self, quota: str, old: PodInfo | None, new: PodInfo | None) -> None:
        return None

    def check_pod(self, quota: str, pod: PodInfo) -> str | None:
        return None


HookFactory = Callable[[QuotaReader, str, str], QuotaHook]

_factories: dict[str, HookFactory] = {}


def register_factory(factory_key: str, factory: HookFactory) -> None:
    """Make ``factory_key`` available to ``hookPlugins`` without an entry point."""
    _factories[factory_key] = factory


def find_factory(factory_key: str) -> HookFactory | None:
    """The factory registered as ``factory_key``, else the entry point of that name in
    ``koordinator_py.quota_hooks`` (loaded once), else None."""
    factory = _factories.get(factory_key)
    if factory is not None:
        return factory
    for entry in entry_points(group=ENTRY_POINT_GROUP, name=factory_key):
        loaded: HookFactory = entry.load()
        _factories[factory_key] = loaded
        return loaded
    return None


class Hooks:
    """The configured hooks of one ElasticQuota plugin, called in ``hookPlugins`` order."""

    def __init__(self, hooks: Sequence[QuotaHook]) -> None:
        self.hooks = tuple(hooks)
        self._last: dict[str, ElasticQuotaObject] = {}

    @staticmethod
    def _safe(hook: QuotaHook, method: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        try:
            return method(*args, **kwargs)
        except Exception:
            log.exception("quota hook %s failed in %s", hook.key, getattr(method, "__name__", method))
            return None

    def replace_quotas(self, quotas: Sequence[ElasticQuotaObject]) -> Sequence[ElasticQuotaObject]:
        if not self.hooks:
            return quotas
        for hook in self.hooks:
            replaced = self._safe(hook, hook.replace_quotas, quotas)
            if replaced is not None:
                quotas = replaced
        self._last = {q.metadata.name or "": q for q in quotas}
        return quotas

    def on_quota(self, quota: ElasticQuotaObject) -> ElasticQuotaObject:
        if not self.hooks:
            return quota
        old = self._last.get(quota.metadata.name or "")
        for hook in self.hooks:
            replaced = self._safe(hook, hook.on_quota_update, old, quota)
            if replaced is not None:
                quota = replaced
        self._last[quota.metadata.name or ""] = quota
        return quota

    def on_quota_deleted(self, quota: ElasticQuotaObject) -> None:
        old = self._last.pop(quota.metadata.name or "", quota)
        for hook in self.hooks:
            self._safe(hook, hook.on_quota_update, old, None)

    def on_pod_updated(self, quota: str, old: PodInfo | None, new: PodInfo | None) -> None:
        for hook in self.hooks:
            self._safe(hook, hook.on_pod_updated, quota, old, new)

    def check_pod(self, quota: str, pod: PodInfo) -> str | None:
        for hook in self.hooks:
            reason = self._safe(hook, hook.check_pod, quota, pod)
            if reason:
                return f"quota {quota}: {reason} (quota hook {hook.key})"
        return None


def build(confs: Sequence[tuple[str, str, str]], reader: QuotaReader) -> Hooks:
    """Build the hooks of ``(key, factoryKey, factoryArgs)`` entries; raise naming every entry
    that cannot be built (Koordinator's ``initHookPlugins``)."""
    hooks: list[QuotaHook] = []
    problems: list[str] = []
    for key, factory_key, args in confs:
        factory = find_factory(factory_key)
        if factory is None:
            problems.append(f"hook plugin {key}: factory {factory_key} not found")
            continue
        try:
            hooks.append(factory(reader, key, args))
        except Exception as exc:
            problems.append(f"hook plugin {key}: factory {factory_key} failed: {exc}")
    if problems:
        raise ValueError("ElasticQuotaArgs.hookPlugins: " + "; ".join(problems))
    return Hooks(hooks)
