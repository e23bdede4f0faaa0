"""The built-in quotas: ``koordinator-root-quota``, ``koordinator-system-quota`` and
``koordinator-default-quota`` in ``ManagerConfig.quota_group_namespace`` (Koordinator's
``ElasticQuotaArgs.quotaGroupNamespace``, default ``koordinator-system``).

- A timer on that namespace creates those missing from the quota index (so at start, when the
  namespace appears, and within one interval of a deletion; a DELETED event of one of them
  recreates it at once). Admission refuses deleting them, but a forced etcd delete or a deleted
  namespace is possible. An API server that cannot take the write yet is retried after a few
  seconds (``kopf.TemporaryError``). Koordinator's scheduler creates them too; whichever comes
  first wins.
- A timer on the root quota writes the cluster total (every node's allocatable, from the node
  index) into it every ``ManagerConfig.resync_seconds``, and only when it changed, so a node added,
  removed or resized shows within one interval and a burst of node changes makes one write.
  Neither timer puts a finalizer on its object (``operators.handlers.timers``).
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from apis.extension import quota as keys
from apis.scheduling.elasticquota import ElasticQuota
from operators.clients import QuotaClient
from operators.config import ManagerConfig
from operators.handlers import errors, timers
from operators.handlers.elasticquota import NodeIndex, QuotaIndex
from operators.logic import quota_totals
from operators.logic.quota_totals import NodeCapacity

__all__ = ["register"]

_EQ = ElasticQuota.crd
_BUILT_IN = (keys.ROOT_QUOTA_NAME, keys.SYSTEM_QUOTA_NAME, keys.DEFAULT_QUOTA_NAME)


def _nodes(index: NodeIndex) -> list[NodeCapacity]:
    return [node for store in index.values() for node in store]


class BuiltInQuotas:
    def __init__(self, config: ManagerConfig, quotas: QuotaClient) -> None:
        self._namespace = config.quota_group_namespace
        self._client = quotas

    def is_namespace(self, name: str, **_: Any) -> bool:
        return name == self._namespace

    def is_built_in(self, name: str, namespace: str | None, **_: Any) -> bool:
        return namespace == self._namespace and name in _BUILT_IN

    def is_root(self, name: str, namespace: str | None, **_: Any) -> bool:
        return namespace == self._namespace and name == keys.ROOT_QUOTA_NAME

    def _indexed(self, name: str, elastic_quotas: QuotaIndex) -> bool:
        return any(q.metadata.namespace == self._namespace for q in elastic_quotas.get(name, []))

    async def ensure(self, node_capacity: NodeIndex, elastic_quotas: QuotaIndex, logger: kopf.Logger) -> None:
        """Create the built-in quotas that neither the index nor the API server knows."""
        for name in _BUILT_IN:
            if self._indexed(name, elastic_quotas):
                continue
            with errors.api_errors(f"read the built-in quota {self._namespace}/{name}"):
                if await self._client.get(self._namespace, name) is not None:
                    continue
            desired = (
                quota_totals.cluster_root_quota(_nodes(node_capacity))
                if name == keys.ROOT_QUOTA_NAME
                else quota_totals.built_in_quota(name)
            )
            with errors.api_errors(f"create the built-in quota {self._namespace}/{name}"):
                created = await self._client.create(desired.new_quota(name, self._namespace))
            if created:
                logger.info(f"created the built-in quota {self._namespace}/{name}")

    async def on_namespace(
        self, node_capacity: NodeIndex, elastic_quotas: QuotaIndex, logger: kopf.Logger, **_: Any
    ) -> None:
        await self.ensure(node_capacity, elastic_quotas, logger)

    async def on_quota(
        self,
        type: str | None,
        node_capacity: NodeIndex,
        elastic_quotas: QuotaIndex,
        logger: kopf.Logger,
        **_: Any,
    ) -> None:
        if type == "DELETED":
            await self.ensure(node_capacity, elastic_quotas, logger)

    async def sync_root_total(
        self, body: kopf.Body, patch: kopf.Patch, memo: Any, node_capacity: NodeIndex, **_: Any
    ) -> None:
        """Write the cluster total into the root quota when it differs from what is stored."""
        try:
            current = ElasticQuota.model_validate(dict(body))
        except ValidationError as exc:
            errors.raise_once(memo, "spec", errors.invalid_object("ElasticQuota", exc))
            return
        errors.raise_once(memo, "spec", None)
        desired = quota_totals.cluster_root_quota(_nodes(node_capacity))
        if desired.differs_from(current):
            patch.update(desired.merge_patch(current))


def register(registry: kopf.OperatorRegistry, config: ManagerConfig, quotas: QuotaClient) -> None:
    """Create the built-in quotas and keep the root's total (needs the node index of ``elasticquota``)."""
    built_in = BuiltInQuotas(config, quotas)
    on_namespace: Any = built_in.on_namespace  # Kopf's handler protocols do not list index kwargs
    on_quota: Any = built_in.on_quota
    sync: Any = built_in.sync_root_total
    timers.resync_timer(
        "",
        "v1",
        "namespaces",
        id="builtin_quotas_namespace",
        interval=config.resync_seconds,
        when=built_in.is_namespace,
        registry=registry,
    )(on_namespace)
    kopf.on.event(
        _EQ.group,
        _EQ.version,
        _EQ.plural,
        id="builtin_quotas_recreate",
        when=built_in.is_built_in,
        registry=registry,
    )(on_quota)
    timers.resync_timer(
        _EQ.group,
        _EQ.version,
        _EQ.plural,
        id="root_quota_total",
        interval=config.resync_seconds,
        when=built_in.is_root,
        registry=registry,
    )(sync)
